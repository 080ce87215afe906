"""sim.simulate takes a path; sim.dataframes carries the result's figures with cpu and trace
columns, and the frames of several runs concatenate."""

import numpy as np
import pandas as pd
import pytest

from kvsim import sim, traces

CPUS = ["graviton3", "epyc-7713"]


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory):
    """Random loads, stores and prefetches over 4 MiB, three named tags, COMMAND markers."""
    rng = np.random.default_rng(11)
    n = 20_000
    r = np.zeros(n, dtype=traces.RECORD_DTYPE)
    r["kind"] = rng.choice([traces.KIND_LOAD, traces.KIND_STORE, traces.KIND_PREFETCH], n,
                           p=[0.7, 0.2, 0.1])
    r["addr"] = 0x10000000 + rng.integers(0, 1 << 16, n) * 64
    r["size"] = np.where(r["kind"] == traces.KIND_PREFETCH, 1, 8)
    r["gap"] = rng.integers(0, 8, n)
    r["tag"] = rng.integers(0, 3, n)
    every = np.arange(n) % 100 == 0
    r["kind"][every] = traces.KIND_MARKER
    r["flags"][every] = traces.MARK_COMMAND
    r["size"][every] = 0
    path = tmp_path_factory.mktemp("df") / "rand.kvt"
    header = {"producer": {"name": "tests", "version": "0", "git_commit": None},
              "workload": {"name": "random"}, "tags": ["other", "bucket", "value"]}
    with traces.Writer(path, header) as w:
        w.write(r)
    return path


def test_path_gives_the_reader_result(trace_path):
    for cpu in CPUS:
        a = sim.simulate(trace_path, cpu)
        with traces.open(trace_path) as tr:
            b = sim.simulate(tr, cpu)
        assert a["trace"] == str(trace_path) and b["trace"] is None
        assert {k: v for k, v in a.items() if k != "trace"} == \
            {k: v for k, v in b.items() if k != "trace"}


def test_frames_carry_the_result(trace_path):
    res = sim.simulate(trace_path, CPUS[0])
    f = sim.dataframes(res)
    assert set(f) == {"levels", "by_tag", "timing", "stalls", "phases", "prefetch", "commands",
                      "timeline"}
    for df in f.values():
        assert list(df.columns[:2]) == ["cpu", "trace"]
        assert (df["cpu"] == res["cpu"]).all() and (df["trace"] == str(trace_path)).all()
    lv = f["levels"]
    assert list(lv["level"]) == [x["name"] for x in res["levels"]]
    assert list(lv["role"]) == [x["role"] for x in res["levels"]]
    assert list(lv["demand_misses"]) == [x["demand_misses"] for x in res["levels"]]
    assert list(lv["swpf_misses"]) == [x["by_kind"]["swpf"]["misses"] for x in res["levels"]]
    bt = f["by_tag"]
    assert set(bt["tag_name"]) <= {"other", "bucket", "value"}
    for x in res["levels"]:
        assert bt[bt.level == x["name"]]["misses"].sum() == x["misses"]
    tm = f["timing"]
    assert len(tm) == 1 and tm["cycles"].iloc[0] == res["cycles"]
    assert tm["ipc"].iloc[0] == res["ipc"]
    for k, v in res["timing"]["stall_cycles"].items():
        assert tm[f"stall:{k}"].iloc[0] == v
    ph = f["phases"]
    assert len(ph) == len(res["phases"]) * len(res["levels"])
    st = f["stalls"]
    assert dict(zip(st["cause"], st["cycles"], strict=True)) == res["timing"]["stall_cycles"]
    pf = f["prefetch"]
    want = {(w, lv): d for w in ("software", "hardware") for lv, d in res["prefetch"][w].items()}
    assert len(pf) == len(want) > 0
    for _, row in pf.iterrows():
        d = want[(row["source"], row["level"])]
        assert {k: row[k] for k in d} == d
    cm = f["commands"]
    assert cm["count"].iloc[0] == res["commands"]["count"] == 200
    assert cm["mean_cycles"].iloc[0] == res["commands"]["mean_cycles"]
    assert len(f["timeline"]) == 0  # no timeline asked for


def test_a_sweep_concatenates(trace_path):
    runs = [sim.dataframes(sim.simulate(trace_path, c), trace="rand") for c in CPUS]
    df = pd.concat([r["levels"] for r in runs], ignore_index=True)
    assert list(df["cpu"]) == [c for c in CPUS for _ in range(3)]
    assert (df["trace"] == "rand").all()
    llc = df[df.role == "LLC"].set_index("cpu")["level"]
    assert llc.to_dict() == {"graviton3": "SLC", "epyc-7713": "L3"}


def test_functional_result_has_an_empty_timing_frame(trace_path):
    f = sim.dataframes(sim.simulate(trace_path, CPUS[0], functional=True))
    assert f["timing"].empty and not f["levels"].empty


def test_concat_dataframes_joins_every_frame(trace_path):
    runs = [sim.dataframes(sim.simulate(trace_path, c), trace="rand") for c in CPUS]
    joined = sim.concat_dataframes(runs)
    assert set(joined) == set(runs[0])
    for key, df in joined.items():
        parts = [r[key] for r in runs if len(r[key])]
        assert len(df) == sum(len(p) for p in parts), key
        if parts:
            assert list(df["cpu"].unique()) == [p["cpu"].iloc[0] for p in parts]
