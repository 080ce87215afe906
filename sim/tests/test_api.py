"""sim.simulate: per-line counting, warm-up, markers, JSON output and the DataFrame."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from sim_helpers import records
from test_differential import assert_same

from bench import sim as engine_bench
from kvsim import sim, traces
from kvsim.sim import _binding as B

SMALL = {"name": "small", "cache": [
    {"name": "L1", "size": "1KiB", "ways": 2, "line": 64},
    {"name": "L2", "size": "4KiB", "ways": 4, "line": 64},
]}


@pytest.fixture(params=["fast", "reference"])
def engine(request):
    return request.param


def test_line_crossing_access_counts_twice(engine):
    res = sim.simulate(records([("load", 60, 8)]), sim.parse_cpu(SMALL), engine=engine)
    assert res["levels"][0]["accesses"] == 2 and res["levels"][0]["misses"] == 2
    assert res["pieces"] == 2 and res["multiline_accesses"] == 1
    assert res["instructions"] == 1 and res["records"] == 1


def test_warmup_updates_state_but_is_not_counted(engine):
    recs = records([
        ("marker", 0, 0, 0, 0, 0, 0, traces.MARK_WARMUP_BEGIN),
        ("load", 0x1000, 8, 5),
        ("marker", 0, 0, 0, 0, 0, 0, traces.MARK_WARMUP_END),
        ("load", 0x1000, 8, 2),
    ])
    res = sim.simulate(recs, sim.parse_cpu(SMALL), engine=engine)
    l1 = res["levels"][0]
    assert (l1["accesses"], l1["hits"], l1["misses"]) == (1, 1, 0)
    assert res["warmup_records"] == 3 and res["records"] == 1
    assert res["instructions"] == 3


def test_store_covering_a_line_allocates_without_fetch(engine):
    res = sim.simulate(records([("store", 0, 64), ("store", 128, 8)]), sim.parse_cpu(SMALL),
                       engine=engine)
    l1 = res["levels"][0]
    assert l1["misses"] == 2 and l1["fetches"] == 1
    assert l1["writebacks"] == 2  # both dirty lines flushed at the end


def test_tags_and_phases_and_dataframe(engine):
    recs = records([
        ("marker", 0, 0, 0, 0, 0, 0, traces.MARK_PHASE), ("load", 0, 8, 0, 0, 1),
        ("load", 4096, 8, 0, 0, 2),
        ("marker", 1, 0, 0, 0, 0, 0, traces.MARK_PHASE), ("store", 0, 8, 0, 0, 1),
    ])
    res = sim.simulate(recs, sim.parse_cpu(SMALL), engine=engine,
                       tag_names=["other", "bucket", "key"])
    json.dumps(res)  # JSON-serialisable
    df = sim.stats_dataframe(res)
    l1 = df[df.level == "L1"].set_index(["tag_name", "kind"])
    assert l1.loc[("bucket", "load"), "misses"] == 1
    assert l1.loc[("bucket", "store"), "hits"] == 1
    assert l1.loc[("key", "load"), "accesses"] == 1
    assert [p["phase"] for p in res["phases"]] == [0, 1]
    assert res["phases"][1]["levels"][0]["accesses"] == 1
    assert res["markers"] == {"phase": 2}


def test_reader_source_and_header_tags(tmp_path):
    recs = records([("load", 64 * i, 8, 0, 0, 1) for i in range(100)])
    header = {"tags": ["other", "bucket"], "phases": []}
    buf = io.BytesIO()
    with traces.Writer(buf, header) as w:
        w.write(recs)
    buf.seek(0)
    with traces.open(buf) as tr:
        res = sim.simulate(tr, "graviton3")
    assert res["mode"] == "timing" and res["cycles"] > 0 and res["ipc"] > 0
    assert {r["tag_name"] for r in res["by_tag"]} == {"bucket"}


def test_a_trace_file_on_both_engines(tmp_path):
    """From a file, the compiled intake feeds the fast engine its own buffers and the
    reference numpy arrays; both give the same result, with the file as the trace."""
    recs = records([(("load", "store")[i % 2], 4096 * (i % 37) + 8 * i, 8, i % 5, 0, 1)
                    for i in range(300)])
    p = tmp_path / "t.kvt"
    with traces.Writer(p, {"tags": ["other", "bucket"]}, chunk_records=64) as w:
        w.write(recs)
    fast, ref = (sim.simulate(str(p), "graviton3", engine=e) for e in ("fast", "reference"))
    assert fast["trace"] == ref["trace"] == str(p)
    for key in ("engine", "engine_threads"):
        fast.pop(key), ref.pop(key)
    assert fast == ref and fast["records"] == 300


def test_functional_flag_and_unknown_engine():
    recs = records([("load", 0, 8)])
    assert sim.simulate(recs, "xeon-8255c", functional=True)["cycles"] is None
    with pytest.raises(ValueError):
        sim.simulate(recs, "xeon-8255c", engine="turbo")
    with pytest.raises(TypeError):
        sim.simulate(np.zeros(3), "xeon-8255c")


def test_every_preset_runs(engine):
    rng = np.random.default_rng(3)
    recs = records([(str(k), int(a), 1 if k == "prefetch" else 8, 3) for k, a in
                    zip(rng.choice(["load", "store", "prefetch"], 400),
                        rng.integers(0, 1 << 20, 400), strict=True)])
    for name in sim.preset_names():
        res = sim.simulate(recs, name, engine=engine)
        # `local` on a core outside the table of known cores, uncalibrated, has no timing
        if sim.load_cpu(name).timing_capable:
            assert res["cycles"] > 0
        else:
            assert name == "local" and res["cycles"] is None
        assert res["levels"][0]["accesses"] >= 400 - res["record_kinds"]["prefetch"]


def test_commands_span_marker_to_marker(engine):
    c = traces.MARK_COMMAND
    recs = records([
        ("marker", 0, 0, 0, 0, 0, 0, c), ("load", 0, 8), ("load", 4096, 8),  # command 0: 2 misses
        ("marker", 1, 0, 0, 0, 0, 0, c), ("load", 0, 8),                     # command 1: a hit
        ("marker", 2, 0, 0, 0, 0, 0, c), ("load", 8192, 8), ("load", 12288, 8), ("load", 16384, 8),
    ])
    res = sim.simulate(recs, "xeon-8255c", engine=engine, tlb=False, prefetchers=False)
    cmd = res["commands"]
    assert cmd["count"] == 3
    assert cmd["mean_l1_misses"] == pytest.approx(5 / 3)
    # 2 misses -> bucket 1, 0 misses -> bucket 0, 3 misses -> bucket 2
    assert cmd["l1_misses_log2_histogram"][:3] == [1, 1, 1]
    # the longest is the last one: three independent DRAM misses that overlap (80 ns, 3 GHz)
    assert 80 * 3.0 <= cmd["max_cycles"] < 2 * 80 * 3.0
    assert sum(cmd["cycles_log2_histogram"]) == 3


def test_missing_engine_library_names_the_files(monkeypatch, tmp_path):
    from kvsim import artifacts
    from kvsim.sim import _binding

    monkeypatch.setattr(_binding, "_LIB", None)
    monkeypatch.delenv("KVSIM_ENGINE_LIB", raising=False)
    monkeypatch.setattr(artifacts, "SOURCE_ROOT", tmp_path / "src")
    monkeypatch.setattr(artifacts, "NATIVE_DIR", tmp_path / "wheel")
    with pytest.raises(sim.EngineMissing, match="src/sim/_engine/build/.*wheel/libkvsim_sim.so"):
        sim.simulate(records([("load", 0, 8)]), "xeon-8255c")


def test_threads_change_nothing_but_the_speed():
    """The same trace (loads, stores, line-crossing accesses, phases, commands) through the
    bench hierarchy with 1, 2 and 3 engine threads, functional and timed: equal results."""
    rng = np.random.default_rng(5)
    n = 60_000
    recs = np.zeros(n, dtype=traces.RECORD_DTYPE)
    recs["addr"] = rng.integers(0, 1 << 26, n)
    recs["size"] = rng.choice([8, 8, 8, 100], n)
    recs["kind"] = rng.choice([traces.KIND_LOAD, traces.KIND_LOAD, traces.KIND_STORE], n)
    recs["gap"] = rng.integers(0, 6, n)
    recs["dep"] = rng.integers(0, 3, n)
    marks = rng.choice(n, 30, replace=False)
    recs["kind"][marks] = traces.KIND_MARKER
    recs["size"][marks] = 0
    recs["flags"][marks] = rng.choice([traces.MARK_COMMAND, traces.MARK_PHASE], 30)
    recs["addr"][marks] = rng.integers(0, 3, 30)
    # a dep names a load (FORMAT.md "Record rules"); markers have none
    src = np.arange(n) - recs["dep"].astype(np.int64)
    named = np.where(src >= 0, recs["kind"][np.maximum(src, 0)], traces.KIND_MARKER)
    recs["dep"][(named != traces.KIND_LOAD) | (recs["kind"] == traces.KIND_MARKER)] = 0
    cpu = sim.parse_cpu(engine_bench.HIER)
    for functional in (True, False):
        runs = [sim.simulate(recs, cpu, functional=functional, threads=t) for t in (1, 2, 3)]
        assert [r.pop("engine_threads") for r in runs] == [1, 2, 3]
        assert runs[0]["levels"][2]["misses"] > 0
        assert runs[0] == runs[1] == runs[2]
    # a preset with a TLB and hardware prefetchers takes the record-by-record path; its TLB
    # thread takes slices of 65,536 records, none of them in a trace this short; counting
    # only, with threads >= 2 its last level runs on a thread of its own (_engine/lower.c)
    runs = [sim.simulate(recs, "graviton3", functional=functional, threads=t)
            for t in (1, 2, 3) for functional in (True, False)]
    assert [r.pop("engine_threads") for r in runs] == [1, 1, 2, 1, 2, 1]
    assert runs[0] == runs[2] == runs[4] and runs[1] == runs[3] == runs[5]


@pytest.mark.parametrize("functional", [True, False])
def test_tlb_thread_takes_the_scattered_slices(functional):
    """With threads >= 2 a preset's TLB thread (_engine/tlb.c engTlbRun) takes a slice of
    65,536 records when the slice before missed the DTLB on at least every other record:
    addresses scattered over 1 GiB start it after the first slice, addresses on four pages
    never do, and a trace alternating between the two hands the TLB back and forth; every
    result is that of one thread."""
    n, slice_ = 4 * 65536, 65536
    rng = np.random.default_rng(9)
    scattered = rng.integers(0, 1 << 30, n, dtype=np.uint64) & ~np.uint64(7)
    local = (np.arange(n, dtype=np.uint64) * np.uint64(8)) % np.uint64(16384)
    mixed = np.where((np.arange(n) // slice_) % 2 == 1, scattered, local)
    # counting only, the last level's thread runs beside them (_engine/lower.c)
    threads, lower = 2, int(functional)
    for addr, ran in ((scattered, 2), (local, 1), (mixed, 2)):
        recs = np.zeros(n, dtype=traces.RECORD_DTYPE)
        recs["addr"] = addr
        recs["size"] = 8
        recs["kind"] = np.where(rng.random(n) < 0.3, traces.KIND_STORE, traces.KIND_LOAD)
        recs["gap"] = rng.integers(0, 6, n)
        one, two = (sim.simulate(recs, "graviton3", functional=functional, threads=t)
                    for t in (1, threads))
        assert (one.pop("engine_threads"), two.pop("engine_threads")) == (1, ran + lower)
        assert one == two


@pytest.mark.parametrize("threads", [0, 9, 1.5])
def test_bad_thread_count(threads):
    with pytest.raises(sim.ConfigError, match="threads"):
        sim.simulate(records([("load", 0, 8)]), sim.parse_cpu(SMALL), threads=threads)


@pytest.mark.parametrize("field,value", [("kind", 9), ("size", 0), ("dep", 0xFFFFFFFF),
                                         ("flags", 3), ("addr", 2**64 - 4)])
def test_a_record_array_is_checked_as_a_trace_is(field, value):
    """simulate(ndarray) refuses what the reader refuses, with the reader's words."""
    recs = records([("load", 0, 8), ("load", 64, 8), ("store", 128, 8)])
    recs[1][field] = value
    buf = io.BytesIO()
    with traces.Writer(buf, {}, validate=False) as w:
        w.write(recs)
    buf.seek(0)
    with pytest.raises(traces.TraceError) as from_reader:
        traces.read_all(buf)
    with pytest.raises(traces.TraceError) as from_array:
        sim.simulate(recs, "graviton3", functional=True)
    said = str(from_reader.value).split("(trace record 1): ", 1)[1]
    assert str(from_array.value) == f"record array: record 1: {said}"
    assert said.startswith(f"{field}: ")
    sim.simulate(recs, "graviton3", functional=True, validate=False)  # the engine is safe


def test_tlb_thread_with_a_wrapping_access():
    """An access wrapping past 2^64 (the reader refuses it; an unchecked array may hold one)
    has no pieces; the TLB thread must code it as none too, not stall the run (found by
    fuzz/ engine_records, corpus crash-tlb-thread-wrapping-access). With the test hook
    queue_cap 2 the thread takes slices of 8 records, here from the second on (the first
    eight miss the DTLB), so it codes the wrapping access."""
    recs = np.zeros(20, dtype=traces.RECORD_DTYPE)
    recs["addr"] = [0x1000 * (i + 1) for i in range(20)]
    recs["addr"][12] = 0xFFFFFFFFFFFFFFF0
    recs["size"] = 8
    recs["size"][12] = 64
    recs["kind"] = traces.KIND_LOAD
    cpu = sim.load_cpu("graviton3")
    out = []
    for threads in (1, 2):
        cfg = cpu.to_engine(timing=True)
        cfg.threads, cfg.queue_cap = threads, 2
        eng = B.Engine(cfg)
        try:
            eng.run(recs)
            assert eng.threads == threads
            out.append(eng.finish())
        finally:
            eng.close()
    assert_same(out[0], out[1])


@pytest.mark.parametrize("preset", ["graviton3", "xeon-8488c"])
def test_last_level_thread_settles_before_a_peek(preset):
    """Counting only with threads=2 the last level runs on its own thread (_engine/lower.c):
    a look at its sets between two runs sees every request sent so far (the buffers are
    drained first), and the run goes on to the one-thread result; an exclusive last level
    (graviton3) hands dirty lines up, a non-inclusive one (xeon-8488c) does not."""
    rng = np.random.default_rng(3)
    n = 120_000
    recs = np.zeros(n, dtype=traces.RECORD_DTYPE)
    recs["addr"] = rng.integers(0, 1 << 26, n, dtype=np.uint64) & ~np.uint64(7)
    recs["size"] = 8
    recs["kind"] = np.where(rng.random(n) < 0.3, traces.KIND_STORE, traces.KIND_LOAD)
    engines = []
    for threads in (1, 2):
        cfg = sim.load_cpu(preset).to_engine(timing=False, tlb=True, prefetchers=True,
                                             flush=True)
        cfg.threads = threads
        engines.append(B.Engine(cfg))
    for eng in engines:
        eng.run(recs[: n // 2])
    one, two = ([eng.peek_set(2, s) for s in range(0, 2048, 61)] for eng in engines)
    assert one == two and any(way is not None for ways in one for way in ways)
    for eng in engines:
        eng.run(recs[n // 2:])
    assert engines[1].threads >= 2
    assert_same(*(eng.finish() for eng in engines))
    for eng in engines:
        eng.close()
