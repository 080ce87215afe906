"""The compiled reuse-distance counter (sim/_engine/reuse.c via traces.reuse) against the
pure-Python reference (traces.inspect._stack_distances) and a brute-force LRU stack."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trace_helpers import HEADER, brute_reuse_distances

from kvsim import traces
from kvsim.traces.inspect import _stack_distances, access_lines
from kvsim.traces.reuse import REUSE_BUCKETS, bucket_label, reuse_counts

pytest.importorskip("kvsim.sim._binding")


def _records(rng: np.random.Generator, n: int, lines: int) -> np.ndarray:
    r = np.zeros(n, dtype=traces.RECORD_DTYPE)
    r["addr"] = rng.integers(0, 64 * lines, n, dtype=np.uint64)
    r["size"] = rng.choice([1, 8, 64, 100], n)
    r["kind"] = rng.integers(0, 4, n)
    r["tag"] = rng.integers(0, len(HEADER["tags"]), n)
    r["flags"] = np.where(r["kind"] == traces.KIND_MARKER, traces.MARK_COMMAND, 0)
    r["size"][r["kind"] == traces.KIND_MARKER] = 0
    r["size"][r["kind"] == traces.KIND_PREFETCH] = 1
    return r


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(st.integers(0, 40), max_size=300), cut=st.integers(0, 300))
def test_distances_match_brute_force_and_reference(lines: list[int], cut: int) -> None:
    a = np.array(lines, dtype=np.uint64)
    got = traces.reuse_distances(a)
    assert got.tolist() == brute_reuse_distances(lines)
    assert got.tolist() == _stack_distances(a).tolist()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 3000), distinct=st.integers(1, 3000),
       pieces=st.integers(1, 7))
def test_chunked_feed_equals_reference_through_compactions(seed: int, n: int, distinct: int,
                                                           pieces: int) -> None:
    """Any split into chunks gives the reference's distances; n > 1024 passes the first
    compaction of the position space, and many distinct lines grow the hash map."""
    from kvsim.sim._binding import Reuse

    rng = np.random.default_rng(seed)
    lines = rng.integers(0, distinct, n).astype(np.uint64) * np.uint64(0x9E3779B9)
    cuts = np.sort(rng.integers(0, n + 1, pieces - 1)) if n else np.zeros(0, np.int64)
    out = np.zeros(n, dtype=np.int64)
    with Reuse() as r:
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, n], strict=True):
            d = np.zeros(hi - lo, dtype=np.int64)
            r.add(lines[lo:hi], dist=d)
            out[lo:hi] = d
        assert r.distinct == np.unique(lines).size
    assert out.tolist() == _stack_distances(lines).tolist()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 600), cap=st.none() | st.integers(0, 900))
def test_compiled_histogram_equals_python_histogram(seed: int, n: int, cap: int | None) -> None:
    rec = _records(np.random.default_rng(seed), n, 50)
    py = traces.reuse_distance(rec, max_accesses=cap, method="python")
    assert traces.reuse_distance(rec, max_accesses=cap) == py
    buf = io.BytesIO()
    with traces.Writer(buf, HEADER, chunk_records=37) as w:
        w.write(rec)
    # from a trace, reading stops at the cap's chunk: ``truncated`` then says whether that
    # chunk went past the cap (both methods alike)
    streams = [io.BytesIO(buf.getvalue()) for _ in range(2)]
    assert traces.reuse_distance(streams[0], max_accesses=cap) == \
        traces.reuse_distance(streams[1], max_accesses=cap, method="python")
    if cap is None:
        assert traces.reuse_distance(io.BytesIO(buf.getvalue())) == \
            traces.reuse_distance(rec)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 500))
def test_per_tag_histogram_splits_the_distances_by_tag(seed: int, n: int) -> None:
    rec = _records(np.random.default_rng(seed), n, 30)
    lines, tags = access_lines(rec, with_tags=True)
    dist = _stack_distances(lines)
    df = traces.reuse_histogram(rec, header=HEADER)
    for t in np.unique(tags):
        d = dist[tags == t]
        rows = df[df["tag"] == HEADER["tags"][t]]
        assert int(rows.loc[rows["bucket"] == -1, "accesses"].sum()) == int((d < 0).sum())
        for _, row in rows[rows["bucket"] >= 0].iterrows():
            inside = (d >= row["lo"]) & (d < row["hi"])
            assert row["accesses"] == int(inside.sum()), row["label"]
        assert rows["share"].sum() == pytest.approx(1.0)
    assert df["accesses"].sum() == lines.size
    hist, cold, got, trunc = reuse_counts(rec, by_tag=False)
    assert hist.shape == (1, REUSE_BUCKETS) and got == lines.size and not trunc
    assert int(hist.sum() + cold.sum()) == lines.size


def test_bucket_labels() -> None:
    assert [bucket_label(b) for b in range(5)] == ["0", "1", "2-3", "4-7", "8-15"]


def test_bad_arrays_are_refused() -> None:
    from kvsim.sim._binding import Reuse

    with Reuse() as r, pytest.raises(ValueError, match="dist must be"):
        r.add(np.arange(4, dtype=np.uint64), dist=np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="method"):
        traces.reuse_distance(np.zeros(0, traces.RECORD_DTYPE), method="fast")
