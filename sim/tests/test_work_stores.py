"""The work's stores and whole-line stores (sim/MODEL.md §2, §6): with ``[core]
full_line_store_fetch`` a store covering its whole line fetches it; with a store buffer and a
trace header's ``work_stores`` the gap's untraced stores take store-buffer entries, commit in
order behind the traced stores and stop dispatch while the buffer is full."""

from __future__ import annotations

import io
import tomllib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_helpers import records, tiny_cpu_text
from test_differential import QCAPS, THREADS, assert_same, cpu_docs, lru_docs, traces_

from kvsim import sim, traces
from kvsim.sim import _binding as B
from kvsim.sim.config import ConfigError, work_store_q16
from kvsim.sim.reference import ReferenceSim
from kvsim.traces import format as fmt

DRAM_NS, FREQ = 100.0, 2.0
KIND = {name: i for i, name in enumerate(fmt.WORK_NAMES)}


def _cpu(store_buffer: int | None, fetch: bool | None = None) -> sim.CpuConfig:
    core = "width = 4\nrob = 256\n"
    if store_buffer is not None:
        core += f"store_buffer = {store_buffer}\n"
    if fetch is not None:
        core += f"full_line_store_fetch = {'true' if fetch else 'false'}\n"
    return sim.parse_cpu(tomllib.loads(tiny_cpu_text(core, freq_ghz=FREQ, dram_ns=DRAM_NS)))


def _file(recs: np.ndarray, work_stores: dict | None) -> io.BytesIO:
    header = {"format_version": traces.VERSION, "sites": ["none"], "site_kinds": [0],
              "work_kinds": fmt.WORK_NAMES}
    if work_stores is not None:
        header["work_stores"] = work_stores
    buf = io.BytesIO()
    with traces.Writer(buf, header) as w:
        w.write(recs)
    buf.seek(0)
    return buf


def _run(recs, cpu, work_stores, engine):
    with traces.open(_file(recs, work_stores)) as r:
        return sim.simulate(r, cpu, engine=engine, timeline=(0, len(recs)))


def _miss_then_work(n: int, gap: int) -> np.ndarray:
    """One store that misses to DRAM, then n loads of one line that hit in L1 (its miss is
    in the warm-up, which lasts long enough for it to arrive), each after `gap` generic
    instructions."""
    rows = [("marker", 0, 0, 0, 0, 0, 0, fmt.MARK_WARMUP_BEGIN), ("load", 64, 8),
            ("marker", 0, 0, 4000, 0, 0, 0, fmt.MARK_WARMUP_END), ("store", 0x100000, 8)]
    rows += [("load", 64, 8, gap)] * n
    return records(rows)


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_the_works_stores_fill_the_buffer_behind_a_store_miss(engine):
    # 1 store per 4 generic instructions, 20 of them per record: 5 work stores a record; 8
    # entries: the store's 7 free entries are gone at the second record, whose dispatch waits
    # for the store's line (its read-for-ownership from DRAM)
    recs = _miss_then_work(50, 20)
    held = _run(recs, _cpu(8), {"generic": 0.25}, engine)
    free = _run(recs, _cpu(8), None, engine)
    tl = {row["record"]: row for row in held["timeline"]}  # by record (markers included)
    assert tl[5]["dispatch"] >= tl[3]["issue"] + DRAM_NS * FREQ
    assert held["timing"]["stall_cycles"]["store_buffer_full"] > 0
    assert held["timing"]["store_buffer"]["work_stores"] == 50 * 5
    assert free["timing"]["stall_cycles"]["store_buffer_full"] == 0
    assert free["timing"]["store_buffer"]["work_stores"] == 0
    assert held["cycles"] > free["cycles"]
    # a buffer that holds a record's work stores and the miss's wait does not stall
    big = _run(recs, _cpu(1024), {"generic": 0.25}, engine)
    assert big["timing"]["stall_cycles"]["store_buffer_full"] == 0
    assert big["cycles"] == free["cycles"]


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_the_fraction_carries_from_record_to_record(engine):
    # 0.1 stores per instruction (6554 / 65536), 9 gap instructions a record: 0.9 a record,
    # none whole, yet 45 in 50 records
    res = _run(_miss_then_work(50, 9), _cpu(8), {"generic": 0.1}, engine)
    assert res["timing"]["store_buffer"]["work_stores"] == 50 * 9 * 6554 // 65536 == 45


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_without_a_store_buffer_the_works_stores_change_nothing(engine):
    recs = _miss_then_work(50, 20)
    a = _run(recs, _cpu(None), {"generic": 0.25}, engine)
    b = _run(recs, _cpu(None), None, engine)
    assert a["cycles"] == b["cycles"] and a["timeline"] == b["timeline"]


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_a_whole_line_store_is_fetched_when_the_file_says_so(engine):
    recs = records([("store", 0x100000 + 64 * k, 64) for k in range(10)])
    kept = sim.simulate(recs, _cpu(None), engine=engine, functional=True, validate=False)
    fetched = sim.simulate(recs, _cpu(None, fetch=True), engine=engine, functional=True,
                           validate=False)
    assert kept["dram"]["reads"] == 0 and fetched["dram"]["reads"] == 10
    # a partial store is fetched either way
    part = records([("store", 0x100000 + 64 * k, 8) for k in range(10)])
    assert sim.simulate(part, _cpu(None), engine=engine, functional=True,
                        validate=False)["dram"]["reads"] == 10


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_a_fetched_whole_line_store_holds_the_buffer(engine):
    # with a store buffer a fetched whole-line store commits once its line arrives
    recs = records([("store", 0x100000 + 4096 * k, 64, 2) for k in range(12)])
    kept = sim.simulate(recs, _cpu(4), engine=engine, validate=False)
    fetched = sim.simulate(recs, _cpu(4, fetch=True), engine=engine, validate=False)
    stall = [r["timing"]["stall_cycles"]["store_buffer_full"] for r in (kept, fetched)]
    assert stall[1] >= stall[0] + DRAM_NS * FREQ
    assert fetched["cycles"] >= kept["cycles"] + DRAM_NS * FREQ


@pytest.mark.parametrize(("ws", "msg"), [
    ([0.1], "work_stores must be an object"),
    ({"generic": 2}, "work_stores.generic: a number from 0 to 1"),
    ({"hash": "many"}, "work_stores.hash: a number"),
    ({"hash": True}, "work_stores.hash: a number"),
])
def test_bad_work_stores_are_refused_in_one_line(ws, msg):
    with pytest.raises(ConfigError, match=msg):
        work_store_q16({"work_kinds": fmt.WORK_NAMES, "work_stores": ws})


def test_work_stores_follow_the_headers_kinds():
    h = {"work_kinds": ["generic", "copy"], "work_stores": {"copy": 0.5, "hash": 1}}
    assert work_store_q16(h) == [0, 32768]
    assert work_store_q16({"work_kinds": ["generic"]}) == []


def test_the_bad_flag_is_refused():
    with pytest.raises(ConfigError, match="full_line_store_fetch"):
        sim.parse_cpu(tomllib.loads(tiny_cpu_text("width = 4\nrob = 8\n"
                                                  "full_line_store_fetch = 1\n")))


@st.composite
def work_traces(draw):
    """traces_() with WORK markers (any kind, up to 12 instructions) put in before records."""
    recs = draw(traces_())
    n = len(recs)
    marks = sorted(draw(st.lists(st.integers(0, n), max_size=12)), reverse=True)
    for at in marks:
        m = np.zeros(1, dtype=traces.RECORD_DTYPE)
        m["kind"], m["flags"] = traces.KIND_MARKER, fmt.MARK_WORK
        m["addr"] = (draw(st.integers(0, 7)) << fmt.WORK_COUNT_BITS) | draw(st.integers(0, 12))
        recs = np.concatenate([recs[:at], m, recs[at:]])
    return recs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=st.one_of(cpu_docs(), lru_docs()), recs=work_traces(), flush=st.booleans(),
       chunk=st.integers(1, 300), qcap=QCAPS, threads=THREADS, fetch=st.booleans(),
       per_kind=st.booleans(),
       q16=st.lists(st.sampled_from([0, 0, 1, 6554, 16384, 40000, 65536]),
                    min_size=B.MAX_WORK_KINDS, max_size=B.MAX_WORK_KINDS),
       kinds=st.lists(st.integers(0, B.MAX_WORK_KINDS), min_size=4, max_size=4),
       sbuf=st.sampled_from([0, 1, 2, 3, 8]))
def test_engine_equals_reference_with_work_stores(doc, recs, flush, chunk, qcap, threads,
                                                  fetch, per_kind, q16, kinds, sbuf):
    """Engine == reference with the work's stores (any figures, kinds of sites, WORK markers,
    with or without rates by kind) and whole-line stores fetched or not, in timing mode and
    in functional mode (where only the fetch matters), on any configuration and the
    engine's specialised one (lru_docs: its level-by-level queues and threads)."""
    timing = "core" in doc
    if timing:
        doc["core"].pop("store_buffer", None)
        if sbuf:
            doc["core"]["store_buffer"] = sbuf
    cpu = sim.parse_cpu(doc)
    cfg = cpu.to_engine(timing=timing, flush=flush)
    cfg.full_line_store_fetch = int(fetch)
    cfg.queue_cap, cfg.threads = qcap, threads
    for k in range(B.MAX_WORK_KINDS):
        cfg.kind_store_q16[k] = q16[k]
        if per_kind:
            cfg.kind_ticks[k] = 1 + k % 3
    cfg.per_kind = int(per_kind)
    for i, k in enumerate(kinds):  # kind MAX_WORK_KINDS: past the table (generic)
        cfg.site_kind[i] = k
    eng = B.Engine(cfg)
    ref = ReferenceSim(cfg)
    for i in range(0, len(recs), chunk):
        eng.run(recs[i:i + chunk])
    ref.run(recs)
    a, b = eng.finish(), ref.finish()
    eng.close()
    assert_same(a, b)
