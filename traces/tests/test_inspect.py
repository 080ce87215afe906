"""summarize() and reuse_distance() against brute-force Python references."""

from __future__ import annotations

import io

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from trace_helpers import HEADER, brute_reuse_distances

from kvsim import traces
from kvsim.traces.inspect import LineSet, access_lines


def _records(seed: int, n: int, addr_space: int = 1 << 24) -> np.ndarray:
    rng = np.random.default_rng(seed)
    r = np.zeros(n, dtype=traces.RECORD_DTYPE)
    r["addr"] = rng.integers(0, addr_space, n, dtype=np.uint64)
    r["size"] = rng.choice([1, 4, 8, 64, 100, 300], n)
    r["kind"] = rng.integers(0, 4, n)
    r["tag"] = rng.integers(0, len(HEADER["tags"]), n)
    r["gap"] = rng.integers(0, 10, n)
    r["flags"] = np.where(r["kind"] == traces.KIND_MARKER, rng.integers(1, 7, n), 0)
    r["size"][r["kind"] == traces.KIND_MARKER] = 0
    r["size"][r["kind"] == traces.KIND_PREFETCH] = 1
    warm = np.flatnonzero((r["kind"] == traces.KIND_MARKER)
                          & np.isin(r["flags"], [traces.MARK_WARMUP_BEGIN, traces.MARK_WARMUP_END]))
    r["flags"][warm] = np.resize([traces.MARK_WARMUP_BEGIN, traces.MARK_WARMUP_END], warm.size)
    return r


def _kvt(records: np.ndarray, chunk: int = 100, codec: str = "zstd") -> io.BytesIO:
    buf = io.BytesIO()
    with traces.Writer(buf, HEADER, codec=codec, chunk_records=chunk) as w:
        w.write(records)
    buf.seek(0)
    return buf


def _brute_lines(records: np.ndarray) -> list[int]:
    out = []
    for a, _g, _d, s, k, *_ in records.tolist():
        if k < traces.KIND_MARKER:
            out += list(range(a // 64, (a + max(s, 1) - 1) // 64 + 1))
    return out


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 600))
def test_summarize_matches_brute_force(seed: int, n: int) -> None:
    rec = _records(seed, n)
    s = traces.summarize(_kvt(rec, chunk=97))
    lines = set(_brute_lines(rec))
    mem = rec[rec["kind"] < 3]
    assert s["records"] == n
    assert s["chunks"] == -(-n // 97)
    assert s["codec"] == ("zstd" if n else "none")
    assert s["header"]["tags"] == HEADER["tags"]
    assert s["by_kind"] == {name: int((rec["kind"] == i).sum())
                            for i, name in enumerate(traces.KIND_NAMES)}
    tags = HEADER["tags"] + ["3"]
    assert s["by_tag"] == {tags[t]: int((mem["tag"] == t).sum())
                           for t in range(4) if (mem["tag"] == t).any()}
    markers = rec[rec["kind"] == 3]["flags"]
    assert s["markers"] == {HEADER["markers"][m]: int((markers == m).sum())
                            for m in range(7) if (markers == m).any()}
    assert s["footprint"] == {"lines": len(lines), "pages_4k": len({x >> 6 for x in lines}),
                              "pages_2m": len({x >> 15 for x in lines}),
                              "bytes": 64 * len(lines)}
    assert s["instructions"] == int(rec["gap"].sum()) + mem.size
    assert s["accessed_bytes"] == int(mem["size"].sum())


def test_line_set_merges_many_chunks() -> None:
    ls, ref = LineSet(), set()
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = rng.integers(0, 5000, 300, dtype=np.uint64)
        ls.add(x)
        ref |= set(x.tolist())
    assert ls.array().tolist() == sorted(ref)


def test_access_lines_order_and_spans() -> None:
    rec = _records(3, 200)
    assert access_lines(rec).tolist() == _brute_lines(rec)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 400))
def test_reuse_distance_matches_lru_stack(seed: int, n: int) -> None:
    rec = _records(seed, n, addr_space=64 * 40)
    ref = brute_reuse_distances(_brute_lines(rec))
    h = traces.reuse_distance(rec)
    assert h["cold"] == ref.count(-1)
    assert h["accesses"] == len(ref) and not h["truncated"]
    counts = [0] * len(h["counts"])
    for d in ref:
        if d >= 0:
            counts[0 if d == 0 else d.bit_length()] += 1
    assert h["counts"] == counts
    assert h["edges"] == [0] + [1 << i for i in range(len(counts) - 1)]
    # same result from a trace stream
    assert traces.reuse_distance(_kvt(rec, chunk=50)) == h


def test_reuse_distance_cap() -> None:
    rec = _records(1, 1000)
    h = traces.reuse_distance(_kvt(rec), max_accesses=100)
    assert h["accesses"] == 100 and h["truncated"]
    assert h == traces.reuse_distance(rec, max_accesses=100)


def test_check_records() -> None:
    L, S, P, M = (traces.KIND_LOAD, traces.KIND_STORE, traces.KIND_PREFETCH,
                  traces.KIND_MARKER)
    r = np.zeros(6, dtype=traces.RECORD_DTYPE)
    r["kind"] = [M, L, L, S, P, M]
    r["size"] = [0, 8, 8, 8, 1, 0]
    r["flags"] = [traces.MARK_WARMUP_BEGIN, 0, 0, 0, 0, traces.MARK_WARMUP_END]
    r["dep"] = [0, 0, 1, 1, 3, 0]
    r["tag"] = [0, 1, 2, 1, 0, 0]
    assert traces.check_records(r, HEADER) == []
    bad = r.copy()
    bad["kind"][0] = 9
    bad["flags"][1] = 1
    bad["size"][4] = 64
    bad["size"][2] = 0
    bad["dep"][4] = 2  # names record 2, a load: fine
    bad["dep"][3] = 2  # names record 1, a load: fine
    bad["dep"][5] = 9  # on a marker
    bad["tag"][3] = 200
    assert traces.check_records(bad, HEADER) == [
        "1 record(s): kind: kind must be 0..3 (first: record 0)",
        "1 record(s): size: a load or store has size 0 (first: record 2)",
        "1 record(s): size: a prefetch must have size 1 (first: record 4)",
        "1 record(s): flags: a load, store or prefetch must have flags 0 (first: record 1)",
        "1 record(s): dep: a marker must have dep 0 (first: record 5)",
        f"1 record(s): tag: tag not named in the header's tags (0..{len(HEADER['tags']) - 1})"
        " (first: record 3)",
        # record 0 is no marker: the END at record 5 comes before any BEGIN
        "1 record(s): flags: warm-up markers must alternate WARMUP_BEGIN, WARMUP_END"
        " (first: record 5)",
    ]
    r2 = r.copy()
    r2["dep"][2] = 2  # names the marker
    r2["dep"][4] = 9  # before the first record
    r2["flags"][5] = traces.MARK_WARMUP_BEGIN
    assert traces.check_records(r2) == [
        "1 record(s): dep: dep points before the trace's first record (first: record 4)",
        "1 record(s): dep: dep names a record that is not a load (first: record 2)",
        "1 record(s): flags: warm-up markers must alternate WARMUP_BEGIN, WARMUP_END"
        " (first: record 5)",
    ]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 300))
def test_footprint_by_tag_matches_sets(seed: int, n: int) -> None:
    rec = _records(seed, n)
    df = traces.footprint_by_tag(rec, HEADER)
    lines = _brute_lines(rec)
    mem = rec[rec["kind"] < traces.KIND_MARKER]
    per_tag: dict[int, set[int]] = {}
    count: dict[int, int] = {}
    for r in mem:
        first, last = int(r["addr"]) // 64, (int(r["addr"]) + max(int(r["size"]), 1) - 1) // 64
        per_tag.setdefault(int(r["tag"]), set()).update(range(first, last + 1))
        count[int(r["tag"])] = count.get(int(r["tag"]), 0) + last - first + 1
    assert sorted(df["tag"]) == sorted(HEADER["tags"][t] for t in per_tag)
    for t, s in per_tag.items():
        row = df[df["tag"] == HEADER["tags"][t]].iloc[0]
        assert row["lines"] == len(s) and row["bytes"] == 64 * len(s)
        assert row["accesses"] == count[t]
        assert row["pages_4k"] == len({x >> 6 for x in s})
        assert row["pages_2m"] == len({x >> 15 for x in s})
    assert df["accesses"].sum() == len(lines)
    if n:  # the same from a trace file, its header naming the tags
        assert traces.footprint_by_tag(_kvt(rec)).equals(df)
