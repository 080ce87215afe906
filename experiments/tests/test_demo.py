"""The demo study at a tiny scale: it runs, and its numbers come from the traces."""

import json
import statistics

from kvsim.sim.local import core_is_known

from .conftest import run_kvsim

# `local` where this machine's core has a timing model, else another preset
CPUS = ("local" if core_is_known() else "epyc-7713", "graviton3")


def test_demo_tiny(tmp_path):
    out = tmp_path / "demo"
    res = run_kvsim("experiment", "demo", "--out", out, "--keys", "3000", "--ops", "400",
                    "--cpu", CPUS[0], "--cpu", CPUS[1], "--rounds", "6")
    assert res.returncode == 0, res.stderr.decode()
    meta = json.loads((out / "demo.json").read_text())
    rows = meta["rows"]
    assert {(r["cpu"], r["variant"]) for r in rows} == {
        (c, v) for c in CPUS for v in ("naive", "lookahead")}
    for r in rows:
        assert r["cycles"] > 0 and r["records"] > 0
    naive = {r["cpu"]: r for r in rows if r["variant"] == "naive"}
    look = {r["cpu"]: r for r in rows if r["variant"] == "lookahead"}
    for cpu in naive:
        assert look[cpu]["records"] > naive[cpu]["records"], "lookahead adds prefetch records"
    for r in rows:  # demand columns beside the all-kinds ones, from the kept traces
        sim_res = json.loads(run_kvsim("simulate", out / f"pipeline-{r['variant']}.kvt",
                                       "--cpu", r["cpu"], "--json", check=True).stdout)
        for i, lv in enumerate(sim_res["levels"]):
            assert r[f"L{i + 1}_demand_misses"] == lv["demand_misses"]
            assert r[f"L{i + 1}_misses"] == lv["misses"]
    for key in ("commit", "dirty", "machine", "date_utc"):
        assert key in meta["provenance"]
    assert meta["params"]["rounds"] == 6
    native = meta["native"]
    cpu = native["cpu_s"]
    assert [len(cpu[v]["runs"]) for v in ("naive", "lookahead")] == [6, 6]
    assert native["naive"] == statistics.median(cpu["naive"]["runs"]) > 0
    assert native["lookahead"] == statistics.median(cpu["lookahead"]["runs"]) > 0
    ratios = [a / b for a, b in zip(cpu["naive"]["runs"], cpu["lookahead"]["runs"],
                                    strict=True)]
    assert native["round_ratios"] == ratios
    assert native["speedup"] == statistics.median(ratios)
    low, high = native["speedup_ci95"]
    assert low <= native["speedup"] <= high
    assert native["verdict"] == ("within noise" if low <= 1.0 <= high
                                 else "faster" if low > 1.0 else "slower")
    out_text = res.stdout.decode()
    assert f"speedup {native['speedup']:.2f}x" in out_text
    assert native["verdict"] in out_text
    assert (out / "demo.png").stat().st_size > 1000
    assert (out / "demo.csv").exists()
    assert res.stderr == b"", "no progress bar when stderr is not a terminal"


def test_demo_bad_rounds_and_cpu(tmp_path):
    res = run_kvsim("experiment", "demo", "--out", tmp_path / "d", "--rounds", "0")
    assert res.returncode != 0 and b"--rounds" in res.stderr
    res = run_kvsim("experiment", "demo", "--out", tmp_path / "d", "--cpu", "no-such-cpu")
    assert res.returncode != 0 and b"no-such-cpu" in res.stderr
    assert len(res.stderr.decode().strip().splitlines()) == 1
    assert not (tmp_path / "d").exists()


def test_the_registered_study_computes_the_demo_rows(tmp_path, monkeypatch):
    """`kvsim experiment run pipeline_demo` plans the cells the command computes: the same
    rows (cycles, misses of every kind and demand misses per level), from the framework."""
    import pandas as pd

    from kvsim.experiments import pipeline_demo, runner

    monkeypatch.setitem(pipeline_demo.SCALES, "small", (3000, 400, 20_000, 2))
    res = runner.run(["pipeline_demo"], tmp_path / "sweep", cpus=list(CPUS),
                     log=lambda *_: None)
    assert res["failed"] == [] and res["computed"] == 2 * len(CPUS) + 1
    rows = pd.read_parquet(tmp_path / "sweep" / "pipeline_demo" / "pipeline_demo.parquet")
    swept = {(r["cpu"], r["variant"]): pipeline_demo.row_of(
        {"cpu": r["cpu"], "options": {"variant": r["variant"]}},
        {k: v for k, v in r.items() if pd.notna(v)}) for _, r in rows[rows.kind == "sim"]
        .iterrows()}
    df = pipeline_demo.run(tmp_path / "demo", keys=3000, ops=400, cpus=list(CPUS), rounds=2)
    for r in df.to_dict(orient="records"):
        got = swept[(r["cpu_label"], r["variant"])]  # the sweep's rows name a CPU so
        for k in got:
            if k.startswith("L") or k in ("cycles", "records", "instructions"):
                assert got[k] == r[k], k
    native = rows[rows.kind == "native"].iloc[0]
    assert native["rounds"] == 2 and native["speedup"] > 0
    md = (tmp_path / "sweep" / "pipeline_demo" / "pipeline_demo.md").read_text()
    assert "lookahead" in md and "L1_demand_misses" in md
