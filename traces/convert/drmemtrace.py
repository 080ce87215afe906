"""DynamoRIO drmemtrace offline traces (``.trace.zip``, ``.trace.gz``): read into kvsim records.

``drrun -t drcachesim -offline`` (or ``-t drmemtrace``) leaves, after ``raw2trace``, one
file per traced thread in ``drmemtrace.<app>.<pid>.<n>.dir/trace/``: a zip archive whose
members ``chunk.0000``, ``chunk.0001``, ... hold the thread's entries in order, or a gzip
stream of them. Each entry is DynamoRIO's ``trace_entry_t`` (DynamoRIO
``clients/drcachesim/common/trace_entry.h``), packed, 12 bytes on 64-bit hosts,
little-endian: ``type`` u16 (``trace_type_t``), ``size`` u16, ``addr`` u64. The values used
here (positions in ``trace_type_t``):

================================  ==========================================================
type                              kvsim
================================  ==========================================================
0 READ                            load (``size`` bytes at ``addr``)
1 WRITE                           store
2-8, 32-34, 41-46 data prefetch   software prefetch (size 1, a kvt prefetch's size)
10-17, 29-31, 48, 49 instruction  not a record: counted into ``gap`` (``INSTR_BUNDLE`` (17)
                                  counts ``size`` instructions)
9, 35-40 instruction prefetch     dropped, counted
27 HARDWARE_PREFETCH              dropped (a simulator's own prefetch), counted
18-21 flushes                     dropped, counted
22 THREAD, 24 PID, 25 HEADER,     not records; THREAD sets the thread the following entries
26 FOOTER, 28 MARKER,             belong to; HEADER's ``addr`` is the trace version
47 ENCODING, 23 THREAD_EXIT
================================  ==========================================================

``gap`` follows the lackey importer's rule: an instruction whose data references follow it
is the memory instruction itself; every other instruction adds 1 to the next record's gap.
An access's size is the entry's ``size`` (1 when it is 0). ``dep``, ``tag`` and ``site``
are 0 (a drmemtrace carries PCs, not kvsim sites).

Threads: a file normally holds one thread (its ``THREAD`` entry names it); convert each
thread's file into its own kvt. A file that switches threads (``THREAD`` entries with
different ids) is read in file order, its threads' accesses interleaved as they appear;
:func:`drmemtrace_to_records`'s ``stats["threads"]`` counts records, loads, stores,
prefetches and instructions per thread id either way.
"""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

from ..format import KIND_LOAD, KIND_PREFETCH, KIND_STORE, RECORD_DTYPE

__all__ = ["ENTRY_DTYPE", "DrmemtraceError", "drmemtrace_to_records", "iter_entries",
           "looks_like_entries"]

ENTRY_DTYPE = np.dtype([("type", "<u2"), ("size", "<u2"), ("addr", "<u8")])
assert ENTRY_DTYPE.itemsize == 12

T_READ, T_WRITE, T_THREAD, T_HEADER, T_BUNDLE = 0, 1, 22, 25, 17
_DATA_PF = [2, 3, 4, 5, 6, 7, 8, 32, 33, 34, 41, 42, 43, 44, 45, 46]
_INSTR = [10, 11, 12, 13, 14, 15, 16, 17, 29, 30, 31, 48, 49]
_DROPPED = [9, 35, 36, 37, 38, 39, 40, 27, 18, 19, 20, 21]
_LAST_TYPE = 50  # TRACE_TYPE_INVALID
_KIND = np.full(65536, 255, dtype=np.uint8)
_KIND[T_READ], _KIND[T_WRITE] = KIND_LOAD, KIND_STORE
_KIND[_DATA_PF] = KIND_PREFETCH
_IS_INSTR = np.zeros(65536, dtype=bool)
_IS_INSTR[_INSTR] = True
_IS_DROPPED = np.zeros(65536, dtype=bool)
_IS_DROPPED[_DROPPED] = True


class DrmemtraceError(ValueError):
    """A drmemtrace file is malformed; the message names the file and the entry."""


def looks_like_entries(head: bytes) -> bool:
    """True when ``head`` (at least 12 bytes) starts with a drmemtrace HEADER entry."""
    if len(head) < 12:
        return False
    t, s, a = np.frombuffer(head[:12], dtype=ENTRY_DTYPE)[0].tolist()
    return t == T_HEADER and s == 0 and 0 < a < 64


def _members(z: zipfile.ZipFile) -> list[str]:
    names = [n for n in z.namelist() if not n.endswith("/")]

    def key(n: str) -> tuple[int, str]:
        m = re.search(r"(\d+)$", n)
        return (int(m.group(1)) if m else -1, n)

    return sorted(names, key=key)


def _streams(src: str | os.PathLike[str] | IO[bytes], name: str) -> Iterator[IO[bytes]]:
    from ._io import open_input

    if isinstance(src, str | os.PathLike) and zipfile.is_zipfile(src):
        try:
            z = zipfile.ZipFile(src)
        except zipfile.BadZipFile as e:
            raise DrmemtraceError(f"{name}: bad zip archive: {e}") from None
        with z:
            members = _members(z)
            if not members:
                raise DrmemtraceError(f"{name}: zip archive holds no trace chunk")
            for m in members:
                with z.open(m) as f:
                    yield f
        return
    f = open_input(src)
    try:
        yield f
    finally:
        if f is not src:
            f.close()


def iter_entries(src: str | os.PathLike[str] | IO[bytes], chunk_entries: int = 1 << 16
                 ) -> Iterator[np.ndarray]:
    """Yield a drmemtrace file's entries as ENTRY_DTYPE arrays of up to ``chunk_entries``
    (zip members in chunk order, gzip or raw streams), memory bounded by the chunk."""
    import gzip
    import lzma
    import zlib

    name = os.fspath(src) if isinstance(src, str | os.PathLike) else \
        str(getattr(src, "name", "<drmemtrace>"))
    want = chunk_entries * ENTRY_DTYPE.itemsize
    first = True
    done = 0
    for f in _streams(src, name):
        while True:
            try:
                data = f.read(want)
                while 0 < len(data) < want and (more := f.read(want - len(data))):
                    data += more
            except (EOFError, lzma.LZMAError, zlib.error, gzip.BadGzipFile,
                    zipfile.BadZipFile) as e:
                raise DrmemtraceError(f"{name}: bad compressed data after entry "
                                      f"{done // 12}: {e}") from None
            except OSError as e:
                if e.errno:
                    raise
                raise DrmemtraceError(f"{name}: bad compressed data after entry "
                                      f"{done // 12}: {e}") from None
            if not data:
                break
            if first and not looks_like_entries(data[:12]):
                raise DrmemtraceError(f"{name}: entry 0: not a drmemtrace HEADER entry "
                                      f"(type 25, size 0, version 1..63)")
            first = False
            whole = len(data) - len(data) % 12
            if whole < len(data):
                raise DrmemtraceError(f"{name}: trace ends {len(data) - whole} bytes into "
                                      f"entry {(done + whole) // 12} (entries are 12 bytes)")
            done += whole
            yield np.frombuffer(data, dtype=ENTRY_DTYPE)
    if first:
        raise DrmemtraceError(f"{name}: empty trace (no HEADER entry)")


class _State:
    def __init__(self) -> None:
        self.since = 0  # instructions since the last memory instruction
        self.tid = -1
        self.entries = 0
        self.version = None
        self.threads: dict[int, dict[str, int]] = {}
        self.counts = {"entries": 0, "records": 0, "instructions": 0, "dropped": 0}


def entries_to_records(e: np.ndarray, st: _State, name: str = "<drmemtrace>") -> np.ndarray:
    """Records for one chunk of entries (see the module docstring)."""
    t = e["type"]
    if (bad := np.flatnonzero(t > _LAST_TYPE)).size:
        i = int(bad[0])
        raise DrmemtraceError(f"{name}: entry {st.entries + i}: unknown type {int(t[i])}")
    if st.version is None and e.size and t[0] == T_HEADER:
        st.version = int(e["addr"][0])
    w = np.where(t == T_BUNDLE, e["size"], 1).astype(np.int64) * _IS_INSTR[t]
    kind = _KIND[t]
    mem = kind != 255
    # thread of every entry: the latest THREAD entry's addr (carried across chunks)
    is_thr = t == T_THREAD
    thr_pos = np.where(is_thr, np.arange(e.size), -1)
    np.maximum.accumulate(thr_pos, out=thr_pos)
    tid = np.where(thr_pos >= 0, e["addr"][np.maximum(thr_pos, 0)].astype(np.int64), st.tid)
    if is_thr.any():
        st.tid = int(e["addr"][np.flatnonzero(is_thr)[-1]])
    cum = st.since + np.cumsum(w)  # instructions since the last memory entry's instruction
    idx = np.flatnonzero(mem)
    # instructions fetched between the previous memory entry and this one; the last of
    # them is this entry's own instruction
    fetched = cum[idx] - (np.concatenate([[0], cum[idx[:-1]]]) if idx.size else idx)
    if idx.size:
        fetched[0] = cum[idx[0]]
    gap = np.maximum(fetched - 1, 0)
    if idx.size:
        st.since = int(cum[-1] - cum[idx[-1]])
    elif e.size:
        st.since = int(cum[-1])
    out = np.zeros(idx.size, dtype=RECORD_DTYPE)
    out["addr"] = e["addr"][idx]
    k = kind[idx]
    out["kind"] = k
    out["size"] = np.where(k == KIND_PREFETCH, 1, np.maximum(e["size"][idx], 1))
    out["gap"] = np.minimum(gap, 2**32 - 1)
    # an access never wraps past 2^64 (FORMAT.md): clip the size instead
    # (top + 1 overflows to 0 at address 0, so it is formed only where it clips)
    top = np.uint64(2**64 - 1) - out["addr"]
    clip = top < out["size"].astype(np.uint64)
    out["size"][clip] = (top[clip] + np.uint64(1)).astype(np.uint16)
    st.entries += e.size
    c = st.counts
    c["entries"] += e.size
    c["records"] += idx.size
    c["instructions"] += int(w.sum())
    c["dropped"] += int(_IS_DROPPED[t].sum())
    for th in np.unique(tid[mem | (w > 0)]).tolist():
        sel = tid == th
        d = st.threads.setdefault(th, {"records": 0, "loads": 0, "stores": 0,
                                       "prefetches": 0, "instructions": 0})
        km = kind[sel]
        d["loads"] += int((km == KIND_LOAD).sum())
        d["stores"] += int((km == KIND_STORE).sum())
        d["prefetches"] += int((km == KIND_PREFETCH).sum())
        d["records"] += int((km != 255).sum())
        d["instructions"] += int(w[sel].sum())
    return out


def drmemtrace_to_records(src: str | os.PathLike[str] | IO[bytes],
                          stats: dict[str, Any] | None = None) -> Iterator[np.ndarray]:
    """Yield kvsim records (one array per chunk of entries) for a drmemtrace file; ``stats``
    receives ``entries``, ``records``, ``instructions``, ``dropped``, ``version`` and
    ``threads`` (per thread id: records, loads, stores, prefetches, instructions) when the
    iterator finishes."""
    name = os.fspath(src) if isinstance(src, str | os.PathLike) else \
        str(getattr(src, "name", "<drmemtrace>"))
    st = _State()
    for e in iter_entries(src):
        out = entries_to_records(e, st, name)
        if out.size:
            yield out
    if stats is not None:
        stats.update(st.counts, version=st.version,
                     threads={str(k): v for k, v in sorted(st.threads.items())})


def main(argv: list[str] | None = None) -> int:
    """``python -m kvsim.traces.convert.drmemtrace FILE... [--out RESULT.json]``: read each
    drmemtrace file and print (and, with ``--out``, write through
    :func:`kvsim.provenance.write_result`) what was read: entries, records, instructions and
    per thread records, loads, stores, prefetches, instructions, and their totals."""
    import argparse
    import sys
    from pathlib import Path

    ap = argparse.ArgumentParser(prog="python -m kvsim.traces.convert.drmemtrace",
                                 description=(main.__doc__ or "").split(":")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default=None, help="result file to write")
    a = ap.parse_args(argv)
    rows = []
    for f in a.files:
        stats: dict[str, Any] = {}
        try:
            for _ in drmemtrace_to_records(f, stats):
                pass
        except (OSError, DrmemtraceError) as e:
            print(f"kvsim.traces.convert.drmemtrace: error: {e}", file=sys.stderr)
            return 1
        rows.append({"file": Path(f).name, **stats})
        print(f"{Path(f).name}: version {stats['version']}, {stats['entries']:,d} entries, "
              f"{stats['records']:,d} records, {stats['instructions']:,d} instructions; "
              + "; ".join(f"thread {t}: {v['loads']:,d} loads, {v['stores']:,d} stores, "
                          f"{v['prefetches']:,d} prefetches" for t, v in stats["threads"].items()))
    if a.out:
        from kvsim import provenance

        keys = ("records", "loads", "stores", "prefetches", "instructions")
        totals = {k: sum(t[k] for r in rows for t in r["threads"].values()) for k in keys}
        totals["threads"] = sum(len(r["threads"]) for r in rows)
        provenance.write_result(a.out, {"benchmark": "drmemtrace-import", "totals": totals,
                                        "files": rows})
        print(f"# wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def convert_read(src: Any, opts: Any) -> tuple[Iterator[np.ndarray], dict[str, Any]]:
    """The converters' table reader (:mod:`traces.convert.formats`): the stream, or for a
    zip archive its path (read member by member)."""
    if opts.path != "-" and zipfile.is_zipfile(opts.path):
        return drmemtrace_to_records(opts.path), {}
    return drmemtrace_to_records(src), {}
