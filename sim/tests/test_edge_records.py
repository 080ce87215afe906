"""Engine == reference on the edges of what the trace format allows: addresses at 0, at line
and page boundaries and up to the last byte below 2^64, sizes from 1 to 65535 bytes, deps on
earlier loads (also past the engine's dependency window), every marker type, any tag, site and
gap. An access that would wrap past 2^64 is outside the format (FORMAT.md "Record
rules"): the reader and the writer refuse it, so the engines never see one from a trace."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_differential import cpu_docs, lru_docs, run_both

from kvsim import traces
from kvsim.traces.validate import RecordValidator

TOP = 2**64
SIZES = [1, 2, 7, 8, 15, 16, 31, 32, 63, 64, 65, 127, 128, 129, 4095, 4096, 4097, 65535]
KINDS = [traces.KIND_LOAD, traces.KIND_LOAD, traces.KIND_STORE, traces.KIND_PREFETCH,
         traces.KIND_MARKER]


ALL_MARKERS = list(range(traces.NUM_MARKERS))  # every marker type the format defines
WARMUP = (traces.MARK_WARMUP_BEGIN, traces.MARK_WARMUP_END)
#: a prefix of loads longer than the engine's dependency window (KVSIM_DEP_WINDOW), so a
#: dep may reach past it
FAR = 1030


@st.composite
def edge_records(draw):
    """Up to 24 records that keep every record rule, at edge addresses and sizes, with every
    marker type (warm-up markers alternating, phase numbers up to 2^64 - 1), any tag, site
    and gap, and (sometimes) after FAR loads, so that a dep may reach past the engine's
    dependency window."""
    n = draw(st.integers(1, 24))
    far = FAR if draw(st.integers(0, 7)) == 0 else 0
    recs = np.zeros(far + n, dtype=traces.RECORD_DTYPE)
    recs["kind"][:far] = traces.KIND_LOAD
    recs["size"][:far] = 8
    recs["addr"][:far] = np.arange(far) * 64
    warm_next = traces.MARK_WARMUP_BEGIN
    for i in range(far, far + n):
        kind = draw(st.sampled_from(KINDS))
        recs[i]["kind"] = kind
        recs[i]["gap"] = draw(st.sampled_from([0, 1, 3, 1000, 2**32 - 1]))
        recs[i]["tag"] = draw(st.integers(0, 255))
        recs[i]["site"] = draw(st.sampled_from([0, 1, 2**16 - 1]))
        if kind == traces.KIND_MARKER:
            m = draw(st.sampled_from(ALL_MARKERS))
            if m in WARMUP:
                m, warm_next = warm_next, WARMUP[warm_next == traces.MARK_WARMUP_BEGIN]
            recs[i]["flags"] = m
            recs[i]["addr"] = draw(st.sampled_from([0, 1, 2, 63, 64, 2**32, TOP - 1]))
            continue
        size = 1 if kind == traces.KIND_PREFETCH else draw(st.sampled_from(SIZES))
        anchor = draw(st.sampled_from([0, 1 << 12, 1 << 21, 1 << 32, 1 << 63, TOP - size]))
        off = draw(st.integers(-130, 130))
        addr = min(max(anchor + off, 0), TOP - size)  # the last byte is at most 2^64 - 1
        recs[i]["addr"] = addr
        recs[i]["size"] = size
        loads = [j for j in range(i) if recs[j]["kind"] == traces.KIND_LOAD]
        if loads and draw(st.booleans()):
            recs[i]["dep"] = i - draw(st.sampled_from(loads[:3] + loads[-20:]))
    RecordValidator().check(recs)  # the strategy only draws records the format allows
    return recs


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=cpu_docs(), recs=edge_records(), flush=st.booleans(), chunk=st.integers(1, 1100))
def test_edge_records_engine_equals_reference(doc, recs, flush, chunk):
    run_both(doc, recs, flush, chunk)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=lru_docs(), recs=edge_records(), flush=st.booleans(), chunk=st.integers(1, 24),
       threads=st.sampled_from([1, 2]))
def test_edge_records_hot_path_equals_reference(doc, recs, flush, chunk, threads):
    run_both(doc, recs, flush, chunk, 0, threads)


@pytest.mark.parametrize("addr,size", [(0xFFFFFFFFFFFFFFF0, 64), (TOP - 1, 2), (TOP - 64, 65)])
def test_wrapping_access_is_outside_the_format(addr, size):
    rec = np.zeros(1, dtype=traces.RECORD_DTYPE)
    rec[0]["addr"], rec[0]["size"] = addr, size
    with pytest.raises(ValueError, match="record 0 would break the format: addr: "):
        with traces.Writer(io.BytesIO(), {}) as w:
            w.write(rec)
    buf = io.BytesIO()
    with traces.Writer(buf, {}, validate=False) as w:
        w.write(rec)
    buf.seek(0)
    with pytest.raises(traces.TraceError, match="record 0 .*: addr: .*wraps past"):
        traces.read_all(buf)
    rec[0]["size"] = TOP - addr  # ending exactly at 2^64 - 1 is allowed
    RecordValidator().check(rec)
