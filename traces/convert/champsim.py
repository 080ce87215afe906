"""ChampSim binary traces (``input_instr``): write from kvsim records, read back.

Record layout (ChampSim ``inc/trace_instruction.h``; simulators.md section 2): 64 bytes,
little-endian, no header: ``ip`` u64, ``is_branch`` u8, ``branch_taken`` u8,
``destination_registers`` u8[2], ``source_registers`` u8[4], ``destination_memory`` u64[2]
(store addresses), ``source_memory`` u64[4] (load addresses). A 0 means "empty slot".
Compression follows ChampSim's file-name rule: ``.xz``, ``.gz``, ``.bz2`` or raw.

Mapping (:func:`records_to_champsim`), one instruction per memory record:

* load -> ``source_memory``; store -> ``destination_memory``; prefetch -> a load (ChampSim
  traces have no prefetch instructions) or dropped with ``prefetch="skip"``.
* An access crossing 64 B lines lists each line touched (first the exact address, then the
  start of every further line), up to 4 for loads and 2 for stores; further lines are lost
  (counted in ``stats["lines_lost"]``). ChampSim has no access size.
* ``gap`` -> that many filler instructions (``ip`` = :data:`FILLER_IP`, no operands) before
  the memory instruction, so instruction counts and ROB occupancy are kept. Markers are
  dropped (their gap carries over); a dropped prefetch becomes one filler.
* ``site`` -> ``ip = SITE_IP_BASE + 4 * site`` (so IP-based prefetchers see one PC per site).
* ``dep`` -> registers: every load writes a register from a rotating pool of 60
  general-purpose ids (ChampSim's special registers 6 = SP, 25 = FLAGS, 26 = IP and 0 = empty
  are never used); a record whose ``dep`` names a load reads that register, so ChampSim's
  register dependency tracking delays it until the load completes. A dependency is lost when
  60 or more loads intervene (the register was reused); ``stats`` counts kept and lost ones.
* Lost entirely: access sizes, ``tag``, ``flags``, markers, and accesses at address 0 (0
  means "no operand"; such a record becomes a filler, counted in ``stats["zero_addr"]``).
"""

from __future__ import annotations

import gzip
import lzma
import os
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..format import KIND_LOAD, KIND_PREFETCH, KIND_STORE, RECORD_DTYPE
from ._io import compression_of, open_output

__all__ = ["CHAMPSIM_DTYPE", "FILLER_IP", "SITE_IP_BASE", "read_champsim",
           "records_to_champsim", "records_to_instructions"]

CHAMPSIM_DTYPE = np.dtype([
    ("ip", "<u8"), ("is_branch", "u1"), ("branch_taken", "u1"),
    ("destination_registers", "u1", (2,)), ("source_registers", "u1", (4,)),
    ("destination_memory", "<u8", (2,)), ("source_memory", "<u8", (4,)),
])
assert CHAMPSIM_DTYPE.itemsize == 64

SITE_IP_BASE = 0x400000  #: ip of the memory instruction of site 0
FILLER_IP = 0x3FFFFC  #: ip of gap (non-memory) filler instructions
#: register ids used for load results: 1..63 minus 6 (SP), 25 (FLAGS), 26 (IP)
REG_POOL = np.array([r for r in range(1, 64) if r not in (6, 25, 26)], dtype=np.uint8)
_P = len(REG_POOL)


class ChampSimError(ValueError):
    """A ChampSim trace is malformed; the message names the file and the byte offset."""


def iter_champsim(src: str | os.PathLike[str] | IO[bytes], chunk_instructions: int = 1 << 16
                  ) -> Iterator[np.ndarray]:
    """Yield a ChampSim trace's instructions as CHAMPSIM_DTYPE arrays of up to
    ``chunk_instructions``, decompressing by content (xz, gzip, bzip2 or raw), so memory does
    not grow with the trace. A trace whose length is not a multiple of 64 bytes raises
    :class:`ChampSimError` when its end is reached."""
    from ._io import open_input

    name = os.fspath(src) if isinstance(src, str | os.PathLike) else \
        str(getattr(src, "name", "<champsim>"))
    f = open_input(src)
    want = chunk_instructions * CHAMPSIM_DTYPE.itemsize
    done = 0
    try:
        while True:
            try:
                data = f.read(want)
                while 0 < len(data) < want:
                    more = f.read(want - len(data))
                    if not more:
                        break
                    data += more
            except (EOFError, lzma.LZMAError, zlib.error, gzip.BadGzipFile) as e:
                raise ChampSimError(f"{name}: bad compressed data after byte {done}: {e}"
                                    ) from None
            except OSError as e:
                if e.errno:
                    raise
                raise ChampSimError(f"{name}: bad compressed data after byte {done}: {e}"
                                    ) from None
            if not data:
                return
            whole = len(data) - len(data) % CHAMPSIM_DTYPE.itemsize
            if whole:
                yield np.frombuffer(data[:whole], dtype=CHAMPSIM_DTYPE)
            if whole < len(data):
                raise ChampSimError(f"{name}: trace ends {len(data) - whole} bytes into an "
                                    f"instruction at byte {done + whole} (ChampSim records "
                                    f"are 64 bytes)")
            done += len(data)
    finally:
        if f is not src:
            f.close()


def read_champsim(src: str | os.PathLike[str] | IO[bytes]) -> np.ndarray:
    """Read a whole ChampSim trace (compression detected by content) as a CHAMPSIM_DTYPE
    array; :func:`iter_champsim` streams instead."""
    parts = list(iter_champsim(src))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=CHAMPSIM_DTYPE)


class _State:
    """Carry-over between chunks: global index, pending fillers, the last _P loads."""

    def __init__(self) -> None:
        self.base = 0  # global index of the chunk's first record
        self.pending = 0  # filler instructions not yet emitted
        self.loads_seen = 0
        self.tail_idx = np.empty(0, dtype=np.int64)  # global indices of the last loads
        self.tail_ord = np.empty(0, dtype=np.int64)  # their load ordinals
        self.stats = {"instructions": 0, "memory_instructions": 0, "fillers": 0,
                      "lines_lost": 0, "zero_addr": 0, "deps_kept": 0, "deps_lost": 0}


def records_to_instructions(chunk: np.ndarray, state: _State, prefetch: str = "load"
                            ) -> np.ndarray:
    """Convert one chunk of records to ChampSim instructions (CHAMPSIM_DTYPE)."""
    parts = list(_expand(*_memory_instructions(chunk, state, prefetch)))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=CHAMPSIM_DTYPE)


_FILLER = np.zeros(1, dtype=CHAMPSIM_DTYPE)
_FILLER["ip"] = FILLER_IP
_PIECE = 1 << 16  #: instructions per array handed to the writer (4 MiB)


def _expand(ins: np.ndarray, fill: np.ndarray, piece: int = _PIECE) -> Iterator[np.ndarray]:
    """The instruction stream ``fill[0]`` fillers, ``ins[0]``, ``fill[1]`` fillers, ...
    as arrays of about ``piece`` instructions: memory stays bounded whatever the gaps."""
    i, n = 0, ins.size
    while i < n:
        # as many memory instructions as fit in one piece with their fillers (at least one)
        cum = np.cumsum(fill[i:i + piece] + 1)
        j = i + max(1, int(np.searchsorted(cum, piece, side="right")))
        f = fill[i:j]
        if j - i == 1 and f[0] >= piece:
            left = int(f[0])
            block = np.repeat(_FILLER, piece)
            while left >= piece:
                yield block
                left -= piece
            out = np.repeat(_FILLER, left + 1)
            out[-1] = ins[i]
            yield out
        else:
            total = int(f.sum()) + (j - i)
            out = np.repeat(_FILLER, total)
            out[np.cumsum(f + 1) - 1] = ins[i:j]
            yield out
        i = j
    return


def _memory_instructions(chunk: np.ndarray, state: _State, prefetch: str
                         ) -> tuple[np.ndarray, np.ndarray]:
    """(the chunk's memory instructions, the filler count before each); trailing fillers
    stay in ``state.pending``."""
    n = chunk.size
    kind = chunk["kind"]
    glob = state.base + np.arange(n, dtype=np.int64)
    state.base += n
    # --- dependencies through registers ---
    is_ld = kind == KIND_LOAD
    cum = np.cumsum(is_ld, dtype=np.int64)
    loads_before = state.loads_seen + cum - is_ld
    ld_idx = np.concatenate([state.tail_idx, glob[is_ld]])
    ld_ord = np.concatenate([state.tail_ord, loads_before[is_ld]])
    dep = chunk["dep"].astype(np.int64)
    want = dep > 0
    target = glob - dep
    pos = np.clip(np.searchsorted(ld_idx, target), 0, max(ld_idx.size - 1, 0))
    found = want & (ld_idx.size > 0)
    if ld_idx.size:
        found &= ld_idx[pos] == target
    o = ld_ord[pos] if ld_idx.size else np.zeros(n, dtype=np.int64)
    ok = found & (loads_before - o <= _P)
    state.loads_seen += int(cum[-1]) if n else 0
    state.tail_idx, state.tail_ord = ld_idx[-_P:], ld_ord[-_P:]
    # --- which records become memory instructions ---
    addr = chunk["addr"]
    is_mem = (kind == KIND_LOAD) | (kind == KIND_STORE)
    if prefetch == "load":
        is_mem |= kind == KIND_PREFETCH
    zero = is_mem & (addr == 0)
    is_mem &= ~zero
    dropped_instr = ((kind == KIND_PREFETCH) & (prefetch == "skip")) | zero
    contrib = chunk["gap"].astype(np.int64) + dropped_instr
    cs = np.cumsum(contrib)
    keep = np.flatnonzero(is_mem)
    prev_cs = np.concatenate([[0], cs[keep[:-1]]]) if keep.size else np.empty(0, np.int64)
    fill = cs[keep] - prev_cs if keep.size else prev_cs
    if keep.size:
        fill[0] += state.pending
        state.pending = int(cs[-1] - cs[keep[-1]])
    else:
        state.pending += int(cs[-1]) if n else 0
    st = state.stats
    st["zero_addr"] += int(zero.sum())
    st["deps_kept"] += int((ok & is_mem).sum())
    st["deps_lost"] += int((want & ~ok & is_mem).sum())
    # --- build the memory instructions ---
    total = int(fill.sum()) + keep.size
    k = kind[keep]
    a = addr[keep]
    size = np.maximum(chunk["size"][keep], 1).astype(np.uint64)
    first = a >> np.uint64(6)
    span = ((a + size - np.uint64(1)) >> np.uint64(6)) - first + np.uint64(1)
    span = span.astype(np.int64)
    ins = np.zeros(keep.size, dtype=CHAMPSIM_DTYPE)
    ins["ip"] = SITE_IP_BASE + 4 * chunk["site"][keep].astype(np.uint64)
    st_mask = k == KIND_STORE
    ld_mask = ~st_mask
    slots = {True: ("destination_memory", 2), False: ("source_memory", 4)}
    for is_store, mask in ((True, st_mask), (False, ld_mask)):
        field, cap = slots[is_store]
        col = ins[field]
        col[mask, 0] = a[mask]
        for j in range(1, cap):
            m = mask & (span > j)
            col[m, j] = (first[m] + np.uint64(j)) << np.uint64(6)
        ins[field] = col
        st["lines_lost"] += int(np.maximum(span[mask] - cap, 0).sum())
    dst = ins["destination_registers"]
    ld_here = np.flatnonzero(k == KIND_LOAD)
    dst[ld_here, 0] = REG_POOL[loads_before[keep][ld_here] % _P]
    ins["destination_registers"] = dst
    src = ins["source_registers"]
    has_dep = np.flatnonzero(ok[keep])
    src[has_dep, 0] = REG_POOL[o[keep][has_dep] % _P]
    ins["source_registers"] = src
    st["instructions"] += total
    st["memory_instructions"] += keep.size
    st["fillers"] += total - keep.size
    return ins, fill.astype(np.int64)


def records_to_champsim(records: np.ndarray | Iterable[np.ndarray],
                        dst: str | os.PathLike[str] | IO[bytes], prefetch: str = "load"
                        ) -> dict[str, Any]:
    """Write records (array or iterable of arrays, e.g. a ``traces.open`` reader) as a
    ChampSim trace. A path is written via a temp file (same suffix, so the same compression)
    and renamed when complete. Returns the stats described in the module docstring."""
    if prefetch not in ("load", "skip"):
        raise ValueError("prefetch must be 'load' or 'skip'")
    chunks = [records] if isinstance(records, np.ndarray) else records
    state = _State()
    if isinstance(dst, str | os.PathLike):
        target = Path(dst)
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        try:
            with open(tmp, "wb") as raw:
                f = open_output(raw, compression_of(target.name))
                try:
                    _write_all(chunks, f, state, prefetch)
                finally:
                    if f is not raw:
                        f.close()
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    else:
        _write_all(chunks, dst, state, prefetch)
    return state.stats


def _write_all(chunks: Iterable[np.ndarray], f: IO[bytes], state: _State, prefetch: str
               ) -> None:
    for chunk in chunks:
        if chunk.dtype != RECORD_DTYPE:
            raise TypeError("records must have dtype traces.RECORD_DTYPE")
        for piece in _expand(*_memory_instructions(chunk, state, prefetch)):
            f.write(piece.data)
    if state.pending:  # trailing non-memory instructions
        left = state.pending
        while left:
            k = min(left, _PIECE)
            f.write(np.repeat(_FILLER, k).data)
            left -= k
        state.stats["instructions"] += state.pending
        state.stats["fillers"] += state.pending
        state.pending = 0


# --- ChampSim -> kvsim records ---------------------------------------------------------------
IMPORT_SIZE = 8  #: bytes of an imported access (clipped at its 64-byte line's end)


class _ImportState:
    """Carry-over between instruction chunks: indices, pending gap, register writers."""

    def __init__(self) -> None:
        self.instr = 0  # global index of the chunk's first instruction
        self.rec = 0  # global index of the next record
        self.pending = 0  # instructions since the last memory instruction
        # per register: global record index of the last load of its last writer, or -1
        self.reg_load = np.full(256, -1, dtype=np.int64)
        self.stats = {"instructions": 0, "memory_instructions": 0, "loads": 0, "stores": 0,
                      "records": 0, "deps": 0}


def instructions_to_records(ins: np.ndarray, state: _ImportState, size: int = IMPORT_SIZE
                            ) -> np.ndarray:
    """Records for one chunk of ChampSim instructions (see :func:`champsim_to_records`)."""
    n = ins.size
    src_mem = ins["source_memory"]
    dst_mem = ins["destination_memory"]
    addrs = np.concatenate([src_mem, dst_mem], axis=1)  # loads first, then stores
    present = addrs != 0
    n_ld = (src_mem != 0).sum(axis=1)
    n_rec = present.sum(axis=1)
    is_mem = n_rec > 0
    mem_idx = np.flatnonzero(is_mem)
    # gap: instructions without memory operands since the previous memory instruction
    prev = np.concatenate([[-1 - state.pending], mem_idx[:-1]])
    gap_of_mem = mem_idx - prev - 1
    state.pending = int(n - 1 - mem_idx[-1]) if mem_idx.size else state.pending + n
    first_rec = state.rec + np.cumsum(n_rec) - n_rec  # global index of each instr's first
    # dependencies: a source register whose last writer was a load instruction
    dep_target = np.full(n, -1, dtype=np.int64)
    dst_regs = ins["destination_registers"]
    src_regs = ins["source_registers"]
    w_row, w_col = np.nonzero(dst_regs)
    w_reg = dst_regs[w_row, w_col]
    last_load = np.where(n_ld > 0, first_rec + n_ld - 1, -1)
    q_row, q_col = np.nonzero(src_regs[mem_idx])
    q_row = mem_idx[q_row]
    q_reg = src_regs[q_row, q_col]
    order = np.lexsort((w_row, w_reg))  # writes grouped by register, in program order
    w_row_s, w_reg_s = w_row[order], w_reg[order]
    for r in np.unique(q_reg):
        lo, hi = np.searchsorted(w_reg_s, [r, r + 1])
        writers = w_row_s[lo:hi]
        qs = np.flatnonzero(q_reg == r)
        k = np.searchsorted(writers, q_row[qs], side="left") - 1
        target = np.where(k >= 0, last_load[writers[np.maximum(k, 0)]] if writers.size
                          else -1, state.reg_load[r])
        np.maximum.at(dep_target, q_row[qs], target)
    # register state after the chunk: each register's last writer
    if w_row.size:
        last_w = np.full(256, -1, dtype=np.int64)
        np.maximum.at(last_w, w_reg, w_row)
        regs = np.flatnonzero(last_w >= 0)
        state.reg_load[regs] = last_load[last_w[regs]]
    # records, in instruction order: each instruction's loads, then its stores
    rows, cols = np.nonzero(present[mem_idx])
    instr = mem_idx[rows]
    out = np.zeros(rows.size, dtype=RECORD_DTYPE)
    a = addrs[instr, cols]
    out["addr"] = a
    line_left = np.uint64(64) - (a & np.uint64(63))
    out["size"] = np.minimum(line_left, np.uint64(size))
    out["kind"] = np.where(cols < 4, KIND_LOAD, KIND_STORE)
    first = np.concatenate([[True], instr[1:] != instr[:-1]]) if rows.size else rows == 0
    gaps = np.zeros(n, dtype=np.int64)
    gaps[mem_idx] = gap_of_mem
    out["gap"][first] = np.minimum(gaps[instr[first]], 2**32 - 1)
    gidx = state.rec + np.arange(rows.size)
    tgt = dep_target[instr]
    has = tgt >= 0
    out["dep"][has] = np.minimum(gidx[has] - tgt[has], 2**32 - 1)
    st = state.stats
    st["instructions"] += n
    st["memory_instructions"] += int(mem_idx.size)
    st["loads"] += int((cols < 4).sum())
    st["stores"] += int((cols >= 4).sum())
    st["records"] += int(rows.size)
    st["deps"] += int(has.sum())
    state.instr += n
    state.rec += rows.size
    return out


def champsim_to_records(src: str | os.PathLike[str] | IO[bytes] | Iterable[np.ndarray],
                        size: int = IMPORT_SIZE, stats: dict[str, int] | None = None
                        ) -> Iterator[np.ndarray]:
    """Yield kvsim records (one array per chunk) for a ChampSim trace (a path or stream,
    read with :func:`iter_champsim`, or an iterable of CHAMPSIM_DTYPE arrays).

    * Each non-zero ``source_memory`` slot is a load and each non-zero
      ``destination_memory`` slot a store; an instruction's loads come first (slot order),
      then its stores.
    * ChampSim records no access size: an imported access is ``size`` bytes (default
      :data:`IMPORT_SIZE`, 8), clipped at the end of its 64-byte line, so it touches the one
      line ChampSim's cache model would.
    * ``gap``: instructions without memory operands since the previous memory instruction,
      on the instruction's first record (its other records have gap 0).
    * ``dep``: when one of an instruction's ``source_registers`` was last written by an
      instruction with loads, each of its records depends on that instruction's last load
      (the nearest such load over its source registers): the register dependency ChampSim
      itself tracks, as :func:`records_to_instructions` encodes one.
    * ``ip`` and branch fields are not kept (``site`` 0). ``stats`` receives the counts of
      instructions, memory instructions, loads, stores, records and deps as the iterator
      runs.

    Round trip: :func:`records_to_champsim` then this keeps every load's and store's address
    and kind, in order, and the gaps, for accesses that stay inside one 64-byte line at a
    non-zero address (a line-crossing access comes back as one access per line; a
    prefetch exports as a load).
    """
    chunks = iter_champsim(src) if isinstance(src, str | os.PathLike) or hasattr(src, "read") \
        else src
    state = _ImportState()
    for ins in chunks:
        out = instructions_to_records(ins, state, size)
        if out.size:
            yield out
    if stats is not None:
        stats.update(state.stats)


def convert_read(src: IO[bytes], opts: Any) -> tuple[Iterator[np.ndarray], dict[str, Any]]:
    """The converters' table reader (:mod:`traces.convert.formats`)."""
    return champsim_to_records(src), {"champsim": {"access_size": IMPORT_SIZE}}


def convert_write(chunks: Iterable[np.ndarray], header: dict[str, Any], out: IO[bytes],
                  opts: Any) -> int:
    """The converters' table writer; returns the instructions written."""
    return int(records_to_champsim(chunks, out)["instructions"])
