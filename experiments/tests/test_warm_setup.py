"""The setup carried into c_ref traces as a warm-up prefix (``--warm-setup``; traces/FORMAT.md,
"The setup's warm-up"): a keyspace that fits a preset's last level has no last-level demand
misses on its own structures in the measured phase; the compact form predicts within 1 % of
the setup's own accesses; ``kvsim simulate`` says whether a trace carries its setup."""

import io
import json

import numpy as np
import pytest

from kvsim import sim, traces
from kvsim.experiments import cref, warm_setup

#: The keyspace's own structures (trace tags).
KEYSPACE_TAGS = ("bucket", "child_bucket", "dict_table", "dict_entry", "key", "object", "value")


def _llc_demand_misses(res: dict) -> dict[str, int]:
    llc = res["levels"][-1]["name"]
    out: dict[str, int] = {}
    for r in res["by_tag"]:
        if r["level"] == llc and r["kind"] in ("load", "store"):
            out[r["tag_name"]] = out.get(r["tag_name"], 0) + r["misses"]
    return out


@pytest.mark.parametrize("cpu", ["xeon-8488c", "graviton3"])
@pytest.mark.parametrize("workload,opts", [
    ("iterate", {"keys": 20_000, "op": "keys"}),
    ("iterate", {"keys": 20_000, "op": "keys", "table": "dict", "layout": "legacy"}),
    ("pipeline", {"keys": 20_000, "ops": 3_000}),
    ("mget", {"keys": 20_000, "ops": 300, "keys_per_command": 20}),
])
def test_fitting_keyspace_starts_warm(tmp_path, cpu, workload, opts):
    """With the setup carried, a keyspace that fits the last level (20k keys x 100 B: a few
    MiB) meets no last-level demand miss on its own structures; without it, it does (the
    check can fail)."""
    got = {}
    for mode in ("compact", "none"):
        t = tmp_path / f"{mode}.kvt"
        cref.trace(workload, t, {**opts, "warm_setup": mode})
        got[mode] = _llc_demand_misses(sim.simulate(str(t), cpu))
    warm = {t: got["compact"].get(t, 0) for t in KEYSPACE_TAGS}
    assert sum(warm.values()) == 0, warm
    assert sum(got["none"].get(t, 0) for t in KEYSPACE_TAGS) > 1000, got["none"]


def test_compact_within_one_percent_of_the_accesses(tmp_path):
    """The bound the compact form keeps (results/warm-setup-bound.json at full scale), here
    on two workloads and two presets at small scale."""
    cpus = ["xeon-8255c", "graviton4"]
    for workload, opts in (("iterate", {"keys": 15_000, "op": "keys", "variant": "valkey"}),
                           ("mget", {"keys": 15_000, "ops": 200, "keys_per_command": 50})):
        rows = warm_setup.measure(workload, opts, cpus, tmp_path)
        for r in rows:
            if r["mode"] == "compact":
                assert abs(r["ratio_to_accesses"] - 1) <= 0.01, r
        # and the compact prefix is smaller than the accesses
        size = {r["mode"]: r["warmup_records"] for r in rows if r["cpu"] == cpus[0]}
        assert 0 < size["compact"] < size["accesses"] and size["none"] == 0


def test_header_and_simulate_say_so(kvsim, tmp_path):
    warm, cold = tmp_path / "warm.kvt", tmp_path / "cold.kvt"
    small = ("--keys", "2000", "--ops", "200")
    kvsim("trace", "pipeline", "-o", warm, *small, check=True)
    kvsim("trace", "pipeline", "-o", cold, *small, "--warm-setup", "none", check=True)
    with traces.open(warm) as r:
        assert r.header["setup"] == "compact" and r.header["warmup"] == "prefix"
        assert r.header["format_version"] == traces.VERSION >= 3  # 3: the first with "setup"
    with traces.open(cold) as r:
        assert r.header["setup"] == "none" and r.header["warmup"] == "skipped"
    text = kvsim("simulate", warm, "--cpu", "graviton3", check=True).stdout.decode()
    assert "setup: carried as the warm-up prefix (compact" in text.splitlines()[-1]
    text = kvsim("simulate", cold, "--cpu", "graviton3", check=True).stdout.decode()
    assert "setup: NOT carried" in text.splitlines()[-1]
    res = json.loads(kvsim("simulate", cold, "--cpu", "graviton3", "--json", check=True).stdout)
    assert res["setup"] == "none"
    res = json.loads(kvsim("simulate", warm, "--cpu", "graviton3", "--cpu", "epyc-7713",
                           "--json", check=True).stdout)
    assert [r["setup"] for r in res] == ["compact", "compact"]
    # a carried setup is the trace's own warm-up: the --warmup rule is refused
    assert kvsim("simulate", warm, "--cpu", "graviton3", "--warmup", "100").returncode != 0


def test_old_trace_reads_as_not_carried(kvsim, tmp_path):
    """A version 2 trace (no "setup" key) still reads, and simulate says it starts cold."""
    old = tmp_path / "v2.kvt"
    recs = np.zeros(64, dtype=traces.RECORD_DTYPE)
    recs["addr"] = 0x10000 + 64 * np.arange(64)
    recs["size"] = 8
    buf = io.BytesIO()
    with traces.Writer(buf, {"producer": {"name": "test"}}, version=2) as w:
        w.write(recs)
    old.write_bytes(buf.getvalue())
    with traces.open(old) as r:
        assert r.version == 2 and "setup" not in r.header
    text = kvsim("simulate", old, "--cpu", "graviton3", check=True).stdout.decode()
    assert 'setup: NOT carried (no "setup" in its header)' in text



def test_the_studies_run_through_the_framework(tmp_path, monkeypatch):
    """`kvsim experiment run warm_setup warm_check` computes the commands' cells: the same
    predicted figures as ``warm_setup.measure`` and ``warm_check.predict``."""
    import pandas as pd

    from kvsim.experiments import runner, warm_check

    cpus = ["graviton3", "epyc-7713"]
    opts = {"keys": 5_000, "ops": 300, "keys_per_command": 20}
    monkeypatch.setattr(warm_setup, "WORKLOADS", (("MGET", "mget", opts),))
    monkeypatch.setitem(warm_check.SCALES, "full", (4_000, 2, 2))
    res = runner.run(["warm_setup", "warm_check"], tmp_path / "sweep", scale="full",
                     cpus=cpus, log=lambda *_: None)
    assert res["failed"] == []
    rows = pd.read_parquet(tmp_path / "sweep" / "warm_setup" / "warm_setup.parquet")
    want = warm_setup.measure("mget", opts, cpus, tmp_path)
    for w in want:
        (r,) = rows[(rows["cpu"] == w["cpu"]) & (rows["mode"] == w["mode"])].itertuples()
        assert r.cycles == w["cycles"] and r.records == w["records"]
        assert 1 / r.speedup == pytest.approx(w["ratio_to_accesses"], rel=1e-12)
    rows = pd.read_parquet(tmp_path / "sweep" / "warm_check" / "warm_check.parquet")
    nat = rows[rows.kind == "native"]
    assert len(nat) == 1 and nat.iloc[0]["rounds"] == 4  # 2 processes x 2 kept rounds
    for p in warm_check.predict(4_000, cpus, tmp_path):
        (r,) = rows[(rows["cpu"] == p["cpu"]) & (rows["setup"] == p["setup"])
                    & (rows["side"] == "b")].itertuples()
        assert r.speedup == pytest.approx(p["speedup"], rel=1e-12)
    md = (tmp_path / "sweep" / "warm_check" / "warm_check.md").read_text()
    assert "compact" in md and "sim:graviton3" in md


def test_warm_check_keeps_its_json_keys(tmp_path):
    """``python -m kvsim.experiments.warm_check`` writes every key of the published file."""
    from pathlib import Path

    from kvsim.experiments import warm_check

    out = tmp_path / "w.json"
    assert warm_check.main(["--keys", "4000", "--processes", "2", "--rounds", "2",
                            "--cpu", "graviton3", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    published = json.loads((Path(__file__).resolve().parents[2] / "results"
                            / "warm-keys-native.json").read_text())
    assert set(doc) == set(published)
    assert set(doc["native"]) == set(published["native"])
    assert set(doc["predicted"][0]) == set(published["predicted"][0])
    assert len(doc["native"]["a"]["runs"]) == 4 and len(doc["native"]["load_average_1m"]) == 2
