"""The microbenchmark traces (kvsim.sim.micro): they are calibrate.c's loops record for
record, and the model prices them as the calibration does (a chase far beyond the caches
costs the DRAM latency; N chases overlap up to the miss buffers)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim import sim, traces
from kvsim.sim import micro


def _measured(rec: np.ndarray) -> np.ndarray:
    """The records after the warm-up prefix."""
    ends = np.flatnonzero((rec["kind"] == traces.KIND_MARKER)
                          & (rec["flags"] == traces.MARK_WARMUP_END))
    return rec[ends[-1] + 1:] if len(ends) else rec


@given(lines=st.integers(2, 300), steps=st.integers(1, 400), seed=st.integers(0, 9))
@settings(max_examples=40, deadline=None)
def test_chase_is_one_cycle_through_every_line(lines, steps, seed):
    rec = micro.chase_records(lines * micro.LINE, 1, steps, seed)
    assert not traces.check_records(rec)
    m = _measured(rec)
    assert len(m) == steps
    assert (m["kind"] == traces.KIND_LOAD).all()
    assert (m["gap"] == micro.CHASE_GAP).all()
    assert (m["dep"][1:] == 1).all() and m["dep"][0] == 0
    off = (m["addr"] - micro.BASE) // micro.LINE
    assert off.max() < lines
    # a cycle: any `lines` consecutive steps visit every line once
    if steps >= lines:
        assert len(np.unique(off[:lines])) == lines
        assert (off[lines:] == off[:steps - lines]).all()


@given(lines=st.integers(2, 300), steps=st.integers(1, 400), warmup=st.integers(0, 700),
       seed=st.integers(0, 9))
@settings(max_examples=40, deadline=None)
def test_cycle_records_is_the_chase_loop(lines, steps, warmup, seed):
    """The L2 probe's loop over a cycle it orders itself (calibrate_prefetch) and the chase
    are one loop: over the chase's own cycle, record for record the same trace."""
    size = lines * micro.LINE
    a = micro.cycle_records(micro.cycle_lines(size, seed), steps, warmup)
    b = micro.chase_records(size, 1, steps, seed, warmup=warmup, mlp_loop=False)
    assert a.tobytes() == b.tobytes()


@given(chains=st.integers(1, 12), steps=st.integers(1, 30))
@settings(max_examples=40, deadline=None)
def test_mlp_chains_are_independent_dependent_chains(chains, steps):
    lines = 64 * chains
    rec = micro.chase_records(lines * micro.LINE, chains, steps, warmup=0, mlp_loop=True)
    assert not traces.check_records(rec)
    assert len(rec) == 3 * chains * steps
    parents = traces.chain_parents(rec)
    data = np.flatnonzero((rec["kind"] == traces.KIND_LOAD) & (rec["addr"] < micro.STACK))
    assert len(data) == chains * steps
    for k, i in enumerate(data):
        c, s = k % chains, k // chains
        stack = parents[i]
        assert rec["addr"][stack] == micro.STACK + 8 * c  # chain[c], loaded from the stack
        if s == 0:
            assert parents[stack] < 0
        else:  # ... whose value is the same chain's previous chase load
            assert parents[stack] == data[k - chains]
    # chains start evenly spaced along the one cycle, so no two chains share a line
    assert len(np.unique(rec["addr"][data])) == chains * steps


def _cpu(mshrs: int, dram_ns: float = 100.0, page_walk: int = 0):
    return sim.parse_cpu({
        "name": "t", "freq_ghz": 2.0, "core": {"width": 4, "rob": 512},
        "cache": [{"name": "L1D", "size": 32768, "ways": 8, "line": 64, "latency": 4,
                   "mshrs": mshrs},
                  {"name": "L2", "size": 262144, "ways": 8, "line": 64, "latency": 12}],
        "dram": {"latency_ns": dram_ns},
        "tlb": {"page_size": "4KiB", "l1_entries": 64, "l1_ways": 4, "l2_entries": 1024,
                "l2_ways": 8, "l2_latency": 7, "walk_latency": page_walk}})


def test_pure_chase_costs_the_dram_latency():
    """Beyond every cache (2 MiB pages: 64 of them, all in the DTLB), one chase load costs
    the DRAM latency: the loop's other instructions run in its shadow."""
    cpu = _cpu(16)
    p = micro.predict(cpu, 128 << 20, 1, 4000, 2 << 20, mlp_loop=False)
    assert p["ns_per_load"] == pytest.approx(100.0, rel=0.01)


def test_pure_chase_with_small_pages_adds_the_walk():
    cpu = _cpu(16, page_walk=200)
    p2m = micro.predict(cpu, 128 << 20, 1, 4000, 2 << 20, mlp_loop=False)["ns_per_load"]
    p4k = micro.predict(cpu, 128 << 20, 1, 4000, 4096, mlp_loop=False)["ns_per_load"]
    assert p4k - p2m == pytest.approx(200 / 2.0, rel=0.05)  # 32768 pages: nearly all walk


@pytest.mark.parametrize("mshrs", [4, 10])
def test_parallel_chases_overlap_up_to_the_miss_buffers(mshrs):
    cpu = _cpu(mshrs)
    one = micro.predict(cpu, 256 << 20, 1, 2000, 2 << 20, mlp_loop=True)["ns_per_load"]
    for n in (2, mshrs, 2 * mshrs):
        p = micro.predict(cpu, 256 << 20, n, 2000 // n + 50, 2 << 20, mlp_loop=True)
        overlap = one / p["ns_per_load"]
        assert overlap == pytest.approx(min(n, mshrs), rel=0.1)


def test_a_kept_cycle_is_the_cycle_drawn_again(monkeypatch):
    """The cycles kept for a calibration's many simulations are the ones drawn afresh, and
    a cycle past the budget is drawn at each use without evicting the kept ones."""
    monkeypatch.setattr(micro, "_cycles", {})
    monkeypatch.setattr(micro, "CYCLE_CACHE_BYTES", 8 * 4096)
    small = micro.cycle_lines(4096 * micro.LINE, 3)
    assert micro.cycle_lines(4096 * micro.LINE, 3) is small
    fresh = np.random.default_rng(3).permutation(4096).astype(np.uint64)
    assert (small == fresh).all() and not small.flags.writeable
    big = micro.cycle_lines(8192 * micro.LINE, 3)
    assert micro.cycle_lines(8192 * micro.LINE, 3) is not big
    assert list(micro._cycles) == [(4096, 3)]


def test_chases_simulated_side_by_side_are_the_chases_in_turn():
    """micro.map_threads (the calibration's fit and self-check simulate their chases on a
    thread per core): each result is its own chase's, as one after the other."""
    cpu = sim.load_cpu("xeon-8488c")
    sizes = [64 * 1024, 1 << 20, 4 << 20, 16 << 20]

    def one(size):
        return micro.predict(cpu, size, 1, 2000, 4096, False, warmup=4000)["ns_per_load"]

    assert micro.map_threads(one, sizes) == [one(s) for s in sizes]
