"""FORMAT.md "Record rules": the reader and the writer refuse every record that breaks one.

A plain per-record oracle (one Python loop, written from the FORMAT.md table) is compared with
the vectorised ``RecordValidator`` on random traces with random damage, split into random
chunks, so a dep that reaches into an earlier chunk is covered too.
"""

from __future__ import annotations

import io
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trace_helpers import HEADER, random_records

from kvsim import traces
from kvsim.traces.validate import RecordError, RecordValidator

L, S, P, M = traces.KIND_LOAD, traces.KIND_STORE, traces.KIND_PREFETCH, traces.KIND_MARKER


def oracle(rec: np.ndarray, header: dict) -> tuple[int, str] | None:
    """The first record breaking a rule, as (trace index, field); None if all keep them."""
    n_tags = len(header["tags"]) if isinstance(header.get("tags"), list) else None
    n_sites = len(header["sites"]) if isinstance(header.get("sites"), list) else None
    n_mk = min(len(header.get("markers", [0] * 7)), traces.NUM_MARKERS)
    warm_next = traces.MARK_WARMUP_BEGIN
    for i, r in enumerate(rec.tolist()):
        addr, _gap, dep, size, kind, tag, site, flags = r
        bad: list[str] = []
        if kind > 3:
            bad.append("kind")
        elif kind == M:
            if size != 0:
                bad.append("size")
            if flags >= n_mk:
                bad.append("flags")
            if dep != 0:
                bad.append("dep")
        else:
            if (kind == P and size != 1) or size == 0:
                bad.append("size")
            if flags != 0:
                bad.append("flags")
            if size and addr + size - 1 > 2**64 - 1:
                bad.append("addr")
        if n_tags is not None and tag >= n_tags:
            bad.append("tag")
        if n_sites is not None and site >= n_sites:
            bad.append("site")
        if kind < M and dep and (dep > i or (dep <= traces.DEP_CHECK_WINDOW
                                             and rec["kind"][i - dep] != L)):
            bad.append("dep")
        if bad:
            return i, bad[0]
        if kind == M and flags in (traces.MARK_WARMUP_BEGIN, traces.MARK_WARMUP_END):
            if flags != warm_next:
                return i, "flags"
            warm_next = (traces.MARK_WARMUP_END if warm_next == traces.MARK_WARMUP_BEGIN
                         else traces.MARK_WARMUP_BEGIN)
    return None


def validate_in_chunks(rec: np.ndarray, bounds: list[int], header: dict) -> tuple[int, str] | None:
    v = RecordValidator(header)
    cuts = [0, *sorted(set(b for b in bounds if 0 < b < rec.size)), rec.size]
    for a, b in zip(cuts, cuts[1:], strict=False):
        try:
            v.check(rec[a:b])
        except RecordError as e:
            return a + e.index, e.field
    return None


FIELDS = ["addr", "dep", "size", "kind", "tag", "site", "flags"]
EDGE = {"addr": [0, 2**64 - 1, 2**64 - 16, 2**64 - 64, 2**63], "dep": [1, 2, 5, 2**32 - 1],
        "size": [0, 1, 2, 64, 65535], "kind": [0, 1, 2, 3, 4, 9, 255],
        "tag": [0, 2, 3, 255], "site": [0, 1, 2, 65535], "flags": [0, 1, 4, 5, 6, 7, 65535]}


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 400), seed=st.integers(0, 2**32 - 1),
       damage=st.lists(st.tuples(st.integers(0, 399), st.sampled_from(FIELDS),
                                 st.integers(0, 6)), max_size=3),
       bounds=st.lists(st.integers(1, 399), max_size=5),
       no_tables=st.booleans())
def test_validator_matches_oracle(n, seed, damage, bounds, no_tables) -> None:
    rec = random_records(n, seed)
    for i, field, e in damage:
        vals = EDGE[field]
        rec[field][i % n] = vals[e % len(vals)]
    header = {k: v for k, v in HEADER.items() if not (no_tables and k in ("tags", "sites"))}
    assert validate_in_chunks(rec, bounds, header) == oracle(rec, header)


def _bad_trace(rec: np.ndarray, chunk: int = 100) -> io.BytesIO:
    buf = io.BytesIO()
    with traces.Writer(buf, HEADER, codec="raw", chunk_records=chunk, validate=False) as w:
        w.write(rec)
    buf.seek(0)
    return buf


def _one(kind: int, size: int, addr: int = 0x1000, dep: int = 0, flags: int = 0,
         tag: int = 0, site: int = 0) -> np.ndarray:
    r = np.zeros(1, dtype=traces.RECORD_DTYPE)
    r[0] = (addr, 0, dep, size, kind, tag, site, flags)
    return r


# One case per issue example: (record appended after 250 valid loads, field named).
CASES = {
    "kind 9": (_one(9, 8), "kind"),
    "load of size 0": (_one(L, 0), "size"),
    "prefetch of size 8": (_one(P, 8), "size"),
    "marker of size 4": (_one(M, 4, flags=traces.MARK_OP), "size"),
    "dep before the trace start": (_one(L, 8, dep=0xFFFFFFFF), "dep"),
    "dep at a store": (_one(L, 8, dep=1), "dep"),
    "tag beyond the table": (_one(L, 8, tag=len(HEADER["tags"])), "tag"),
    "site beyond the table": (_one(L, 8, site=len(HEADER["sites"])), "site"),
    "unknown marker type": (_one(M, 0, flags=7), "flags"),
    "flags on a load": (_one(L, 8, flags=1), "flags"),
    "marker with a dep": (_one(M, 0, dep=1, flags=traces.MARK_OP), "dep"),
    "wrap past 2^64": (_one(L, 64, addr=0xFFFFFFFFFFFFFFF0), "addr"),
    "warm-up end first": (_one(M, 0, flags=traces.MARK_WARMUP_END), "flags"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_reader_names_chunk_record_field(case: str) -> None:
    bad, field = CASES[case]
    good = np.zeros(250, dtype=traces.RECORD_DTYPE)
    good["size"], good["addr"] = 8, np.arange(250) * 64
    good["kind"][-1] = S  # so "dep at a store" has its store one record back
    rec = np.concatenate([good, bad])
    with pytest.raises(traces.TraceError) as ei:
        traces.read_all(_bad_trace(rec))
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith("<stream>: chunk 2 at byte ")
    assert f": record 50 (trace record 250): {field}: " in msg
    with pytest.raises(ValueError, match=f"record 250 would break the format: {field}: "):
        with traces.Writer(io.BytesIO(), HEADER) as w:
            w.write(rec)
    # without the record checks the same bytes read back unchanged: only the rules differ
    got = traces.open(_bad_trace(rec), validate=False).read_all()
    np.testing.assert_array_equal(got, rec)


def test_dep_into_an_earlier_chunk() -> None:
    rec = np.zeros(300, dtype=traces.RECORD_DTYPE)
    rec["size"], rec["kind"] = 8, S
    rec["kind"][10] = L
    rec["dep"][250] = 240  # record 10: a load two chunks back
    np.testing.assert_array_equal(traces.read_all(_bad_trace(rec)), rec)
    rec["dep"][250] = 239  # record 11: a store
    with pytest.raises(traces.TraceError, match=r"chunk 2 .*record 50 \(trace record 250\): "
                                                r"dep: dep 239 names trace record 11"):
        traces.read_all(_bad_trace(rec))


def test_writer_leaves_no_file_on_a_bad_record(tmp_path) -> None:
    p = tmp_path / "bad.kvt"
    with pytest.raises(ValueError, match="record 0 would break the format: kind"):
        with traces.Writer(p, HEADER) as w:
            w.write(_one(9, 8))
    assert list(tmp_path.iterdir()) == []


def window_trace() -> np.ndarray:
    """Record 0 a store, then loads: a dep of exactly DEP_CHECK_WINDOW from record W names
    the store (refused); one of W + 1 from record W + 1 reaches past the window (accepted)."""
    w = traces.DEP_CHECK_WINDOW
    rec = np.zeros(w + 2, dtype=traces.RECORD_DTYPE)
    rec["size"], rec["kind"] = 8, L
    rec["kind"][0] = S
    rec["dep"][w + 1] = w + 1
    return rec


def test_dep_window() -> None:
    w = traces.DEP_CHECK_WINDOW
    rec = window_trace()
    np.testing.assert_array_equal(traces.read_all(_bad_trace(rec, chunk=65536)), rec)
    rec["dep"][w] = w
    with pytest.raises(traces.TraceError, match=rf"\(trace record {w}\): dep: dep {w} names "
                                                r"trace record 0, which is not a load"):
        traces.read_all(_bad_trace(rec, chunk=65536))
    assert oracle(rec, HEADER) == (w, "dep")


def test_validator_memory_does_not_grow() -> None:
    """The validator's memory after 10x more records is the same (a bit per record checked
    would be about 1.2 MiB more here)."""
    chunk = np.zeros(1 << 16, dtype=traces.RECORD_DTYPE)
    chunk["size"], chunk["dep"] = 8, 1
    chunk["dep"][0] = 0
    v = RecordValidator(HEADER)
    tracemalloc.start()
    try:
        for _ in range(16):
            v.check(chunk)
        short = tracemalloc.get_traced_memory()[0]
        for _ in range(144):
            v.check(chunk)
        long = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert v.records_checked == 160 << 16
    assert long - short < 64 << 10, (short, long)
