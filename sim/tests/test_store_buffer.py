"""``[core] store_buffer`` (sim/MODEL.md §6): a store holds an entry from dispatch until it
commits, in program order, once retired and once its line has arrived (its read-for-ownership,
timed as a load's from its issue, holding miss buffers); a store dispatches only while an entry
is free."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_helpers import records, tiny_cpu_text

from kvsim import sim
from kvsim.sim.config import ConfigError

DRAM_NS, FREQ = 100.0, 2.0


def _cpu(store_buffer: int | None, mshrs: int = 16, tlb: bool = False) -> sim.CpuConfig:
    core = "width = 4\nrob = 256\n" + (f"store_buffer = {store_buffer}\n"
                                        if store_buffer is not None else "")
    tlb_doc = """[tlb]
page_size = 4096
l1_entries = 4
l1_ways = 0
l2_entries = 0
l2_ways = 1
l2_latency = 1
walk_latency = 30
""" if tlb else ""
    return sim.parse_cpu(tomllib.loads(tiny_cpu_text(core, mshrs=mshrs, tail=tlb_doc,
                                                      freq_ghz=FREQ, dram_ns=DRAM_NS)))


def _stores(n: int, gap: int = 2) -> np.ndarray:
    """n stores, each to a line of its own (every one misses to DRAM)."""
    return records([("store", 0x100000 + k * 4096 + 64 * (k % 64), 8, gap) for k in range(n)])


def _run(recs, cpu, engine="fast"):
    return sim.simulate(recs, cpu, timeline=(0, len(recs)), engine=engine, validate=False)


def test_loads_alone_do_not_see_it():
    rng = np.random.default_rng(3)
    recs = records([("load", 0x100000 + int(a) * 64, 8, 3, int(d))
                    for a, d in zip(rng.integers(0, 4096, 300), rng.integers(0, 3, 300),
                                    strict=True)])
    a, b = _run(recs, _cpu(None)), _run(recs, _cpu(4))
    assert a["timeline"] == b["timeline"] and a["cycles"] == b["cycles"]
    assert b["timing"]["stall_cycles"]["store_buffer_full"] == 0


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_a_full_store_buffer_waits_for_the_oldest_store_to_commit(engine):
    # 4 entries, stores that miss to DRAM: store k + 4 dispatches only once store k has its
    # line (its read-for-ownership, issued at its dispatch), about a DRAM latency later
    n, sb = 12, 4
    res = _run(_stores(n), _cpu(sb), engine)
    tl = res["timeline"]
    dram = DRAM_NS * FREQ  # cycles (the timeline's unit)
    for k in range(n - sb):
        assert tl[k + sb]["dispatch"] >= tl[k]["issue"] + dram
    assert res["timing"]["stall_cycles"]["store_buffer_full"] > 0
    free = _run(_stores(n), _cpu(None), engine)
    assert free["timing"]["stall_cycles"].get("store_buffer_full") is None
    assert res["cycles"] > free["cycles"]
    assert res["timing"]["store_buffer"]["entries"] == sb
    assert res["timing"]["store_buffer"]["avg_commit_lag_cycles"] > 0


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_a_store_miss_holds_a_miss_buffer(engine):
    # one miss buffer: the load miss after a store miss waits for the store's line with a
    # store buffer, and not without one (a store then uses no miss buffer)
    recs = records([("store", 0x100000, 8, 0), ("load", 0x200000, 8, 0)])
    held = _run(recs, _cpu(8, mshrs=1), engine)
    free = _run(recs, _cpu(None, mshrs=1), engine)
    assert held["timing"]["stall_cycles"]["mshr_wait"] > 0
    assert free["timing"]["stall_cycles"]["mshr_wait"] == 0
    assert held["timeline"][1]["complete"] > free["timeline"][1]["complete"]


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_a_load_of_a_stored_line_waits_for_its_read_for_ownership(engine):
    recs = records([("store", 0x100000, 8, 0), ("load", 0x100008, 8, 0)])
    held = _run(recs, _cpu(8), engine)["timeline"]
    free = _run(recs, _cpu(None), engine)["timeline"]
    assert held[1]["complete"] >= held[0]["issue"] + DRAM_NS * FREQ
    assert free[1]["complete"] < held[1]["complete"]


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_a_store_address_waits_for_its_producer_with_a_store_buffer(engine):
    # the store's address is the load's value: its read-for-ownership issues after the load
    recs = records([("load", 0x100000, 8, 0), ("store", 0x300000, 8, 0, 1)])
    held = _run(recs, _cpu(8), engine)["timeline"]
    free = _run(recs, _cpu(None), engine)["timeline"]
    assert held[1]["issue"] == held[0]["complete"]
    assert free[1]["issue"] == free[1]["dispatch"]


def test_more_entries_never_take_longer_on_store_misses():
    recs = _stores(200)
    cycles = [sim.simulate(recs, _cpu(n), validate=False)["cycles"] for n in (1, 2, 8, 64)]
    assert cycles == sorted(cycles, reverse=True) and cycles[0] > cycles[-1]


@settings(max_examples=30, deadline=None)
@given(sb=st.integers(1, 20), n=st.integers(1, 60), gap=st.integers(0, 12),
       mshrs=st.integers(1, 8), tlb=st.booleans())
def test_engine_equals_reference(sb, n, gap, mshrs, tlb):
    # stores and loads that share lines, with TLB walks (the record-by-record path) or not
    rows = []
    for k in range(n):
        line = 0x100000 + 64 * ((k * 7919) % 97) + 4096 * (k % 5)
        rows.append(("store" if k % 3 else "load", line, 8, gap, 1 if k % 4 == 1 else 0))
    recs = records(rows)
    cpu = _cpu(sb, mshrs=mshrs, tlb=tlb)
    a = sim.simulate(recs, cpu, validate=False)
    b = sim.simulate(recs, cpu, engine="reference", validate=False)
    assert a["cycles"] == b["cycles"]
    assert a["timing"]["stall_cycles"] == b["timing"]["stall_cycles"]


def test_store_buffer_bounds():
    with pytest.raises(ConfigError, match="store_buffer"):
        _cpu(5000)
    with pytest.raises(ConfigError, match="store_buffer"):
        _cpu(0)
