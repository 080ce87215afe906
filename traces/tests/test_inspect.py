"""summarize() and reuse_distance() against brute-force Python references."""

from __future__ import annotations

import io

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import traces
from traces.inspect import LineSet, access_lines
from traces.tests.helpers import HEADER


def _records(seed: int, n: int, addr_space: int = 1 << 24) -> np.ndarray:
    rng = np.random.default_rng(seed)
    r = np.zeros(n, dtype=traces.RECORD_DTYPE)
    r["addr"] = rng.integers(0, addr_space, n, dtype=np.uint64)
    r["size"] = rng.choice([1, 4, 8, 64, 100, 300], n)
    r["kind"] = rng.integers(0, 4, n)
    r["tag"] = rng.integers(0, 4, n)
    r["gap"] = rng.integers(0, 10, n)
    r["flags"] = np.where(r["kind"] == traces.KIND_MARKER, rng.integers(1, 7, n), 0)
    r["size"][r["kind"] == traces.KIND_MARKER] = 0
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


def _brute_reuse(lines: list[int]) -> list[int]:
    stack: list[int] = []
    out = []
    for x in lines:
        if x in stack:
            d = len(stack) - 1 - stack.index(x)
            stack.remove(x)
            out.append(d)
        else:
            out.append(-1)
        stack.append(x)
    return out


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 400))
def test_reuse_distance_matches_lru_stack(seed: int, n: int) -> None:
    rec = _records(seed, n, addr_space=64 * 40)
    ref = _brute_reuse(_brute_lines(rec))
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
