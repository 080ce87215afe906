"""kvsim compare: its rows agree with `kvsim simulate` on the same traces; tracing and
--trace give the same rows; text, CSV and JSON carry the same figures; bad input is one line."""

import csv
import io
import json

import pytest

from kvsim.experiments import compare as cmp

from .conftest import SMALL, run_kvsim
from .test_cli import assert_one_line_error

CPUS = ["graviton3", "epyc-7713"]
VARIANTS = ["naive", "lookahead"]


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """`kvsim compare --json` with the traces kept: (rows, trace directory)."""
    d = tmp_path_factory.mktemp("compare")
    args = ["compare", "pipeline", *[a for v in VARIANTS for a in ("--variant", v)],
            *[a for c in CPUS for a in ("--cpu", c)], *SMALL, "--keep-traces", d, "--json"]
    res = run_kvsim(*args)
    assert res.returncode == 0, res.stderr.decode()
    return json.loads(res.stdout), d


def test_rows_agree_with_simulate(traced):
    rows, d = traced
    assert [(r["cpu"], r["variant"]) for r in rows] == [(c, v) for c in CPUS for v in VARIANTS]
    for r in rows:
        sim = json.loads(run_kvsim("simulate", d / f"pipeline-{r['variant']}.kvt", "--cpu",
                                   r["cpu"], "--json", check=True).stdout)
        assert r["demand_misses"] == [lv["demand_misses"] for lv in sim["levels"]]
        assert r["levels"] == [lv["name"] for lv in sim["levels"]]
        assert r["roles"] == [lv["role"] for lv in sim["levels"]]
        assert r["cycles"] == sim["cycles"]
        assert r["ipc"] == sim["ipc"]
        assert r["mlp"] == sim["timing"]["mlp"]
        assert r["operations"] == sim["commands"]["count"] > 0
        assert r["cycles_per_op"] == pytest.approx(sim["cycles"] / r["operations"])
        for i, lv in enumerate(sim["levels"]):
            assert sum(c[i] for c in r["demand_misses_by_structure"].values()) == \
                lv["demand_misses"]
        sw = sum(d.get("useful", 0) for d in sim["prefetch"]["software"].values())
        assert r["prefetch"]["software"].get("useful", 0) == sw


def test_speedup_is_against_the_first_variant(traced):
    rows, _ = traced
    for cpu in CPUS:
        base, other = [r for r in rows if r["cpu"] == cpu]
        assert base["speedup"] == 1.0
        assert other["speedup"] == pytest.approx(base["cycles"] / other["cycles"])
    # lookahead issues software prefetches, naive none
    assert all((r["prefetch"]["software"].get("issued", 0) > 0) == (r["variant"] == "lookahead")
               for r in rows)


def test_given_traces_give_the_same_rows(traced):
    rows, d = traced
    res = run_kvsim("compare", *[a for v in VARIANTS
                                 for a in ("--trace", f"{v}={d / f'pipeline-{v}.kvt'}")],
                    *[a for c in CPUS for a in ("--cpu", c)], "--json")
    assert res.returncode == 0, res.stderr.decode()
    assert json.loads(res.stdout) == rows


def test_text_and_csv_carry_the_rows(traced):
    rows, d = traced
    text = cmp.rows_text(rows)
    for cpu in CPUS:
        assert f"== {cpu}: " in text
    block = text.split("== epyc-7713")[1]
    look = [r for r in rows if r["cpu"] == "epyc-7713"][1]
    line = next(ln for ln in block.splitlines() if ln.startswith("  LLC ("))
    assert line.split()[-1] == f"{look['demand_misses'][-1]:,}"
    table = list(csv.DictReader(io.StringIO(cmp.rows_csv(rows))))
    assert len(table) == len(rows)
    for t, r in zip(table, rows, strict=True):
        assert (t["cpu"], t["variant"]) == (r["cpu"], r["variant"])
        assert int(t["demand_misses_LLC"]) == r["demand_misses"][-1]
        assert float(t["speedup"]) == pytest.approx(r["speedup"])


def test_bad_input_is_one_line(tmp_path):
    assert_one_line_error(run_kvsim("compare", "pipeline", "--variant", "naive", "--cpu",
                                    "graviton3", *SMALL), "two --variant")
    assert_one_line_error(run_kvsim("compare", "pipeline", "--variant", "naive", "--variant",
                                    "lookahead", "--cpu", "no-such-cpu", *SMALL), "no-such-cpu")
    assert_one_line_error(run_kvsim("compare", "pipeline", "--variant", "naive", "--variant",
                                    "no-such-variant", "--cpu", "graviton3", *SMALL))
    assert_one_line_error(run_kvsim("compare", "pipeline", "--trace", tmp_path / "x.kvt",
                                    "--cpu", "graviton3"), "--trace")
    assert_one_line_error(run_kvsim("compare", "--trace", tmp_path / "missing.kvt",
                                    "--cpu", "graviton3"), "missing.kvt")


def test_plot_is_written_whole(traced, tmp_path):
    rows, _ = traced
    path = cmp.plot(rows, tmp_path / "c.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["c.png"]
    with pytest.raises(OSError):
        cmp.plot(rows, tmp_path / "no-such-dir" / "c.png")
    assert not (tmp_path / "no-such-dir").exists()
