"""The warm-up convergence study (kvsim.experiments.warmup_convergence): its command computes
the framework's sim cells and writes the result file with the keys it always had; the
framework plans the same cells."""

import json
from pathlib import Path

import pytest

from kvsim.experiments import framework, runner
from kvsim.experiments import warmup_convergence as wc

ROOT = Path(__file__).resolve().parents[2]
CPU = "epyc-7713"


@pytest.fixture
def tiny(monkeypatch):
    """The MGET pair at a few thousand keys (the study's sizes, scaled down)."""
    monkeypatch.setitem(wc._USES, "mget", ("mget", 3000, 40, 80))
    monkeypatch.setitem(wc.WORKLOADS, "mget", wc._workload("mget"))


def _keys(x, depth=0):
    """The nested key structure of a result document (the names a reader uses)."""
    if isinstance(x, dict) and depth < 4:
        return {k: _keys(v, depth + 1) for k, v in x.items() if k != "provenance"}
    return type(x).__name__ if not isinstance(x, int | float) else "number"


def test_the_command_writes_the_cells_figures_under_the_old_keys(tiny, tmp_path):
    out = tmp_path / "w.json"
    rc = wc.main(["--cpu", CPU, "--only", "mget", "--out", str(out)])
    doc = json.loads(out.read_text())
    row = doc["workloads"]["mget"]
    assert rc == (0 if row["converged"] else 1)
    assert list(row["runs"]) == ["N", "4N", "N cold", "4N cold"]
    for label, r in row["runs"].items():
        assert r["speedup"] == round(r["baseline"]["cycles"] / r["variant"]["cycles"], 4)
        assert r["ops"] == (40 if label.startswith("N") else 160)
        assert (r["warmup_ops"] == 0) == label.endswith("cold")
        # a cold run has no --warmup-ops prefix (the setup's own warm-up it may carry)
        warmed = row["runs"][label.removesuffix(" cold")]["baseline"]["warmup_records"]
        assert (r["baseline"]["warmup_records"] < warmed) == label.endswith("cold")
    assert row["relative_difference"] == round(
        abs(row["runs"]["4N"]["speedup"] - row["runs"]["N"]["speedup"])
        / row["runs"]["4N"]["speedup"], 4)
    published = json.loads((ROOT / "results" / "warmup-convergence.json").read_text())
    assert _keys(doc) == {**_keys(published), "workloads": {"mget": _keys(
        published)["workloads"]["mget"]}}


def test_the_framework_plans_the_commands_cells():
    planned = runner.plan(["warmup_convergence"], "full", [CPU])["warmup_convergence"]
    assert planned == wc.specs(CPU)
    assert {s["params"]["run"] for s in planned} == {r for r, _, _ in wc.RUNS}
    assert framework.get("warmup_convergence").cells("small", [CPU]) == wc.specs(
        CPU, scale=0.1, keys_scale=0.1)
