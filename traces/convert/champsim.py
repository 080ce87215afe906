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

import bz2
import gzip
import lzma
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..format import KIND_LOAD, KIND_PREFETCH, KIND_STORE, RECORD_DTYPE

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


def _compressor(name: str, raw: IO[bytes]) -> IO[bytes]:
    """Wrap ``raw`` by ``name``'s suffix; deterministic (gzip: no name, mtime 0)."""
    if name.endswith(".xz"):
        return lzma.LZMAFile(raw, "wb", preset=6)  # type: ignore[return-value]
    if name.endswith(".gz"):
        return gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=raw, mtime=0)
    if name.endswith(".bz2"):
        return bz2.BZ2File(raw, "wb")  # type: ignore[return-value]
    return raw


def read_champsim(src: str | os.PathLike[str] | IO[bytes]) -> np.ndarray:
    """Read a ChampSim trace (compression by file-name suffix) as a CHAMPSIM_DTYPE array."""
    if isinstance(src, str | os.PathLike):
        p = Path(src)
        opener = {".xz": lzma.open, ".gz": gzip.open, ".bz2": bz2.open}.get(p.suffix, open)
        with opener(p, "rb") as f:  # type: ignore[operator]
            data = f.read()
    else:
        data = src.read()
    if len(data) % CHAMPSIM_DTYPE.itemsize:
        raise ValueError(f"ChampSim trace length {len(data)} is not a multiple of 64 bytes")
    return np.frombuffer(data, dtype=CHAMPSIM_DTYPE)


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
    # --- build the instruction array ---
    total = int(fill.sum()) + keep.size
    out = np.zeros(total, dtype=CHAMPSIM_DTYPE)
    out["ip"] = FILLER_IP
    at = np.cumsum(fill + 1) - 1  # position of each memory instruction
    k = kind[keep]
    a = addr[keep]
    size = np.maximum(chunk["size"][keep], 1).astype(np.uint64)
    first = a >> np.uint64(6)
    span = ((a + size - np.uint64(1)) >> np.uint64(6)) - first + np.uint64(1)
    span = span.astype(np.int64)
    ins = out[at]
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
    out[at] = ins
    st["instructions"] += total
    st["memory_instructions"] += keep.size
    st["fillers"] += total - keep.size
    return out


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
                f = _compressor(target.name, raw)
                _write_all(chunks, f, state, prefetch)
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
        f.write(records_to_instructions(chunk, state, prefetch).tobytes())
    if state.pending:  # trailing non-memory instructions
        tail = np.zeros(state.pending, dtype=CHAMPSIM_DTYPE)
        tail["ip"] = FILLER_IP
        f.write(tail.tobytes())
        state.stats["instructions"] += state.pending
        state.stats["fillers"] += state.pending
        state.pending = 0
