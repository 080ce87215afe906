"""Page walks through the caches (``[tlb] walk_reads``, sim/MODEL.md §3): a walk costs its
fixed part plus the latency of the level that served each page-table read, so its cost
falls when the page table is cached, as a native walk's does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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


# --- walks in flight (``[tlb] walkers``) -------------------------------------------------------

def _walker_cpu(walkers: int, walk: int):
    """One-entry DTLB, no STLB: every load to a new page walks (`walk` cycles, no page-table
    reads); unlimited miss buffers and a ROB that holds every chain's loads."""
    return sim.parse_cpu({
        "name": "t", "freq_ghz": 1.0, "core": {"width": 4, "rob": 512},
        "cache": [{"name": "L1D", "size": 4096, "ways": 4, "line": 64, "latency": 4}],
        "dram": {"latency_ns": 50.0},
        "tlb": {"page_size": "4KiB", "l1_entries": 1, "l1_ways": 0, "l2_entries": 0,
                "walk_latency": walk, "walkers": walkers}})


def _chases(n: int, steps: int, prefetch: bool = False):
    """`n` independent pointer chases, interleaved: step k of chain c loads page k n + c
    (every load a new page) and depends on step k - 1 of the same chain (n records back).
    `prefetch`: each step is a software prefetch instead (no dependency)."""
    kind = "prefetch" if prefetch else "load"
    return records([(kind, 0x10000000 + (k * n + c) * 4096, 8, 0,
                     n if (k and not prefetch) else 0)
                    for k in range(steps) for c in range(n)])


def _run(cpu, rec, engine):
    cfg = cpu.to_engine(timing=True)
    from kvsim.sim import _binding as B

    if engine == "reference":
        ref = ReferenceSim(cfg)
        ref.run(rec)
        return ref.finish()
    eng = B.Engine(cfg)
    eng.run(rec)
    raw = eng.finish()
    eng.close()
    return raw


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 8), walkers=st.integers(1, 5), walk=st.integers(20, 200),
       engine=st.sampled_from(["fast", "reference"]))
def test_walks_in_flight_are_at_most_walkers(n, walkers, walk, engine):
    # every load walks: the walks' total duration (wait_tlb) fits in walkers x the run's
    # time only if no more than `walkers` walk at once; with unlimited walkers n chains
    # overlap n walks, which breaks the bound as soon as n > walkers and walks dominate
    rec = _chases(n, 12)
    limited = _run(_walker_cpu(walkers, walk), rec, engine)
    free = _run(_walker_cpu(0, walk), rec, engine)
    assert limited["wait_tlb"] == free["wait_tlb"] == len(rec) * walk * 4
    assert limited["wait_tlb"] <= walkers * limited["ticks"]
    if n <= walkers:  # never more walks wanted than walkers: the limit changes nothing
        assert limited["ticks"] == free["ticks"] and limited["wait_walker"] == 0
    else:
        assert limited["ticks"] > free["ticks"] and limited["wait_walker"] > 0


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 8), walkers=st.integers(1, 4))
def test_software_prefetches_that_walk_take_walkers(n, walkers):
    # `tlb_miss = "walk"` (the default): each prefetch to a new page walks, holding a walker
    rec = _chases(n, 6, prefetch=True)
    raw = _run(_walker_cpu(walkers, 100), rec, "fast")
    ref = _run(_walker_cpu(walkers, 100), rec, "reference")
    assert raw["swpf_dropped_tlb"] == 0 and raw["wait_tlb"] == len(rec) * 400
    # dispatched a tick apart, each wants a walker while the first `walkers` walk
    assert raw["wait_walker"] == ref["wait_walker"] > 0
    assert raw["miss_ticks"] == ref["miss_ticks"]


@pytest.mark.parametrize("threads", [1, 2])
def test_walkers_engine_equals_reference(threads):
    # a random chase through a small STLB with page-table reads: the TLB thread (threads=2)
    # codes the translations, the simulating thread times their walks on the walkers
    cpu = sim.parse_cpu({
        "name": "t", "freq_ghz": 2.0, "core": {"width": 4, "rob": 64},
        "cache": [{"name": "L1D", "size": 8192, "ways": 4, "line": 64, "latency": 4,
                   "mshrs": 6},
                  {"name": "L2", "size": 65536, "ways": 8, "line": 64, "latency": 12,
                   "mshrs": 12}],
        "dram": {"latency_ns": 60.0, "bandwidth_gbs": 8.0},
        "tlb": {"page_size": "4KiB", "l1_entries": 8, "l1_ways": 0, "l2_entries": 16,
                "l2_ways": 4, "l2_latency": 5, "walk_latency": 40, "walk_reads": 1,
                "walkers": 2}})
    rec = micro.chase_records(4 << 20, 8, 200, seed=5)
    from kvsim.sim import _binding as B

    cfg = cpu.to_engine(timing=True)
    cfg.threads = threads
    cfg.queue_cap = 7 if threads > 1 else 0
    eng = B.Engine(cfg)
    eng.run(rec)
    assert eng.threads == threads  # the chase misses the DTLB: the thread took its slices
    a = eng.finish()
    eng.close()
    ref = ReferenceSim(cfg)
    ref.run(rec)
    b = ref.finish()
    assert b["wait_walker"] > 0
    for k in ("ticks", "wait_walker", "wait_tlb", "stlb_miss", "dram_reads"):
        assert np.array_equal(np.asarray(a[k]), np.asarray(b[k])), k


def test_walkers_bounds():
    with pytest.raises(sim.ConfigError, match="walkers"):
        _walker_cpu(65, 20)


def test_host_page_size_defaults_off_and_refuses_other_sizes():
    """`[tlb] host_page_size`: absent, the engine gets today's walk (no guest page bits);
    "4KiB" under 2 MiB pages nests; any other size is refused, naming the key."""
    doc = {"name": "h", "cache": [{"name": "L1", "size": 1024, "ways": 4, "line": 64,
                                   "latency": 4}],
           "tlb": {"page_size": "2MiB", "l1_entries": 4, "l1_ways": 0, "walk_reads": 2}}
    ec = sim.parse_cpu(doc).to_engine(timing=False)
    assert ec.guest_page_bits == 0 and ec.page_bits == 21
    doc["tlb"]["host_page_size"] = "4KiB"
    ec = sim.parse_cpu(doc).to_engine(timing=False)
    assert ec.guest_page_bits == 21 and ec.page_bits == 12
    assert sim.parse_cpu(doc).to_engine(timing=False, page_size=4096).guest_page_bits == 0
    doc["tlb"]["host_page_size"] = "8KiB"
    with pytest.raises(sim.ConfigError, match="tlb.host_page_size: must be 4KiB or 2MiB"):
        sim.parse_cpu(doc)


# --- page-table lines by time ([tlb] walk_retention_ns, host_read_ns; MODEL.md §3) ---

def _retention_doc(retention_ns: float = 0.0, host_read_ns: float = 0.0,
                   l2_size: int = 8192) -> dict:
    """A guest with nested walks over a working set whose page table (two reads a walk, 256
    lines) does not stay in its small caches: what a walk costs depends on the caches alone
    without a retention, on the page-table lines' age with one. ``l2_size`` 32768: a last
    level that holds the page table (and little of the data)."""
    doc = {"name": "t", "freq_ghz": 1.0, "core": {"width": 4, "rob": 64},
           "cache": [{"name": "L1D", "size": 1024, "ways": 4, "line": 64, "latency": 4,
                      "mshrs": 16},
                     {"name": "L2", "size": l2_size, "ways": 8, "line": 64, "latency": 20}],
           "dram": {"latency_ns": 100.0},
           "tlb": {"page_size": "4KiB", "l1_entries": 4, "l1_ways": 0, "l2_entries": 0,
                   "walk_latency": 0, "walk_reads": 2, "walkers": 16}}
    if retention_ns:
        doc["tlb"]["walk_retention_ns"] = retention_ns
    if host_read_ns:
        doc["tlb"]["host_read_ns"] = host_read_ns
    return doc


def _per_chain(doc: dict, chains: int, engine: str = "fast") -> tuple[float, dict]:
    """ns per load of one chain of ``chains`` parallel chases over 4 MiB (1024 pages), in
    the loop's steady state, and the TLB's figures."""
    cpu = sim.parse_cpu(doc)
    steps = 3000 // chains
    rec = micro.chase_records(4 << 20, chains, steps, warmup=0, mlp_loop=True,
                              loop_warmup=24_000 // chains)
    r = sim.simulate(rec, cpu, page_size=4096, engine=engine, validate=False)
    return r["cycles"] / cpu.freq_ghz / steps, r["tlb"]


def test_parallel_chases_get_faster_per_load_with_a_retention():
    # a page-table line comes back every 128 loads: about 30 us apart for one chain, 5 us
    # for eight; a retention of 10 us keeps the eight chains' lines and loses the one's.
    # Without it (the old model) a chain's load is no faster beside seven others than
    # alone: the caches see the same lines in the same order
    old = _retention_doc()
    assert _per_chain(old, 8)[0] > 0.95 * _per_chain(old, 1)[0]
    new = _retention_doc(10_000.0)
    (one, t1), (eight, t8) = _per_chain(new, 1), _per_chain(new, 8)
    assert eight < 0.7 * one
    # the lone chain's walks read most entries from memory; the eight chains' from the
    # last level, lines kept in time that the small caches lost
    assert t1["walk_reads_timed"]["DRAM"] > 0.6 * sum(t1["walk_reads_timed"].values())
    assert t8["walk_reads_timed"]["DRAM"] < 0.05 * sum(t8["walk_reads_timed"].values())
    assert t8["walk_reads_timed"]["L2"] > t8["walk_reads_served"]["L2"]


def test_host_reads_from_memory_take_their_own_latency():
    (a, ta), (b, tb) = (_per_chain(_retention_doc(), 1),
                        _per_chain(_retention_doc(host_read_ns=300.0), 1))
    # the host's reads from memory (read 1 of each walk) take 300 ns instead of 100
    assert ta["walk_reads_timed"]["host"] == 0
    n = tb["walk_reads_timed"]["host"]
    assert 0.4 * 3000 < n <= 3000
    assert b - a == pytest.approx(200.0 * n / 3000, rel=0.05)


def _lost_doc(**kw) -> dict:
    doc = _retention_doc(l2_size=32768, **kw)
    doc["tlb"]["walk_last_level"] = False
    return doc


def test_a_last_level_that_keeps_no_page_table_line():
    # the last level (32 KiB) holds the page table's 256 lines, the L1 does not: kept, the
    # walks read them there; not kept, every read the last level serves costs memory, at
    # every rate, and the caches are the same
    kept, lost = _retention_doc(l2_size=32768), _lost_doc()
    (k1, tk), (l1, tl) = _per_chain(kept, 1), _per_chain(lost, 1)
    reads = sum(tk["walk_reads_timed"].values())
    assert tk["walk_reads_served"] == tl["walk_reads_served"]
    assert tk["walk_reads_timed"]["L2"] > 0.5 * reads
    assert tl["walk_reads_timed"]["L2"] == 0
    assert tl["walk_reads_timed"]["DRAM"] == (tk["walk_reads_timed"]["DRAM"]
                                              + tk["walk_reads_timed"]["L2"])
    assert l1 > k1 + 40.0  # a read from memory is 80 ns dearer than the last level
    # no age in it: a chain's load beside seven others costs what a lone chain's does
    assert _per_chain(lost, 8)[0] == pytest.approx(l1, rel=0.1)
    with pytest.raises(sim.ConfigError, match="tlb.walk_last_level"):
        sim.parse_cpu(dict(lost, tlb=dict(lost["tlb"], walk_last_level=0)))


def test_a_last_level_that_keeps_the_guests_page_table_lines_and_not_the_hosts():
    # "guest": the guest's read (0) is timed as the caches serve it, as when the last level
    # keeps every line; the host's (1) as when it keeps none; the caches are the same in all
    kept, lost = _retention_doc(l2_size=32768), _lost_doc()
    guest = _lost_doc()
    guest["tlb"]["walk_last_level"] = "guest"
    (k, tk), (g, tg), (lo, tl) = (_per_chain(d, 1) for d in (kept, guest, lost))
    assert tk["walk_reads_served"] == tg["walk_reads_served"] == tl["walk_reads_served"]
    assert tl["walk_reads_timed"]["L2"] == 0
    assert 0 < tg["walk_reads_timed"]["L2"] < tk["walk_reads_timed"]["L2"]
    # what the last level serves splits about evenly between the two reads of a walk
    assert tg["walk_reads_timed"]["L2"] == pytest.approx(tk["walk_reads_timed"]["L2"] / 2,
                                                         rel=0.2)
    assert k < g < lo
    for both in (guest, lost):  # no age in it: a chain beside seven others costs the same
        assert _per_chain(both, 8)[0] == pytest.approx(_per_chain(both, 1)[0], rel=0.1)
    with pytest.raises(sim.ConfigError, match="tlb.walk_last_level"):
        sim.parse_cpu(dict(guest, tlb=dict(guest["tlb"], walk_last_level="host")))


def test_a_last_level_that_keeps_page_table_lines_in_time_and_private_levels_by_capacity():
    # both: the L1 serves the lines it holds whatever their age (a retention alone times
    # an old line as memory even there); a line the L1 does not hold costs the last level
    # if a walk read it within the retention, else memory. Eight chains come back to the
    # page table's lines within 10 us, one chain does not: the eight get the last level,
    # the lone chain memory, as with a retention alone, where a last level that keeps none
    # gives both memory (a lone chain's lines come back 30 us apart on average, some sooner)
    both = _lost_doc(retention_ns=10_000.0)
    alone = _retention_doc(10_000.0, l2_size=32768)
    (one, t1), (eight, t8) = _per_chain(both, 1), _per_chain(both, 8)
    assert eight < 0.7 * one
    for t in (t1, t8):
        assert t["walk_reads_timed"]["L1D"] == t["walk_reads_served"]["L1D"]
    share = [t["walk_reads_timed"]["L2"] / sum(t["walk_reads_timed"].values()) for t in (t1, t8)]
    assert share[1] > 0.5 and share[0] < 0.5 * share[1]  # (the lone chain's soonest returns)
    (_, ta) = _per_chain(alone, 1)
    assert ta["walk_reads_served"] == t1["walk_reads_served"]
    assert _per_chain(_lost_doc(), 8)[0] > 0.9 * _per_chain(_lost_doc(), 1)[0]
    # a private L2 that holds the page table: both time its reads at the L2 whatever their
    # age, a retention alone times the old ones as memory
    (p, tp), (r, tr) = (_per_chain(_private_l2_doc(walk_retention_ns=10_000.0,
                                                   walk_last_level=False), 1),
                        _per_chain(_private_l2_doc(walk_retention_ns=10_000.0), 1))
    assert tp["walk_reads_served"] == tr["walk_reads_served"]
    assert tp["walk_reads_timed"]["L2"] == tp["walk_reads_served"]["L2"] > 0
    assert tr["walk_reads_timed"]["L2"] < 0.8 * tr["walk_reads_served"]["L2"]
    assert p < r


@pytest.mark.parametrize("chains,last_level", [(1, True), (3, True), (1, False), (3, False),
                                               (1, "guest"), (3, "guest")])
def test_retention_engine_equals_reference(chains, last_level):
    from test_differential import run_both

    doc = _retention_doc(10_000.0, 250.0)
    doc["tlb"]["host_page_size"] = "4KiB"
    doc["tlb"]["page_size"] = "2MiB"
    if last_level is not True:
        doc["cache"][1]["size"] = 32768
        doc["tlb"]["walk_last_level"] = last_level
    rec = micro.chase_records(1 << 20, chains, 300, warmup=0, mlp_loop=chains > 1,
                              loop_warmup=600)
    _, _, a, _ = run_both(doc, rec, True, 997)
    # the retention moved reads: some timed at the last level though DRAM served them,
    # some at the host's latency
    assert sum(a["walk_timed"]) == sum(a["walk_served"]) > 0
    assert a["walk_timed"] != a["walk_served"]


def test_retention_and_host_read_bounds():
    for key in ("walk_retention_ns", "host_read_ns"):
        with pytest.raises(sim.ConfigError, match=f"tlb.{key}"):
            sim.parse_cpu(dict(_retention_doc(), tlb=dict(_retention_doc()["tlb"], **{key: -1})))


SIZES = (512, 2048, 6144, 32768, 131072, 256 << 10, 1 << 20, 2 << 20, 4 << 20)


def _fit_on(cf, monkeypatch, truth: dict, doc: dict, sizes: tuple[int, ...] = SIZES) -> dict:
    """calibrate_fit.fit_hierarchy of ``doc`` (walk latency 0) on chases over ``sizes``
    (512 B-4 MiB) and parallel chases over the largest simulated with the CPU ``truth``,
    4000 loads each."""
    monkeypatch.setattr(cf, "RETENTION_FROM", 64 * 1024)
    monkeypatch.setattr(cf, "STEPS", 4000)
    cpu = sim.parse_cpu(truth)
    top = sizes[-1]
    points = [(s, 4096, cf.chase_row(cpu, s, 4096, 4000)[1] / cpu.freq_ghz) for s in sizes]
    meas = {n: micro.predict(cpu, top, n, max(1, 4000 // n), 4096, True,
                             loop_warmup=cf.mlp_warm(top, cpu) // n)["ns_per_load"]
            for n in cf.RETENTION_CHAINS}
    doc["tlb"]["walk_latency"] = 0
    sysfs = [{"size": c["size"], "ways": c["ways"]} for c in truth["cache"]]
    return cf.fit_hierarchy(doc, points, guest_huge=False, sysfs=sysfs, largest=top,
                            mlp=(top, 4096, meas))


def test_calibrate_fit_finds_the_retention_that_made_the_chases(monkeypatch):
    """The hierarchy fit (sim/calibrate_fit.py) given chases and parallel chases simulated
    with a retention and a host read latency picks that retention among its candidates and
    recovers the host read: the parallel chases tell it from none."""
    from kvsim.sim import calibrate_fit as cf

    monkeypatch.setattr(cf, "RETENTION_CANDIDATES",
                        tuple((r, True) for r in (0.0, 2_500.0, 10_000.0, 40_000.0))
                        + ((0.0, False),))
    doc = _retention_doc()
    out = _fit_on(cf, monkeypatch, _retention_doc(10_000.0, 250.0), doc)
    assert out["chosen"]["walk_retention"]["ns"] == 10_000.0
    assert doc["tlb"]["walk_retention_ns"] == 10_000.0
    # the host read trades a little against the levels' latencies and the L2's policy
    assert doc["tlb"]["host_read_ns"] == pytest.approx(250.0, rel=0.15)
    assert max(abs(r) for r in out["residual_rel"]) < 0.1
    # without the parallel chases the chases alone cannot tell 10 us from none as clearly
    tried = {c["retention_ns"]: c for c in out["chosen"]["walk_retention"]["candidates"]
             if c["last_level_kept"]}
    assert tried[0.0]["error_parallel"] > 5 * tried[10_000.0]["error_parallel"]


def test_calibrate_fit_finds_a_last_level_that_keeps_no_page_table_line(monkeypatch):
    """Chases and parallel chases simulated with a last level that keeps no page-table line:
    the fit picks that candidate, not a retention in time (the parallel chains cost each
    chain what a lone chain costs), and recovers the host read. (A retention shorter than
    any chain's return is the same model but for the private levels, so the candidates here
    are longer.)"""
    from kvsim.sim import calibrate_fit as cf

    monkeypatch.setattr(cf, "RETENTION_CANDIDATES",
                        ((0.0, True), (10_000.0, True), (40_000.0, True), (0.0, False)))
    doc = _retention_doc(l2_size=32768)
    out = _fit_on(cf, monkeypatch, _lost_doc(host_read_ns=250.0), doc)
    ret = out["chosen"]["walk_retention"]
    assert ret["last_level_kept"] is False and ret["ns"] == 0.0
    assert doc["tlb"]["walk_last_level"] is False
    assert "walk_retention_ns" not in doc["tlb"]
    assert doc["tlb"]["host_read_ns"] == pytest.approx(250.0, rel=0.15)


def test_calibrate_fit_finds_a_last_level_that_keeps_the_guests_lines_alone(monkeypatch):
    """Chases simulated with a last level that keeps the guest's page-table lines (read 0)
    and none of the host's: the fit picks that candidate over one that keeps all (the
    host's reads cost more) and one that keeps none (the guest's cost less)."""
    from kvsim.sim import calibrate_fit as cf

    monkeypatch.setattr(cf, "RETENTION_CANDIDATES", ((0.0, True), (0.0, False), (0.0, "guest")))
    truth = _lost_doc(host_read_ns=250.0)
    truth["tlb"]["walk_last_level"] = "guest"
    doc = _retention_doc(l2_size=32768)
    out = _fit_on(cf, monkeypatch, truth, doc)
    ret = out["chosen"]["walk_retention"]
    assert ret["last_level_kept"] == "guest" and ret["ns"] == 0.0
    assert doc["tlb"]["walk_last_level"] == "guest"
    assert doc["tlb"]["host_read_ns"] == pytest.approx(250.0, rel=0.15)
    tried = {c["last_level_kept"]: c["error_chases"] + c["error_parallel"]
             for c in ret["candidates"]}
    assert tried["guest"] < 0.5 * min(tried[True], tried[False])


def _private_l2_doc(**tlb) -> dict:
    """Three levels: a private L2 of 16 KiB that holds a 4 MiB set's page table (256 lines,
    each read every 128 loads, some 15 us apart for one chain) and a last level of 64 KiB
    that would hold a 16 MiB set's (1024 lines, each read every 512 loads)."""
    doc = _retention_doc()
    doc["cache"] = [{"name": "L1D", "size": 1024, "ways": 4, "line": 64, "latency": 4,
                     "mshrs": 16},
                    {"name": "L2", "size": 16384, "ways": 8, "line": 64, "latency": 12},
                    {"name": "L3", "size": 65536, "ways": 8, "line": 64, "latency": 30}]
    doc["tlb"].update(tlb)
    return doc


def test_calibrate_fit_finds_the_last_levels_time_beside_the_private_levels_capacity(
        monkeypatch):
    """Chases and parallel chases over up to 16 MiB simulated with a last level that keeps
    page-table lines in time and private levels that keep them by capacity: the fit picks
    that candidate. A retention alone loses the lone chain's lines that the private L2
    holds (the chase over 4 MiB); a last level that keeps none loses the parallel chains'
    lines that come back within the retention (the chases over 16 MiB)."""
    from kvsim.sim import calibrate_fit as cf

    monkeypatch.setattr(cf, "RETENTION_CANDIDATES",
                        ((0.0, True), (10_000.0, True), (0.0, False), (10_000.0, False)))
    truth = _private_l2_doc(walk_retention_ns=10_000.0, walk_last_level=False,
                            host_read_ns=250.0)
    doc = _private_l2_doc()
    out = _fit_on(cf, monkeypatch, truth, doc, SIZES + (8 << 20, 16 << 20))
    ret = out["chosen"]["walk_retention"]
    assert (ret["ns"], ret["last_level_kept"]) == (10_000.0, False)
    assert doc["tlb"]["walk_retention_ns"] == 10_000.0
    assert doc["tlb"]["walk_last_level"] is False
    tried = {(c["retention_ns"], c["last_level_kept"]): c["error_chases"]
             + c["error_parallel"] for c in ret["candidates"]}
    assert tried[(10_000.0, False)] < 0.5 * min(tried[(10_000.0, True)], tried[(0.0, False)])


# --- a 4 KiB page's walk (``[tlb] walk_extra_4k``) -------------------------------------------

def _extra_cpu(extra: int, page: str = "4KiB", host: str | None = None):
    d = {"name": "t", "freq_ghz": 1.0, "core": {"width": 1, "rob": 8},
         "cache": [{"name": "L1D", "size": 4096, "ways": 4, "line": 64, "latency": 4},
                   {"name": "L2", "size": 65536, "ways": 8, "line": 64, "latency": 12}],
         "dram": {"latency_ns": 100.0},
         "tlb": {"page_size": page, "l1_entries": 1, "l1_ways": 0, "l2_entries": 0,
                 "walk_latency": 20, "walk_reads": 2, "walk_extra_4k": extra}}
    if host:
        d["tlb"]["host_page_size"] = host
    return sim.parse_cpu(d)


@pytest.mark.parametrize("engine", ["fast", "reference"])
@pytest.mark.parametrize("extra", [1, 37])
def test_a_4k_pages_walk_adds_its_extra_and_a_2m_pages_does_not(engine, extra):
    # a chain of dependent loads, one per 4 KiB page: every load walks once
    rec = _chain(range(16))
    walks = 16  # a one-entry DTLB, no STLB
    base = sim.simulate(rec, _extra_cpu(0), engine=engine)["cycles"]
    got = sim.simulate(rec, _extra_cpu(extra), engine=engine)["cycles"]
    assert got - base == pytest.approx(walks * extra, abs=2)
    # the guest's 2 MiB pages (on the host's 4 KiB pages, or not): no extra level
    for host in (None, "4KiB"):
        two = [sim.simulate(rec, _extra_cpu(e, "2MiB", host), engine=engine)["cycles"]
               for e in (0, extra)]
        assert two[0] == two[1]


@settings(max_examples=20, deadline=None)
@given(extra=st.integers(0, 300), page=st.sampled_from(["4KiB", "2MiB"]),
       host=st.sampled_from([None, "4KiB"]), chains=st.integers(1, 4))
def test_walk_extra_4k_engine_equals_reference(extra, page, host, chains):
    from kvsim.sim import _binding as B

    cfg = _extra_cpu(extra, page, host).to_engine(timing=True)
    rec = micro.chase_records(8 << 20, chains, 200, seed=5)
    eng, ref = B.Engine(cfg), ReferenceSim(cfg)
    eng.run(rec)
    ref.run(rec)
    a, b = eng.finish(), ref.finish()
    eng.close()
    for k in ("ticks", "stlb_miss", "dtlb_miss", "dram_reads"):
        assert np.array_equal(np.asarray(a[k]), np.asarray(b[k])), k


@pytest.mark.parametrize("bad, why", [(-1, ">= 0"), (100_001, "0..100000 cycles"),
                                      ("9", "expected int"), (2.5, "expected int")])
def test_walk_extra_4k_bounds_in_one_line(bad, why):
    with pytest.raises(sim.ConfigError) as e:
        _extra_cpu(bad)
    msg = str(e.value)
    assert msg.startswith("tlb.walk_extra_4k") and why in msg and "\n" not in msg


def test_walk_extra_4k_defaults_to_none():
    assert _extra_cpu(0).tlb.walk_extra_4k == 0
    d = {"name": "t", "freq_ghz": 1.0, "core": {"width": 1, "rob": 8},
         "cache": [{"name": "L1D", "size": 4096, "ways": 4, "line": 64, "latency": 4}],
         "dram": {"latency_ns": 100.0}, "tlb": {"page_size": "4KiB"}}
    assert sim.parse_cpu(d).tlb.walk_extra_4k == 0
    assert sim.parse_cpu(d).to_engine(timing=True).walk_extra_4k == 0


def test_no_chase_past_a_retentions_reach_tries_one_candidate(monkeypatch):
    """Where neither a chase nor the parallel chases reach past RETENTION_FROM (past the
    STLB's reach on a real core), no candidate can be told from another: the fit tries the
    first (no retention) alone, and all of them once a chase reaches past it."""
    from kvsim.sim import calibrate_fit as cf

    sizes = (512, 6144, 131072, 1 << 20)
    truth = _retention_doc(host_read_ns=150.0)
    out = _fit_on(cf, monkeypatch, truth, _retention_doc(), sizes)
    assert len(out["chosen"]["walk_retention"]["candidates"]) == len(cf.RETENTION_CANDIDATES)
    monkeypatch.setattr(cf, "RETENTION_FROM", 8 << 20)
    cpu = sim.parse_cpu(truth)
    points = [(s, 4096, cf.chase_row(cpu, s, 4096, 4000)[1]) for s in sizes]
    doc = _retention_doc()
    out = cf.fit_hierarchy(doc, points, guest_huge=False,
                           sysfs=[{"size": c["size"], "ways": c["ways"]} for c in doc["cache"]],
                           largest=sizes[-1], mlp=(sizes[-1], 4096, {1: points[-1][2]}))
    ret = out["chosen"]["walk_retention"]
    assert [(c["retention_ns"], c["last_level_kept"]) for c in ret["candidates"]] == [(0.0, True)]
    assert "walk_retention_ns" not in doc["tlb"]
