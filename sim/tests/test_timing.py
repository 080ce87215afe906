"""The timing overlay behaves as the model says (sim/MODEL.md), in both engines."""

from __future__ import annotations

import copy

import pytest
from sim_helpers import records

from kvsim import sim

BASE = {
    "name": "t", "freq_ghz": 1.0, "core": {"width": 4, "rob": 256},
    "cache": [{"name": "L1", "size": "1KiB", "ways": 2, "line": 64, "latency": 4,
               "mshrs": 10}],
    "dram": {"latency_ns": 100.0},
}
N = 200


def cpu(**changes):
    doc = copy.deepcopy(BASE)
    for k, v in changes.items():
        if k in ("rob", "width", "sustained_ipc"):
            doc["core"][k] = v
        elif k in ("mshrs",):
            doc["cache"][0][k] = v
        else:
            doc[k] = v
    return sim.parse_cpu(doc)


def misses(dep: int, gap: int = 0):
    """N loads to distinct lines far apart (all miss); dep=1 chains each to the previous."""
    return records([("load", 4096 * i, 8, gap, dep if i else 0) for i in range(N)])


@pytest.fixture(params=["fast", "reference"])
def engine(request):
    return request.param


def test_pointer_chase_serialises(engine):
    res = sim.simulate(misses(dep=1), cpu(), engine=engine)
    assert res["cycles"] >= N * 100
    assert res["timing"]["mlp"] == pytest.approx(1.0, abs=0.05)


def test_independent_misses_overlap_up_to_mshrs(engine):
    res = sim.simulate(misses(dep=0), cpu(), engine=engine)
    assert res["cycles"] < N * 100 / 8
    assert 9.0 < res["timing"]["mlp"] <= 10.0
    one = sim.simulate(misses(dep=0), cpu(mshrs=1), engine=engine)
    assert one["cycles"] >= N * 100
    assert one["timing"]["stall_cycles"]["mshr_wait"] > 0


def test_sustained_ipc_sets_the_rate_of_work_without_misses(engine):
    """With no miss to wait for, a record's instructions retire at the sustained IPC, not
    at the width: 200 L1 hits with 99 instructions of work each take 20000 / ipc cycles."""
    hits = records([("load", 64 * (i % 4), 8, 99, 0) for i in range(N)])
    wide = sim.simulate(hits, cpu(), engine=engine)
    slow = sim.simulate(hits, cpu(sustained_ipc=1.5), engine=engine)
    same = sim.simulate(hits, cpu(sustained_ipc=4), engine=engine)
    assert wide["cycles"] == pytest.approx(N * 100 / 4, abs=200)  # + 4 cold misses
    assert slow["cycles"] == pytest.approx(N * 100 / 1.5, abs=200)
    assert same["cycles"] == wide["cycles"]  # = width: the model without the field
    assert slow["timing"]["sustained_ipc"] == 1.5 and slow["timing"]["width"] == 4


def test_sustained_ipc_beyond_the_width_is_refused():
    with pytest.raises(sim.ConfigError, match="sustained_ipc: at most the width"):
        cpu(sustained_ipc=5)


def test_rob_limits_overlap(engine):
    # 63 other instructions per load and a 64-entry ROB: one miss in flight at a time
    res = sim.simulate(misses(dep=0, gap=63), cpu(rob=64), engine=engine)
    assert res["timing"]["mlp"] < 1.3
    assert res["timing"]["stall_cycles"]["rob_full:DRAM"] > 0
    wide = sim.simulate(misses(dep=0, gap=63), cpu(rob=1024), engine=engine)
    assert wide["cycles"] < res["cycles"] / 4


def test_dram_bandwidth_queue(engine):
    # 64 B per line at 0.64 GB/s and 1 GHz = 100 cycles per line: bandwidth-bound
    slow = cpu(dram={"latency_ns": 100.0, "bandwidth_gbs": 0.64})
    res = sim.simulate(misses(dep=0), slow, engine=engine)
    assert res["cycles"] >= N * 100
    assert res["timing"]["stall_cycles"]["dram_bandwidth_wait"] > 0


def test_sw_prefetch_useful_late_useless_dropped(engine):
    c = cpu()
    far = 1 << 20
    late = records([("prefetch", far, 1), ("load", far, 8)])
    r = sim.simulate(late, c, engine=engine)["prefetch"]["software"]["L1"]
    assert (r["issued"], r["late"], r["useful"]) == (1, 1, 0)
    useful = records([("prefetch", far, 1), ("load", far, 8, 1000)])
    r = sim.simulate(useful, c, engine=engine)["prefetch"]["software"]["L1"]
    assert (r["useful"], r["late"]) == (1, 0)
    # evicted by two conflicting loads to the same set before any use
    useless = records([("prefetch", far, 1), ("load", far + 512, 8), ("load", far + 1024, 8)])
    r = sim.simulate(useless, c, engine=engine)["prefetch"]["software"]["L1"]
    assert r["useless"] == 1 and r["useful"] == 0
    # 12 prefetches at once, 10 miss buffers: 2 dropped
    burst = records([("prefetch", far + 64 * i, 1) for i in range(12)])
    r = sim.simulate(burst, c, engine=engine)["prefetch"]["software"]["L1"]
    assert (r["issued"], r["dropped"]) == (10, 2)
    assert r["unused_end"] == 10
    # functional mode has no miss buffers: nothing is dropped
    r = sim.simulate(burst, c, engine=engine, functional=True)["prefetch"]["software"]["L1"]
    assert r["dropped"] == 0


def test_prefetch_hides_latency(engine):
    c = cpu()
    # a dependent walk over consecutive lines, with and without prefetching the next one
    plain = records([("load", 64 * i, 8, 300, 1 if i else 0) for i in range(50)])
    pf = records([r for i in range(50) for r in
                  ([("prefetch", 64 * (i + 1), 1, 0)] if i < 49 else []) +
                  [("load", 64 * i, 8, 300, 2 if 0 < i < 49 else (1 if i else 0))]])
    a = sim.simulate(plain, c, engine=engine)["cycles"]
    b = sim.simulate(pf, c, engine=engine)["cycles"]
    assert b < a * 0.8


def test_tlb_miss_policy(engine):
    doc = {"tlb": {"l1_entries": 1, "l1_ways": 1, "l2_entries": 0, "walk_latency": 50},
           "swprefetch": {"fill": "L1", "tlb_miss": "drop"}}
    drop = cpu(**doc)
    recs = records([("prefetch", 8192 * i, 1) for i in range(5)])
    res = sim.simulate(recs, drop, engine=engine)
    assert res["prefetch"]["software_dropped_tlb"] == 5
    doc["swprefetch"]["tlb_miss"] = "walk"
    res = sim.simulate(recs, cpu(**doc), engine=engine)
    assert res["prefetch"]["software_dropped_tlb"] == 0
    assert res["tlb"]["dtlb_misses"] == 5
    loads = records([("load", 8192 * i, 8) for i in range(5)])
    walked = sim.simulate(loads, cpu(**doc), engine=engine)
    assert walked["timing"]["stall_cycles"]["tlb"] == 5 * 50
    huge = sim.simulate(loads, cpu(**doc), engine=engine, page_size=2 * 1024 * 1024)
    assert huge["tlb"]["dtlb_misses"] == 1


def test_hw_prefetchers_train(engine):
    doc = {"prefetcher": [{"level": "L1", "kind": "stream", "degree": 2}]}
    seq = records([("load", 64 * i, 8) for i in range(64)])
    res = sim.simulate(seq, cpu(**doc), engine=engine, functional=True)
    hw = res["prefetch"]["hardware"]["L1"]
    assert hw["useful"] > 40
    off = sim.simulate(seq, cpu(**doc), engine=engine, functional=True, prefetchers=False)
    # trained by misses only: with degree 2, two of every three lines are prefetched
    assert off["levels"][0]["misses"] == 64
    assert res["levels"][0]["by_kind"]["load"]["misses"] <= 64 // 3 + 2


def test_rob_stall_blamed_on_the_miss_that_holds_retirement(engine):
    # warm line 0, then one DRAM miss followed by many L1 hits: the hits cannot retire
    # before the miss, so the full ROB is the DRAM miss's fault, not the hits'
    rows = [("load", 0, 8)] + [("load", 1 << 20, 8)] + [("load", 0, 8)] * 200
    res = sim.simulate(records(rows), cpu(rob=16), engine=engine)
    stalls = res["timing"]["stall_cycles"]
    assert stalls["rob_full:DRAM"] > 50
    assert stalls.get("rob_full:L1", 0) == 0
