"""Reuse (LRU stack) distances in compiled code, per structure tag, for traces of any length.

The counting runs in the engine library's ``reuse.c`` (O(n log d) time for n line accesses to
d distinct lines, O(d) memory, chunk by chunk, so a trace of 10^8 records streams through it);
:func:`kvsim.traces.inspect.reuse_distance` with ``method="python"`` is the pure-Python
reference it is tested against. Definitions as in :func:`reuse_distance`: the distance of an
access is the number of distinct other 64 B lines touched since the previous access to the
same line; bucket 0 holds distance 0 and bucket b >= 1 holds 2^(b-1) <= d < 2^b.

    df = traces.reuse_histogram("run.kvt")          # tag, bucket, lo, hi, label, accesses
    df.pivot(index="label", columns="tag", values="accesses")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from . import _native
from .format import RECORD_DTYPE, TAG_NAMES
from .inspect import access_lines
from .reader import PathOrStream, TraceReader, open_trace

__all__ = ["REUSE_BUCKETS", "bucket_label", "reuse_counts", "reuse_distances",
           "reuse_histogram"]

#: histogram buckets: distance 0, then [2^(b-1), 2^b) for b = 1..64 (reuse.c's)
REUSE_BUCKETS = _native.REUSE_BUCKETS


def _reuse():
    # The counter is compiled code (sim/_engine/reuse.c, bound in traces/_native.py), loaded
    # at its first use so that reading traces never loads it.
    return _native.Reuse()


def _chunks(source: Any):
    """(what to close or None, iterator of record arrays) of a trace path/stream, an open
    reader (left open), a record array, or any other iterable of record arrays."""
    if isinstance(source, np.ndarray):
        return None, iter([source.astype(RECORD_DTYPE, copy=False)])
    if isinstance(source, TraceReader):
        return None, source
    if hasattr(source, "__iter__") and not hasattr(source, "read") \
            and not isinstance(source, str | bytes | Path):
        return None, (np.asarray(c).astype(RECORD_DTYPE, copy=False) for c in source)
    tr = open_trace(source)
    return tr, tr


def reuse_counts(source: PathOrStream | TraceReader | np.ndarray, max_accesses: int | None = None,
                 by_tag: bool = True) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """Reuse-distance bucket counts of ``source`` (a trace path/stream, an open reader, a
    RECORD_DTYPE array or an iterable of them, in order), computed in compiled code.

    Returns ``(hist, cold, accesses, truncated)``: ``hist[tag, b]`` the line accesses of
    structure ``tag`` in bucket b (256 x REUSE_BUCKETS; one row, index 0, when not
    ``by_tag``), ``cold[tag]`` first touches, ``accesses`` analysed line accesses,
    ``truncated`` whether ``max_accesses`` (None: no cap) cut the analysis short (a trace is
    then not read to its end).
    """
    rows = 256 if by_tag else 1
    hist = np.zeros(rows * REUSE_BUCKETS, dtype=np.uint64)
    cold = np.zeros(rows, dtype=np.uint64)
    got, truncated = 0, False
    owner, chunks = _chunks(source)
    try:
        with _reuse() as r:
            for records in chunks:
                lines, tags = access_lines(records, with_tags=True)
                if max_accesses is not None and got + lines.size > max_accesses:
                    keep = max_accesses - got
                    lines, tags, truncated = lines[:keep], tags[:keep], True
                r.add(lines, np.ascontiguousarray(tags) if by_tag else None, hist=hist,
                      cold=cold)
                got += lines.size
                if max_accesses is not None and got >= max_accesses:
                    break
    finally:
        if owner is not None:
            owner.close()
    return hist.reshape(rows, REUSE_BUCKETS).astype(np.int64), cold.astype(np.int64), got, \
        truncated


def reuse_distances(lines: np.ndarray) -> np.ndarray:
    """The distance of each access of ``lines`` (line ids in access order), -1 for a first
    touch; int64, one per access, computed in compiled code (memory: 8 bytes per access on
    top of the input, so prefer :func:`reuse_histogram` for long traces)."""
    lines = np.ascontiguousarray(lines, dtype=np.uint64)
    out = np.zeros(lines.size, dtype=np.int64)
    with _reuse() as r:
        r.add(lines, dist=out)
    return out


def bucket_label(b: int) -> str:
    """A bucket's distances as text: ``"0"``, ``"1"``, ``"2-3"``, ``"4-7"``, ..."""
    if b <= 1:
        return str(b)
    return f"{1 << (b - 1)}-{(1 << b) - 1}"


def reuse_histogram(source: PathOrStream | np.ndarray, max_accesses: int | None = None,
                    header: dict[str, Any] | None = None):
    """Reuse-distance histogram per structure tag as a tidy pandas DataFrame.

    One row per tag that occurs and bucket from ``cold`` (first touches) through the tag's
    largest non-empty bucket: ``tag`` (name from the trace header's ``tags``, or ``header``
    for an array, else the format's TAG_NAMES), ``bucket`` (-1 = cold, else b), ``lo`` and
    ``hi`` (distances lo <= d < hi in lines; -1 for cold), ``label`` (``"cold"``, ``"0"``,
    ``"1"``, ``"2-3"``, ...), ``accesses`` (line accesses) and ``share`` (of the tag's
    accesses). ``max_accesses`` as in :func:`reuse_counts`.
    """
    import pandas as pd

    if isinstance(source, np.ndarray | TraceReader):
        if isinstance(source, TraceReader):
            header = header or source.header
        hist, cold, _, _ = reuse_counts(source, max_accesses, by_tag=True)
    else:
        with open_trace(source) as tr:
            header = header or tr.header
            hist, cold, _, _ = reuse_counts(tr, max_accesses, by_tag=True)
    names = list((header or {}).get("tags") or TAG_NAMES)
    rows = []
    for t in np.flatnonzero(hist.sum(axis=1) + cold):
        name = str(names[t]) if t < len(names) else f"tag{t}"
        total = int(hist[t].sum() + cold[t])
        nb = int(np.flatnonzero(hist[t])[-1]) + 1 if hist[t].any() else 0
        rows.append((name, -1, -1, -1, "cold", int(cold[t]), cold[t] / total))
        for b in range(nb):
            lo, hi = (0, 1) if b == 0 else (1 << (b - 1), 1 << b)
            rows.append((name, b, lo, hi, bucket_label(b), int(hist[t, b]),
                         hist[t, b] / total))
    return pd.DataFrame(rows, columns=["tag", "bucket", "lo", "hi", "label", "accesses",
                                       "share"])
