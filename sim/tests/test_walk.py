"""Page walks through the caches (``[tlb] walk_reads``, sim/MODEL.md §3): a walk costs its
fixed part plus the latency of the level that served each page-table read, so its cost
falls when the page table is cached, as a native walk's does."""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import records

from kvsim import sim
from kvsim.sim import micro
from kvsim.sim.reference import ReferenceSim


def _cpu(walk_reads: int, walk: int = 20):
    return sim.parse_cpu({
        "name": "t", "freq_ghz": 1.0, "core": {"width": 1, "rob": 8},
        "cache": [{"name": "L1D", "size": 4096, "ways": 4, "line": 64, "latency": 4},
                  {"name": "L2", "size": 65536, "ways": 8, "line": 64, "latency": 12}],
        "dram": {"latency_ns": 100.0},
        "tlb": {"page_size": "4KiB", "l1_entries": 1, "l1_ways": 0, "l2_entries": 0,
                "walk_latency": walk, "walk_reads": walk_reads}})


def _chain(pages):
    """Dependent loads, one per page (each misses the one-entry DTLB and walks)."""
    return records([("load", 0x10000000 + p * 4096, 8, 0, 1 if i else 0)
                    for i, p in enumerate(pages)])


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_walk_cost_follows_where_the_page_table_is(engine):
    # pages 0..7 share one PTE line: the first walk reads it from DRAM, the next seven from L1
    rec = _chain(range(8))
    fixed = sim.simulate(rec, _cpu(0), engine=engine)
    cached = sim.simulate(rec, _cpu(1), engine=engine)
    assert cached["tlb"]["walk_reads"] == 1
    # each load misses L1, L2 -> DRAM (100); walks: 20 fixed, + PTE 100 once and 4 seven times
    assert fixed["cycles"] == pytest.approx(8 * (20 + 100), abs=8)
    assert cached["cycles"] - fixed["cycles"] == pytest.approx(100 + 7 * 4, abs=2)
    # the page-table reads are loads of tag 0 through the caches: one L1 miss, seven hits
    l1 = cached["levels"][0]
    assert l1["accesses"] - fixed["levels"][0]["accesses"] == 8
    assert l1["misses"] - fixed["levels"][0]["misses"] == 1


def test_nested_walk_reads_two_tables():
    rec = _chain([0, 512, 1024])  # three PTE lines apart: every read misses
    one = sim.simulate(rec, _cpu(1))["cycles"]
    two = sim.simulate(rec, _cpu(2))["cycles"]
    assert two - one == pytest.approx(3 * 100, abs=3)


def test_walk_reads_engine_equals_reference():
    cpu = sim.parse_cpu({
        "name": "t", "freq_ghz": 2.0, "core": {"width": 4, "rob": 64},
        "cache": [{"name": "L1D", "size": 8192, "ways": 4, "line": 64, "latency": 4,
                   "mshrs": 6},
                  {"name": "L2", "size": 65536, "ways": 8, "line": 64, "latency": 12,
                   "inclusion": "inclusive", "mshrs": 12}],
        "dram": {"latency_ns": 60.0, "bandwidth_gbs": 8.0},
        "tlb": {"page_size": "4KiB", "l1_entries": 8, "l1_ways": 0, "l2_entries": 16,
                "l2_ways": 4, "l2_latency": 5, "walk_latency": 15, "walk_reads": 2}})
    rec = micro.chase_records(4 << 20, 4, 300, seed=3)
    from kvsim.sim import _binding as B

    cfg = cpu.to_engine(timing=True)
    eng = B.Engine(cfg)
    ref = ReferenceSim(cfg)
    eng.run(rec)
    ref.run(rec)
    a, b = eng.finish(), ref.finish()
    eng.close()
    for k in ("ticks", "stlb_miss", "dram_reads"):
        assert np.array_equal(np.asarray(a[k]), np.asarray(b[k])), k


def test_walk_reads_bounds():
    with pytest.raises(sim.ConfigError, match="walk_reads"):
        _cpu(5)
