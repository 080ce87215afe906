"""kvsim.experiments.explore (what the notebooks show) at a tiny scale, checked against direct
simulate() runs and hand-made frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kvsim import sim, traces
from kvsim.experiments import explore

SMALL = {"keys": 2000, "ops": 200, "value_size": 32, "seed": 3}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("explore")


def _marked(flags: list[int]) -> np.ndarray:
    r = np.zeros(len(flags), dtype=traces.RECORD_DTYPE)
    for i, f in enumerate(flags):
        if f:
            r[i]["kind"], r[i]["flags"] = traces.KIND_MARKER, f
        else:
            r[i]["kind"], r[i]["size"] = traces.KIND_LOAD, 8
    return r


def test_command_window_counts_after_warm_up():
    C, B, E = traces.MARK_COMMAND, traces.MARK_WARMUP_BEGIN, traces.MARK_WARMUP_END
    r = _marked([B, C, 0, E, C, 0, 0, C, 0, C, 0, 0])
    assert explore.command_window(r, 0, 1) == (4, 3)
    assert explore.command_window(r, 1, 2) == (7, 5)  # the last command runs to the end
    with pytest.raises(ValueError, match="3 measured commands"):
        explore.command_window(r, 2, 2)
    assert explore.command_window(_marked([C, 0, C]), 0, 1) == (0, 2)


def test_workload_trace_is_made_once_per_options(folder):
    a = explore.workload_trace(folder, "pipeline", **SMALL)
    stamp = a.stat().st_mtime_ns
    assert explore.workload_trace(folder, "pipeline", **SMALL) == a
    assert a.stat().st_mtime_ns == stamp
    b = explore.workload_trace(folder, "pipeline", variant="lookahead", batch=4, **SMALL)
    assert b != a and traces.summarize(b)["records"] > traces.summarize(a)["records"]


def test_batch_timelines_cover_the_same_commands(folder):
    paths = {v: explore.workload_trace(folder, "pipeline", variant=v, **SMALL)
             for v in ("naive", "lookahead")}
    df = explore.batch_timelines(paths, "graviton3", first_command=20, commands=8)
    assert set(df["variant"]) == {"naive", "lookahead"}
    for v, path in paths.items():
        part = df[df["variant"] == v]
        recs = traces.read_all(path)
        lo, n = explore.command_window(recs, 20, 8)
        mem = np.flatnonzero(recs["kind"][lo:lo + n] < traces.KIND_MARKER) + lo
        assert part["record"].tolist() == mem.tolist()
        assert part["dispatch"].min() == 0.0
        assert (part["complete"] >= part["issue"]).all()
    # the keys looked up are the same: the same value loads in both windows
    vals = [set(df[(df.variant == v) & (df.tag == "value")]["addr"]) for v in paths]
    assert vals[0] == vals[1] and vals[0]


def test_cpu_comparison_equals_direct_runs(folder):
    path = explore.workload_trace(folder, "pipeline", **SMALL)
    frames = explore.cpu_comparison(path, ["graviton3", "xeon-8255c"])
    for cpu in ("graviton3", "xeon-8255c"):
        res = sim.simulate(path, cpu)
        lv = frames["levels"][frames["levels"]["cpu"] == cpu]
        assert lv["misses"].tolist() == [x["misses"] for x in res["levels"]]
        t = frames["timing"][frames["timing"]["cpu"] == cpu].iloc[0]
        assert t["cycles"] == res["cycles"]
        st = frames["stalls"][frames["stalls"]["cpu"] == cpu]
        assert dict(zip(st["cause"], st["cycles"], strict=True)) == \
            res["timing"]["stall_cycles"]
    assert set(frames["by_tag"]["trace"]) == {str(path)}


def test_preset_table_lists_levels_and_dram():
    df = explore.preset_table(["graviton3"])
    cpu = sim.load_cpu("graviton3")
    assert df["level"].tolist() == [c.name for c in cpu.caches] + ["DRAM"]
    assert df["latency_cycles"].tolist()[:-1] == [c.latency for c in cpu.caches]
    assert df["latency_ns"].iloc[-1] == cpu.dram_latency_ns
    assert (df["rob"] == cpu.rob).all()


def test_batching_sweep_and_best_batch(folder):
    out = explore.batching_sweep(folder, ["graviton3"], [4], [1, 4], **SMALL)
    sp = out["speedup"]
    assert sp[["variant", "batch"]].values.tolist() == [["naive", 0], ["lookahead", 1],
                                                         ["lookahead", 4]]
    naive = sp[sp.variant == "naive"].iloc[0]
    assert naive["speedup"] == 1.0
    for _, r in sp.iterrows():
        assert r["speedup"] == pytest.approx(naive["cycles"] / r["cycles"])
        res = sim.simulate(r["trace"], "graviton3")
        assert res["cycles"] == r["cycles"]
    assert set(out["prefetch"]["variant"]) <= {"naive", "lookahead"}
    best = explore.best_batch(sp)
    la = sp[sp.variant == "lookahead"]
    assert best["speedup"].tolist() == [la["speedup"].max()]


def test_best_batch_prefers_the_smaller_on_a_tie():
    sp = pd.DataFrame({"cpu": ["a"] * 4 + ["b"] * 2, "depth": [8] * 6,
                       "variant": ["naive", "lookahead", "lookahead", "lookahead",
                                   "lookahead", "lookahead"],
                       "batch": [0, 2, 4, 8, 2, 4], "speedup": [1.0, 1.3, 1.5, 1.5, 1.2, 1.1]})
    best = explore.best_batch(sp)
    assert best[["cpu", "batch"]].values.tolist() == [["a", 4], ["b", 2]]


def test_prefetch_timeliness_by_tag_follows_the_timeline(folder):
    path = explore.workload_trace(folder, "pipeline", variant="lookahead", batch=8, **SMALL)
    got = explore.prefetch_timeliness_by_tag(path, "xeon-8255c")
    cpu = sim.load_cpu("xeon-8255c")
    recs = traces.read_all(path)
    rows = sim.simulate(path, cpu, timeline=(0, len(recs)))["timeline"]
    fill = cpu.caches[cpu.swpf_fill].name
    want: dict[str, dict[str, int]] = {}
    for i, r in enumerate(rows):  # a plain scan forward from each prefetch
        if r["kind"] != "prefetch":
            continue
        line = r["addr"] // 64
        nxt = next((q for q in rows[i + 1:] if q["kind"] in ("load", "store")
                    and q["addr"] // 64 == line), None)
        out = ("dropped" if r["level"] == "dropped" else "redundant" if r["level"] == fill
               else "unused" if nxt is None else
               "timely" if nxt["issue"] >= r["complete"] else "late")
        d = want.setdefault(r["tag"], {})
        d[out] = d.get(out, 0) + 1
    assert sorted(got["tag"]) == sorted(want)
    for _, row in got.iterrows():
        w = want[row["tag"]]
        assert {k: int(row[k]) for k in ("timely", "late", "unused", "dropped", "redundant")
                if row[k]} == w
        assert row["prefetches"] == sum(w.values())
