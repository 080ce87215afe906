"""Trace statistics: :func:`summarize` (backs ``kvsim trace-info``) and :func:`reuse_distance`.

Memory bound of :func:`summarize`: it streams chunk by chunk and keeps only the distinct
64-byte line ids seen so far (a sorted ``uint64`` array, 8 bytes per distinct line) plus a
list of per-chunk sorted distinct line ids that is merged into it whenever the list grows
larger than the sorted array (so merging costs amortized O(n log n)). Line ids are far fewer
than records in any realistic trace; a trace touching 1 GiB holds 16 M lines = 128 MiB.
Pages are derived from the final line set.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .format import (
    CODEC_NAMES,
    KIND_MARKER,
    KIND_NAMES,
    MARKER_NAMES,
    NUM_KINDS,
    RECORD_DTYPE,
    TAG_NAMES,
)
from .reader import PathOrStream, open_trace
from .validate import RecordValidator

__all__ = ["LINE_BYTES", "LineSet", "access_lines", "check_records", "footprint_by_tag",
           "reuse_distance", "sorted_unique", "summarize"]

LINE_BYTES = 64  #: cache line size in bytes used for footprints and reuse distances
_LINE_SHIFT = 6
_PAGE4K_SHIFT = 12 - _LINE_SHIFT  # line id -> 4 KiB page id
_PAGE2M_SHIFT = 21 - _LINE_SHIFT  # line id -> 2 MiB page id


def access_lines(records: np.ndarray, with_tags: bool = False
                 ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Line ids (addr // 64) touched by the memory records (load/store/prefetch), in order.

    An access spanning several lines contributes each line, in address order; a size of 0 on
    a memory record is treated as 1 byte. Markers contribute nothing. Returns uint64; with
    ``with_tags``, ``(lines, tags)`` where ``tags`` (uint8) is each line access's record tag.
    """
    mem = records[records["kind"] < KIND_MARKER]
    addr = mem["addr"].astype(np.uint64)
    size = np.maximum(mem["size"], 1).astype(np.uint64)
    first = addr >> np.uint64(_LINE_SHIFT)
    last = (addr + size - np.uint64(1)) >> np.uint64(_LINE_SHIFT)
    span = (last - first + np.uint64(1)).astype(np.int64)
    if span.size == 0 or int(span.max()) == 1:
        return (first, mem["tag"].astype(np.uint8)) if with_tags else first
    starts = np.repeat(first, span)
    idx = np.arange(starts.size, dtype=np.int64)
    offsets = idx - np.repeat(np.cumsum(span) - span, span)
    lines = starts + offsets.astype(np.uint64)
    return (lines, np.repeat(mem["tag"].astype(np.uint8), span)) if with_tags else lines


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values (sort-based; numpy 2's hash-based np.unique is slower here)."""
    if x.size == 0:
        return x
    a = np.sort(x)
    keep = np.empty(a.size, dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


class LineSet:
    """Growing set of distinct line ids held as sorted uint64 arrays (see module docstring)."""

    def __init__(self) -> None:
        self._sorted = np.empty(0, dtype=np.uint64)
        self._pending: list[np.ndarray] = []
        self._pending_n = 0

    def add(self, lines: np.ndarray) -> None:
        """Add line ids (any order, duplicates allowed)."""
        if lines.size == 0:
            return
        u = sorted_unique(lines)
        self._pending.append(u)
        self._pending_n += u.size
        if self._pending_n > max(self._sorted.size, 1 << 20):
            self._merge()

    def _merge(self) -> None:
        if self._pending:
            self._sorted = sorted_unique(np.concatenate([self._sorted, *self._pending]))
            self._pending, self._pending_n = [], 0

    def array(self) -> np.ndarray:
        """The distinct line ids, sorted."""
        self._merge()
        return self._sorted


def _names(header: dict[str, Any], key: str, default: list[str], n: int) -> list[str]:
    names = header.get(key)
    if not isinstance(names, list):
        names = default
    return [str(names[i]) if i < len(names) else str(i) for i in range(n)]


def summarize(path_or_stream: PathOrStream) -> dict[str, Any]:
    """Statistics of a whole trace, validating it fully (raises TraceError).

    Returns a dict: ``records`` (count), ``header`` (dict), ``chunks`` (count), ``codec``
    ("raw", "zstd", "mixed" or "none" for an empty trace), ``codecs`` {name: chunks},
    ``by_kind`` {kind name: records}, ``by_tag`` {tag name from header["tags"]: memory
    records}, ``markers`` {marker name from header["markers"]: count}, ``footprint`` {``lines``:
    distinct 64 B lines touched by loads/stores/prefetches (a line-crossing access counts each
    line), ``pages_4k``, ``pages_2m``: distinct pages, ``bytes``: 64 * lines}, ``accessed_bytes``
    (sum of sizes of memory records), ``instructions`` (sum of all gaps + memory records).
    Only tags and markers that occur are listed.
    """
    kinds = np.zeros(256, dtype=np.int64)
    tags = np.zeros(256, dtype=np.int64)
    markers = np.zeros(1 << 16, dtype=np.int64)
    lines = LineSet()
    n_records = gaps = accessed = mem_records = 0
    with open_trace(path_or_stream) as tr:
        header = tr.header
        for records in tr:
            n_records += records.size
            gaps += int(records["gap"].sum(dtype=np.uint64))
            k = records["kind"]
            kinds += np.bincount(k, minlength=256)
            is_mem = k < KIND_MARKER
            mem = records[is_mem]
            mem_records += mem.size
            accessed += int(mem["size"].sum(dtype=np.uint64))
            tags += np.bincount(mem["tag"], minlength=256)
            markers += np.bincount(records["flags"][~is_mem], minlength=1 << 16)
            lines.add(access_lines(mem))
        codecs = {CODEC_NAMES.get(c, str(c)): n for c, n in _codec_counts(tr).items()}
        n_chunks = len(tr.chunks)
    kind_names = KIND_NAMES + [f"kind{i}" for i in range(len(KIND_NAMES), 256)]
    tag_names = _names(header, "tags", TAG_NAMES, 256)
    marker_names = _names(header, "markers", MARKER_NAMES, 1 << 16)
    line_ids = lines.array()
    return {
        "records": n_records,
        "header": header,
        "chunks": n_chunks,
        "codec": "none" if not codecs else next(iter(codecs)) if len(codecs) == 1 else "mixed",
        "codecs": codecs,
        "by_kind": {kind_names[i]: int(kinds[i]) for i in range(256)
                    if i < NUM_KINDS or kinds[i]},
        "by_tag": {tag_names[i]: int(tags[i]) for i in np.flatnonzero(tags)},
        "markers": {marker_names[i]: int(markers[i]) for i in np.flatnonzero(markers)},
        "footprint": {
            "lines": int(line_ids.size),
            "pages_4k": _count_sorted_distinct(line_ids >> np.uint64(_PAGE4K_SHIFT)),
            "pages_2m": _count_sorted_distinct(line_ids >> np.uint64(_PAGE2M_SHIFT)),
            "bytes": int(line_ids.size) * LINE_BYTES,
        },
        "accessed_bytes": accessed,
        "instructions": gaps + mem_records,
    }


def footprint_by_tag(source: PathOrStream | np.ndarray, header: dict[str, Any] | None = None):
    """Footprint per structure tag as a pandas DataFrame, one row per tag that occurs:
    ``tag`` (name from the trace header's ``tags``, or ``header`` for an array),
    ``accesses`` (line accesses), ``lines`` (distinct 64 B lines), ``pages_4k``,
    ``pages_2m`` (distinct pages touched) and ``bytes`` (64 * lines). A line shared by two
    tags counts for each. The whole trace is read into memory.
    """
    import pandas as pd

    if isinstance(source, np.ndarray):
        records = source.astype(RECORD_DTYPE, copy=False)
    else:
        with open_trace(source) as tr:
            records, header = tr.read_all(), header or tr.header
    lines, tags = access_lines(records, with_tags=True)
    names = _names(header or {}, "tags", TAG_NAMES, 256)
    rows = []
    for t in np.flatnonzero(np.bincount(tags, minlength=256)):
        u = sorted_unique(lines[tags == t])
        rows.append({"tag": names[t], "accesses": int((tags == t).sum()), "lines": int(u.size),
                     "pages_4k": _count_sorted_distinct(u >> np.uint64(_PAGE4K_SHIFT)),
                     "pages_2m": _count_sorted_distinct(u >> np.uint64(_PAGE2M_SHIFT)),
                     "bytes": int(u.size) * LINE_BYTES})
    return pd.DataFrame(rows, columns=["tag", "accesses", "lines", "pages_4k", "pages_2m",
                                       "bytes"])


def _count_sorted_distinct(a: np.ndarray) -> int:
    """Distinct values of an already sorted array."""
    return int(a.size and 1 + np.count_nonzero(a[1:] != a[:-1]))


def _codec_counts(tr: Any) -> dict[int, int]:
    out: dict[int, int] = {}
    for c in tr.chunks:
        out[c.codec] = out.get(c.codec, 0) + 1
    return out


def reuse_distance(source: PathOrStream | np.ndarray, max_accesses: int | None = 1 << 20,
                   method: str = "compiled") -> dict[str, Any]:
    """LRU stack-distance histogram over 64 B lines, bucketed by powers of two.

    ``source`` is a trace (path/stream) or a RECORD_DTYPE array. Memory records are expanded
    to line accesses (:func:`access_lines`); only the first ``max_accesses`` line accesses are
    analysed (None: all; ``truncated`` says whether the cap was hit; for a trace, reading
    stops once the cap is reached, so later corruption is not detected by this function).
    ``method``: ``"compiled"`` (the engine library's O(n log d) streaming counter,
    :func:`kvsim.traces.reuse.reuse_histogram`; memory O(distinct lines)) or ``"python"``
    (the pure-Python reference, O(n) memory; same result).

    The distance of an access is the number of *distinct other* lines touched since the
    previous access to the same line (0 = immediate re-use). Returns ``{"edges": [0, 1, 2, 4,
    ...], "counts": [...], "cold": first-touch accesses, "accesses": analysed line accesses,
    "truncated": bool}``, where ``counts[i]`` counts distances d with ``edges[i] <= d <
    edges[i+1]`` (the last bucket is open-ended).
    """
    if method == "compiled":
        from .reuse import reuse_counts

        counts, cold, accesses, truncated = reuse_counts(source, max_accesses, by_tag=False)
        return _histogram_dict(counts[0], int(cold[0]), accesses, truncated)
    if method != "python":
        raise ValueError(f"method must be 'compiled' or 'python', got {method!r}")
    cap = max_accesses if max_accesses is not None else np.iinfo(np.int64).max
    if isinstance(source, np.ndarray):
        lines = access_lines(source.astype(RECORD_DTYPE, copy=False))
        truncated = lines.size > cap
        lines = lines[:cap]
    else:
        parts, got, truncated = [], 0, False
        with open_trace(source) as tr:
            for records in tr:
                ls = access_lines(records)
                parts.append(ls)
                got += ls.size
                if got >= cap:
                    truncated = got > cap
                    break
        lines = np.concatenate(parts)[:cap] if parts else np.empty(0, np.uint64)
    dist = _stack_distances(lines)
    cold = int((dist < 0).sum())
    d = dist[dist >= 0]
    # bucket 0 holds d == 0; bucket b >= 1 holds 2**(b-1) <= d < 2**b
    buckets = np.zeros(d.size, dtype=np.int64)
    nz = d > 0
    buckets[nz] = np.floor(np.log2(d[nz])).astype(np.int64) + 1
    return _histogram_dict(np.bincount(buckets, minlength=1), cold, int(lines.size),
                           bool(truncated))


def _histogram_dict(counts: np.ndarray, cold: int, accesses: int, truncated: bool
                    ) -> dict[str, Any]:
    """reuse_distance's result from per-bucket counts (trailing empty buckets dropped; at
    least one bucket)."""
    nz = np.flatnonzero(counts)
    nb = int(nz[-1]) + 1 if nz.size else 1
    counts = counts[:nb]
    edges = [0] + [1 << i for i in range(nb - 1)]
    return {"edges": edges, "counts": [int(c) for c in counts], "cold": cold,
            "accesses": accesses, "truncated": bool(truncated)}


def _stack_distances(lines: np.ndarray) -> np.ndarray:
    """Stack distance per access (-1 for a first touch), via a Fenwick tree over time.

    Position t holds 1 while t is the most recent access to its line; the distance of an
    access at t whose line was last accessed at p is the number of ones in (p, t).
    """
    n = lines.size
    out = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return out
    # previous access index of each access (vectorized), then a Fenwick sweep in Python
    last_seen = np.full(n, -1, dtype=np.int64)
    order = np.argsort(lines, kind="stable")
    same = lines[order][1:] == lines[order][:-1]
    last_seen[order[1:][same]] = order[:-1][same]
    tree = [0] * (n + 1)
    lp = last_seen.tolist()
    res = out.tolist()
    active = 0  # number of ones overall (= distinct lines seen so far)
    for t in range(n):
        p = lp[t]
        if p >= 0:
            # ones in (p, t) = active - prefix(p + 1)  (prefix over positions 0..p)
            s, i = 0, p + 1
            while i > 0:
                s += tree[i]
                i -= i & -i
            res[t] = active - s
            i = p + 1
            while i <= n:
                tree[i] -= 1
                i += i & -i
            active -= 1
        i = t + 1
        while i <= n:
            tree[i] += 1
            i += i & -i
        active += 1
    return np.asarray(res, dtype=np.int64)


def check_records(records: np.ndarray, header: dict[str, Any] | None = None) -> list[str]:
    """Check a record array against FORMAT.md "Record rules"; returns problems (empty =
    valid).

    The rules are those the reader and ``traces.Writer`` enforce (one definition:
    :meth:`traces.validate.RecordValidator.violations`), with ``records`` taken as a whole
    trace (a ``dep`` may only name a load in the array) and ``header``'s ``tags``/``sites``/
    ``markers`` lists bounding those fields. Unlike the reader, which stops at the first bad
    record, every rule broken is reported, each as one line:
    ``"<n> record(s): <field>: <problem> (first: record <i>)"``.
    """
    r = np.asarray(records)
    problems: list[str] = []
    if r.size == 0:
        return problems
    for mask, field, problem in RecordValidator(header).violations(r):
        idx = np.flatnonzero(mask)
        if idx.size:
            problems.append(f"{idx.size} record(s): {field}: {problem} (first: record {idx[0]})")
    return problems
