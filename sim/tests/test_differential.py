"""Engine == reference: Hypothesis generates small traces and configurations and requires
every raw counter (and therefore the cycle count) to be identical in both implementations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from kvsim import sim, traces
from kvsim.sim import _binding as B
from kvsim.sim.reference import ReferenceSim

LOAD, STORE, PF, MARKER = (traces.KIND_LOAD, traces.KIND_STORE, traces.KIND_PREFETCH,
                           traces.KIND_MARKER)


def assert_same(a, b, path="raw"):
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, np.asarray(b)), f"{path}: {a} != {b}"
    else:
        assert a == b, f"{path}: {a} != {b}"


@st.composite
def cpu_docs(draw, levels=None, timing=None):
    n = levels or draw(st.integers(1, 3))
    line = draw(st.sampled_from([16, 32, 64]))
    caches = []
    for k in range(n):
        pol = draw(st.sampled_from(B.policies()))  # every policy the engine registers
        if pol.pow2_ways:
            ways = draw(st.sampled_from([1, 2, 4, 8]))
        elif pol.name == "lru" and draw(st.integers(0, 3)) == 0:
            # 17 to 32 ways: LRU with stamps, the access copies of the 18- and 26-way
            # last levels (engine.c, Level.shape)
            ways = draw(st.sampled_from([17, 18, 26, 32]))
        else:
            ways = draw(st.integers(1, 5))
        sets = draw(st.sampled_from([1, 2, 4, 8, 16]))
        incl = "non-inclusive"
        if k > 0:
            choices = ["non-inclusive", "inclusive"] + (["exclusive"] if k == n - 1 else [])
            incl = draw(st.sampled_from(choices))
        caches.append({
            "name": f"L{k + 1}", "size": sets * ways * line, "ways": ways, "line": line,
            "latency": draw(st.integers(1, 20)) + 10 * k, "replacement": pol.name,
            "inclusion": incl, "mshrs": draw(st.integers(0, 4)), "seed": draw(st.integers(0, 99)),
        })
    doc = {"name": "hyp", "cache": caches}
    if timing is None:
        timing = draw(st.booleans())
    if timing:
        doc["freq_ghz"] = 2.0
        doc["core"] = {"width": draw(st.integers(1, 4)), "rob": draw(st.integers(1, 40))}
        if draw(st.booleans()):  # a core sustaining less than its width (1/16 steps)
            doc["core"]["sustained_ipc"] = draw(st.integers(4, 16 * doc["core"]["width"])) / 16
        sched = draw(st.sampled_from([0, 1, 2, 5, 16]))  # scheduler entries; 0: no limit
        if sched:
            doc["core"]["scheduler"] = sched
        sbuf = draw(st.sampled_from([0, 0, 1, 2, 3, 8]))  # store-buffer entries; 0: none
        if sbuf:
            doc["core"]["store_buffer"] = sbuf
        doc["dram"] = {"latency_ns": float(draw(st.integers(20, 100)))}
        if draw(st.booleans()):
            doc["dram"]["bandwidth_gbs"] = float(draw(st.sampled_from([2, 8, 32])))
    if draw(st.booleans()):
        # set-associative or fully associative (ways = entries: the presets' 48- and
        # 64-entry DTLBs keep recency ranks from 9 ways up, with more pages than entries
        # so that victims are chosen); STLB sets of 2 or 12 ways
        l1_ways = draw(st.sampled_from([0, 1]))
        l2_entries, l2_ways = draw(st.sampled_from([(0, 2), (8, 2), (12, 12), (24, 12)]))
        doc["tlb"] = {
            "page_size": 4096,
            "l1_entries": draw(st.sampled_from([1, 2, 4] + ([12, 20] if l1_ways == 0 else []))),
            "l1_ways": l1_ways, "l2_entries": l2_entries, "l2_ways": l2_ways,
            "l2_latency": draw(st.integers(1, 10)), "walk_latency": draw(st.integers(1, 50)),
            "walk_reads": draw(st.integers(0, 2)),
            "walkers": draw(st.integers(0, 3)),  # 0: unlimited
            # a 4 KiB (guest) page's walk adds this to walk_latency (engine.c walkCost)
            "walk_extra_4k": draw(st.sampled_from([0, 7, 40])),
        }
        if draw(st.booleans()):  # 2 MiB pages; nested on 4 KiB host pages (guest_page_bits)
            doc["tlb"]["page_size"] = "2MiB"
            doc["tlb"]["host_page_size"] = draw(st.sampled_from([0, "4KiB"]))
        if draw(st.booleans()):  # page-table lines lost after a time; the host's reads
            # from memory at their own latency (engine.c walkCost)
            doc["tlb"]["walk_retention_ns"] = float(draw(st.sampled_from([1, 5, 30, 200])))
            doc["tlb"]["host_read_ns"] = float(draw(st.sampled_from([0, 40, 150])))
        # the last level keeps every page-table line, none, or the guest's (walkCost)
        keeps = draw(st.sampled_from([True, False, "guest"]))
        if keeps is not True:
            doc["tlb"]["walk_last_level"] = keeps
        if draw(st.booleans()):  # each page in a seeded random frame (sim/placement.py)
            doc["tlb"]["placement"] = "random"
            doc["tlb"]["placement_seed"] = draw(st.sampled_from([0, 1, 7, 2 ** 64 - 1]))
    fillable = [c["name"] for c in caches if c["inclusion"] != "exclusive"]
    doc["swprefetch"] = {"fill": draw(st.sampled_from(fillable)),
                         "tlb_miss": draw(st.sampled_from(["walk", "drop"])),
                         "trains_prefetchers": draw(st.booleans())}
    doc["prefetcher"] = [
        {"level": draw(st.sampled_from(fillable)),
         "kind": draw(st.sampled_from(B.prefetcher_names())),
         "degree": draw(st.integers(1, 3)),
         "table": draw(st.sampled_from([1, 2, 3, 4, 17]))}  # 17: two fingerprint groups
        for _ in range(draw(st.integers(0, 2)))
    ]
    for p in doc["prefetcher"]:  # below L1: issue on arrival, trained by stores, by hits
        if p["level"] != caches[0]["name"]:
            for key in ("arrival", "stores", "hits"):
                if draw(st.booleans()):
                    p[key] = True
    return doc


@st.composite
def traces_(draw):
    n = draw(st.integers(1, 250))
    span = draw(st.sampled_from([1 << 10, 1 << 13, 1 << 16, 1 << 18]))
    recs = np.zeros(n, dtype=traces.RECORD_DTYPE)
    base = draw(st.sampled_from([0, 0x7F0000000000]))
    for i in range(n):
        kind = draw(st.sampled_from([LOAD, LOAD, LOAD, STORE, STORE, PF, MARKER]))
        recs[i]["kind"] = kind
        recs[i]["gap"] = draw(st.integers(0, 6))
        recs[i]["tag"] = draw(st.integers(0, 3))
        recs[i]["site"] = draw(st.integers(0, 3))
        if kind == MARKER:
            m = draw(st.sampled_from([traces.MARK_COMMAND, traces.MARK_PHASE,
                                      traces.MARK_WARMUP_BEGIN, traces.MARK_WARMUP_END,
                                      traces.MARK_BATCH]))
            recs[i]["flags"] = m
            recs[i]["addr"] = draw(st.integers(0, 3))
        else:
            recs[i]["addr"] = base + draw(st.integers(0, span))
            recs[i]["size"] = 1 if kind == PF else draw(st.sampled_from([1, 4, 8, 16, 64, 100]))
            recs[i]["dep"] = draw(st.integers(0, 5))
    return recs


def run_both(doc, recs, flush, chunk, qcap=0, threads=1, ran=None):
    """Run `recs` through the engine (in chunks of `chunk`: chunking must not matter; queue
    capacity `qcap`, 0 = default; `threads`: must not matter either) and the reference;
    require every raw counter equal."""
    cpu = sim.parse_cpu(doc)
    cfg = cpu.to_engine(timing=cpu.timing_capable, flush=flush)
    cfg.queue_cap = qcap
    cfg.threads = threads
    eng = B.Engine(cfg)
    ref = ReferenceSim(cfg)
    for i in range(0, len(recs), chunk):
        eng.run(recs[i:i + chunk])
    ref.run(recs)
    a, b = eng.finish(), ref.finish()
    if ran is not None:
        ran.append(eng.threads)
    eng.close()
    assert_same(a, b)
    return cpu, cfg, a, b


@st.composite
def lower_docs(draw):
    """Counting-only configurations whose last level the engine runs on a thread of its own
    with threads >= 2 (_engine/lower.c): three levels, an LRU L2 of at most 16 ways, a last
    level that is not inclusive (exclusive ones hand dirty lines up), nothing that fills the
    last level but the L2; every other part as drawn for any configuration."""
    doc = draw(cpu_docs(levels=3, timing=False))
    l2, l3 = doc["cache"][1], doc["cache"][2]
    l2["replacement"] = "lru"
    l2["ways"] = draw(st.sampled_from([1, 2, 4, 8, 16]))
    l2["size"] = l2["ways"] * l2["line"] * draw(st.sampled_from([1, 2, 4, 8]))
    l3["inclusion"] = draw(st.sampled_from(["non-inclusive", "exclusive"]))
    doc["swprefetch"]["fill"] = draw(st.sampled_from(["L1", "L2"]))
    for p in doc["prefetcher"]:
        if p["level"] == "L3":
            p["level"] = "L2"
    if "tlb" not in doc and not doc["prefetcher"] and all(
            c["replacement"] == "lru" and c["inclusion"] == "non-inclusive"
            for c in doc["cache"]):
        # the common configuration, which runs level by level (_engine/levels.c) instead
        l3["inclusion"] = "exclusive"
    return doc


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=cpu_docs(), recs=traces_(), flush=st.booleans(), chunk=st.integers(1, 300))
def test_engine_equals_reference(doc, recs, flush, chunk):
    cpu, cfg, a, b = run_both(doc, recs, flush, chunk)
    ra = sim.api.build_result(a, cpu, cfg, None, "fast")
    rb = sim.api.build_result(b, cpu, cfg, None, "reference")
    assert ra["cycles"] == rb["cycles"]
    if cpu.timing_capable:
        assert ra["cycles"] >= 0



@st.composite
def lru_docs(draw):
    """The engine's specialised configuration (every level LRU and non-inclusive, no TLB,
    no hardware prefetchers), with up to 20 ways: LRU keeps ranks up to 16 ways and stamps
    beyond, and 12 and 16 ways are the benchmark's."""
    n = draw(st.integers(1, 3))
    line = draw(st.sampled_from([16, 32, 64]))
    caches = []
    for k in range(n):
        ways = draw(st.sampled_from([1, 2, 3, 4, 8, 12, 15, 16, 17, 20]))
        sets = draw(st.sampled_from([1, 2, 4, 8, 16]))
        caches.append({
            "name": f"L{k + 1}", "size": sets * ways * line, "ways": ways, "line": line,
            "latency": draw(st.integers(1, 20)) + 10 * k, "replacement": "lru",
            "mshrs": draw(st.integers(0, 4)),
        })
    doc = {"name": "hyp-lru", "cache": caches}
    if draw(st.booleans()):
        doc["freq_ghz"] = 2.0
        doc["core"] = {"width": draw(st.integers(1, 4)), "rob": draw(st.integers(1, 40))}
        if draw(st.booleans()):  # a core sustaining less than its width (1/16 steps)
            doc["core"]["sustained_ipc"] = draw(st.integers(4, 16 * doc["core"]["width"])) / 16
        sched = draw(st.sampled_from([0, 1, 2, 5, 16]))  # scheduler entries; 0: no limit
        if sched:
            doc["core"]["scheduler"] = sched
        sbuf = draw(st.sampled_from([0, 0, 1, 2, 3, 8]))  # store-buffer entries; 0: none
        if sbuf:
            doc["core"]["store_buffer"] = sbuf
        doc["dram"] = {"latency_ns": float(draw(st.integers(20, 100)))}
        if draw(st.booleans()):
            doc["dram"]["bandwidth_gbs"] = float(draw(st.sampled_from([2, 8, 32])))
    doc["swprefetch"] = {"fill": draw(st.sampled_from([c["name"] for c in caches]))}
    return doc


def check_hot_path(doc, recs, flush, chunk, qcap, threads):
    """Engine == reference on the specialised configuration, whose level-by-level queues
    (_engine/levels.c) are given capacity `qcap` (0 = the default 256), so that small traces
    fill them and every drain point (full L1 queue, full queue below, record too large for
    the queue, marker, software prefetch, end of a call) is taken; segments (32 queues'
    worth) end inside small traces too, and `threads` share them out."""
    run_both(doc, recs, flush, chunk, qcap, threads)


QCAPS = st.sampled_from([0, 2, 3, 4, 7, 16])
THREADS = st.sampled_from([1, 2, 3, 4])


# One 16-byte store at address 0, a whole line: L1 allocates it without a read, so nothing
# reaches the last level and its thread has no request to take.
_ONE_FULL_LINE_STORE = {
    "name": "hyp", "prefetcher": [],
    "swprefetch": {"fill": "L1", "tlb_miss": "walk", "trains_prefetchers": False},
    "cache": [
        {"name": name, "size": size, "ways": ways, "line": 16, "latency": lat,
         "replacement": "lru", "inclusion": incl, "mshrs": 0, "seed": 0}
        for name, size, ways, lat, incl in [
            ("L1", 272, 17, 1, "non-inclusive"), ("L2", 16, 1, 11, "non-inclusive"),
            ("L3", 272, 17, 21, "exclusive")]],
}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=lower_docs(), recs=traces_(), flush=st.booleans(), chunk=st.integers(1, 300),
       qcap=QCAPS, threads=THREADS)
@example(doc=_ONE_FULL_LINE_STORE, flush=False, chunk=1, qcap=0, threads=2,
         recs=np.array([(0, 0, 0, 16, STORE, 0, 0, 0)], dtype=traces.RECORD_DTYPE))
def test_last_level_thread_equals_reference(doc, recs, flush, chunk, qcap, threads):
    """Engine == reference with the last level on a thread of its own (threads >= 2; qcap:
    requests per buffer, so that small traces hand many buffers over and drain at markers
    with requests in flight; with threads >= 3 the TLB thread runs beside it).  Whenever a
    request reached the last level (the reference counts an access there), the last level's
    thread took it."""
    ran = []
    _, _, _, ref = run_both(doc, recs, flush, chunk, qcap, threads, ran)
    if threads >= 2 and any(map(any, ref["level"][-1]["access"])):
        assert ran[0] >= 2  # the last level's thread took the requests


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=lru_docs(), recs=traces_(), flush=st.booleans(), chunk=st.integers(1, 300),
       qcap=QCAPS, threads=THREADS)
def test_lru_hot_path_equals_reference(doc, recs, flush, chunk, qcap, threads):
    check_hot_path(doc, recs, flush, chunk, qcap, threads)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=lru_docs(), recs=traces_(), flush=st.booleans(), chunk=st.integers(1, 300),
       qcap=QCAPS, threads=THREADS)
def test_lru_hot_path_equals_reference_long(doc, recs, flush, chunk, qcap, threads):
    """The same property with ten times the examples (`pytest -m slow`)."""
    check_hot_path(doc, recs, flush, chunk, qcap, threads)


@pytest.mark.parametrize("timing", [False, True])
@pytest.mark.parametrize("qcap", [0, 5])
@pytest.mark.parametrize("fill", ["L1", "L2"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_lru_hot_path_long_trace(timing, qcap, fill, threads):
    """A 6,000-record trace of stores, loads, whole-line and multi-line accesses (one of
    them wider than a queue), prefetches and markers through a tiny 16-way three-level
    hierarchy: write-backs cascade, queues fill at every level."""
    rng = np.random.default_rng(11)
    n = 6000
    recs = np.zeros(n, dtype=traces.RECORD_DTYPE)
    recs["addr"] = 0x7F0000000000 + rng.integers(0, 1 << 17, n)
    recs["size"] = rng.choice([1, 8, 64, 100], n)
    recs["kind"] = rng.choice([LOAD, LOAD, STORE, STORE, STORE, PF], n,
                              p=[.3, .2, .2, .1, .1, .1])
    recs["addr"][recs["size"] == 64] &= ~np.uint64(63)  # whole-line stores
    recs["gap"] = rng.integers(0, 10, n)
    recs["dep"] = rng.integers(0, 3, n)
    recs["tag"] = rng.integers(0, 4, n)
    marks = rng.choice(n, 40, replace=False)
    recs["kind"][marks] = MARKER
    recs["flags"][marks] = rng.choice([traces.MARK_COMMAND, traces.MARK_PHASE], 40)
    recs["addr"][marks] = rng.integers(0, 3, 40)
    recs["kind"][100], recs["size"][100] = STORE, 64 * 300  # 300 lines: wider than any queue
    caches = [{"name": f"L{k + 1}", "size": 64 * 16 * sets, "ways": 16, "line": 64,
               "latency": 4 + 10 * k, "replacement": "lru", "mshrs": 4 * (k < 2)}
              for k, sets in enumerate([2, 4, 8])]
    doc = {"name": "tiny", "cache": caches, "swprefetch": {"fill": fill}}
    if timing:
        doc |= {"freq_ghz": 2.0, "core": {"width": 4, "rob": 64},
                "dram": {"latency_ns": 80.0, "bandwidth_gbs": 8.0}}
    check_hot_path(doc, recs, True, 1000, qcap, threads)


def hot_and_spread(rng, n, hot_share, hot_bytes, spread_bytes, sizes, kinds):
    """``n`` records: a ``hot_share`` of them within ``hot_bytes``, the rest spread over
    ``spread_bytes``; sizes and kinds drawn from the lists, small gaps and dependencies."""
    recs = np.zeros(n, dtype=traces.RECORD_DTYPE)
    hot = rng.random(n) < hot_share
    recs["addr"] = 0x7F0000000000 + np.where(hot, rng.integers(0, hot_bytes, n),
                                             rng.integers(0, spread_bytes, n))
    recs["size"] = rng.choice(sizes, n)
    recs["kind"] = rng.choice(kinds, n)
    recs["gap"] = rng.integers(0, 10, n)
    recs["dep"] = rng.integers(0, 3, n)
    return recs


@pytest.mark.parametrize("timing", [False, True])
@pytest.mark.parametrize("incl", ["non-inclusive", "inclusive", "exclusive"])
@pytest.mark.parametrize("ways", [17, 26, 32])
def test_stamp_lru_level_equals_reference(ways, incl, timing):
    """An LRU last level of 17 to 32 ways (stamps: the record path's copies for the 18- and
    26-way last levels) in each inclusion mode, below an LRU L1 with a next-line prefetcher
    (so the record-by-record path runs), on a trace that fills its sets: victims are chosen
    by the smallest stamp, inclusive evictions invalidate L1, exclusive hits move lines up
    with their dirty bit."""
    # most accesses to 4 lines that stay in L1 (so they age below it), the rest spread
    # over three times the last level
    recs = hot_and_spread(np.random.default_rng(ways), 5000, 0.8, 256, 64 * 4 * ways * 3,
                          [1, 8, 64], [LOAD, LOAD, STORE])
    caches = [{"name": "L1", "size": 64 * 16, "ways": 16, "line": 64, "latency": 4,
               "replacement": "lru", "mshrs": 4},
              {"name": "L2", "size": 64 * ways * 4, "ways": ways, "line": 64, "latency": 30,
               "replacement": "lru", "inclusion": incl, "mshrs": 4}]
    doc = {"name": "stamps", "cache": caches, "swprefetch": {"fill": "L1"},
           "prefetcher": [{"level": "L1", "kind": "next_line", "degree": 1}]}
    if timing:
        doc |= {"freq_ghz": 2.0, "core": {"width": 4, "rob": 64},
                "dram": {"latency_ns": 80.0, "bandwidth_gbs": 8.0}}
    _, _, a, _ = run_both(doc, recs, True, 700)
    assert a["level"][1]["evictions"] > 0  # the stamp victim choice was taken
    if incl == "inclusive":
        assert a["level"][1]["back_invalidations"] > 0


@pytest.mark.parametrize("timing", [False, True])
@pytest.mark.parametrize("l2_incl,l3_ways,l3_incl", [
    ("inclusive", 16, "exclusive"), ("inclusive", 18, "exclusive"),
    ("inclusive", 18, "non-inclusive"), ("non-inclusive", 26, "non-inclusive"),
    ("non-inclusive", 16, "non-inclusive"),
    ("inclusive", 16, "inclusive"), ("non-inclusive", 18, "exclusive")])
def test_three_levels_with_last_compiled_in(l2_incl, l3_ways, l3_incl, timing):
    """Three LRU levels on the record-by-record path (an L1 next-line and an L2 stream
    prefetcher, a TLB whose walks read through the caches), the L2 and last-level shapes of
    the presets and of the common configuration, whose L2 copy has the last level's access
    compiled in (engine.c ACCESS_PAIR), and two shapes without such a copy: a trace that
    fills the sets of every level, with stores, prefetches and wide accesses."""
    rng = np.random.default_rng(l3_ways)
    recs = hot_and_spread(rng, 6000, 0.6, 2048, 64 * 8 * l3_ways * 6, [1, 8, 64, 100],
                          [LOAD, LOAD, STORE, PF])
    recs["tag"] = rng.integers(0, 4, len(recs))
    caches = [{"name": "L1", "size": 64 * 4 * 4, "ways": 4, "line": 64, "latency": 4,
               "replacement": "lru", "mshrs": 4},
              {"name": "L2", "size": 64 * 8 * 8, "ways": 8, "line": 64, "latency": 12,
               "replacement": "lru", "inclusion": l2_incl, "mshrs": 6},
              {"name": "L3", "size": 64 * 8 * l3_ways, "ways": l3_ways, "line": 64,
               "latency": 30, "replacement": "lru", "inclusion": l3_incl, "mshrs": 0}]
    doc = {"name": "pair", "cache": caches, "swprefetch": {"fill": "L1"},
           "prefetcher": [{"level": "L1", "kind": "next_line", "degree": 1},
                          {"level": "L2", "kind": "stream", "degree": 2, "table": 4}],
           "tlb": {"page_size": "4KiB", "l1_entries": 4, "l1_ways": 0, "l2_entries": 0,
                   "l2_ways": 2, "walk_latency": 20, "walk_reads": 2}}
    if timing:
        doc |= {"freq_ghz": 2.0, "core": {"width": 4, "rob": 64},
                "dram": {"latency_ns": 80.0, "bandwidth_gbs": 8.0}}
    _, _, a, _ = run_both(doc, recs, True, 900)
    assert a["level"][2]["evictions"] > 0  # the last level's victims were chosen
    if l2_incl == "inclusive":
        assert a["level"][1]["back_invalidations"] > 0


@pytest.mark.parametrize("threads", [1, 2])
def test_presets_engine_equals_reference(threads):
    """Every shipped preset with all its features on, on one mixed random trace; with two
    threads, the TLB thread (_engine/tlb.c) codes blocks of 7 records ahead."""
    rng = np.random.default_rng(7)
    n = 3000
    recs = np.zeros(n, dtype=traces.RECORD_DTYPE)
    recs["addr"] = 0x7F0000000000 + rng.integers(0, 1 << 22, n)
    recs["size"] = rng.choice([1, 8, 64, 100], n)
    recs["kind"] = rng.choice([LOAD, LOAD, LOAD, STORE, PF], n)
    recs["gap"] = rng.integers(0, 10, n)
    recs["dep"] = rng.integers(0, 3, n)
    recs["tag"] = rng.integers(0, 6, n)
    recs["site"] = rng.integers(0, 6, n)
    for name in sim.preset_names():
        cpu = sim.load_cpu(name)
        cfg = cpu.to_engine(timing=cpu.timing_capable)  # `local` on an unknown core: untimed
        cfg.threads = threads
        cfg.queue_cap = 7 if threads > 1 else 0
        eng = B.Engine(cfg)
        eng.run(recs)
        assert eng.threads == threads  # the TLB thread took slices of 28 records
        ref = ReferenceSim(cfg)
        ref.run(recs)
        assert_same(eng.finish(), ref.finish(), name)
        eng.close()


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=cpu_docs(), recs=traces_(), flush=st.booleans(), chunk=st.integers(1, 300),
       qcap=QCAPS, scatter=st.tuples(st.integers(0, 250), st.integers(0, 250)))
def test_tlb_thread_equals_reference(doc, recs, flush, chunk, qcap, scatter):
    """A TLB off the common configuration with two threads: the TLB thread translates
    blocks of records (`qcap` each; 0 = 8192) ahead of the simulation (_engine/tlb.c) for
    the slices (4 blocks) that follow one missing the DTLB on every other record or more,
    and every count is still the reference's. The records of one stretch (`scatter`) move
    each to a page of its own, so that the thread takes slices there and hands the TLB back
    after it."""
    assume("tlb" in doc)
    lo, hi = sorted(scatter)
    idx = np.arange(lo, max(lo, min(hi, len(recs))))
    idx = idx[recs["kind"][idx] != MARKER]
    recs["addr"][idx] += (idx.astype(np.uint64) + np.uint64(1)) << np.uint64(20)
    run_both(doc, recs, flush, chunk, qcap, threads=2)


@st.composite
def ahead_docs(draw):
    """A configuration with a TLB and a prefetcher at L1 that ignores hits (IP-stride or
    ascending), anywhere among the others: with two threads the TLB thread trains it ahead
    (_engine/tlb.c)."""
    doc = draw(cpu_docs())
    doc.setdefault("tlb", {"page_size": 4096, "l1_entries": draw(st.sampled_from([1, 4, 12])),
                           "l1_ways": 0, "l2_entries": 8, "l2_ways": 2, "l2_latency": 3,
                           "walk_latency": 20, "walk_reads": draw(st.integers(0, 2))})
    ips = {"level": "L1", "kind": draw(st.sampled_from(["ip_stride", "ascending"])),
           "degree": draw(st.integers(1, 3)),
           "table": draw(st.sampled_from([1, 2, 3, 17]))}
    pfs = doc["prefetcher"]
    pfs.insert(draw(st.integers(0, len(pfs))), ips)
    if draw(st.booleans()):  # a second one: the thread trains only the first
        pfs.append(dict(ips, table=4))
    return doc


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=ahead_docs(), recs=traces_(), flush=st.booleans(), chunk=st.integers(1, 300),
       qcap=QCAPS)
def test_prefetcher_ahead_equals_reference(doc, recs, flush, chunk, qcap):
    """The L1 IP-stride or ascending prefetcher trained by the TLB thread, blocks of `qcap` records
    ahead (0 = 8192), its candidates issued at its place among the other prefetchers':
    every count is still the reference's."""
    run_both(doc, recs, flush, chunk, qcap, threads=2)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=cpu_docs(), recs=traces_(), flush=st.booleans(), chunk=st.integers(1, 300))
def test_engine_equals_reference_long(doc, recs, flush, chunk):
    """The same property with ten times the examples (`pytest -m slow`)."""
    test_engine_equals_reference.hypothesis.inner_test(doc, recs, flush, chunk)


def test_nested_paging_on_smaller_host_pages():
    """A guest's 2 MiB pages on 4 KiB host pages (`[tlb] host_page_size`): the TLBs hold
    4 KiB translations, so loads over one 2 MiB page miss the DTLB page by page, and a walk
    reads the guest's leaf entry of the 2 MiB page (one line for them all) and the host's
    of each 4 KiB page; without the host page, none of that; engine == reference."""
    recs = np.zeros(64, dtype=traces.RECORD_DTYPE)
    recs["kind"], recs["size"] = traces.KIND_LOAD, 8
    recs["addr"] = 0x4000_0000 + np.arange(64, dtype=np.uint64) * 4096  # 64 pages
    doc = {"name": "nested", "cache": [
        {"name": "L1", "size": 1024, "ways": 4, "line": 64, "latency": 4},
        {"name": "L2", "size": 16384, "ways": 4, "line": 64, "latency": 12}],
        "tlb": {"page_size": "2MiB", "l1_entries": 4, "l1_ways": 0, "l2_entries": 0,
                "walk_latency": 20, "walk_reads": 2}}
    _, _, flat, _ = run_both(doc, recs, True, 64)
    nested = dict(doc, tlb=dict(doc["tlb"], host_page_size="4KiB"))
    _, _, a, _ = run_both(nested, recs, True, 64)
    assert flat["dtlb_miss"] == 1 and a["dtlb_miss"] == 64
    # the walks' reads: the guest's leaf entry (one line) misses once, the host's 64
    # entries (8 per line) eight times; the data 64 times
    l1 = sim.api.build_result(a, sim.parse_cpu(nested), sim.parse_cpu(nested).to_engine(
        timing=False), None, "fast")
    assert l1["tlb"]["page_size"] == 4096 and l1["tlb"]["guest_page_size"] == 2 << 20
    assert a["dram_reads"] == 64 + 1 + 8
