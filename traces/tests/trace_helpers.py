"""Shared helpers for traces tests: random record arrays and a standard header."""

from __future__ import annotations

import numpy as np

from kvsim.traces import RECORD_DTYPE

HEADER = {
    "producer": {"name": "tests", "version": "0", "git_commit": None},
    "workload": {"name": "unit", "seed": 1},
    "tags": ["other", "bucket", "key"],
    "sites": ["s0", "s1"],
    "markers": ["none", "command", "op", "phase", "warmup_begin", "warmup_end", "batch"],
    "phases": ["load", "run"],
    "arena_base": 0x100000000,
    "gap_model": "unit",
}


def random_records(n: int, seed: int = 0) -> np.ndarray:
    """``n`` random records that keep FORMAT.md's record rules (for ``HEADER``), with every
    field exercised: all kinds and marker types, sizes 1..65535, addresses up to the last
    byte of the address space, deps on earlier loads, warm-up markers that alternate."""
    rng = np.random.default_rng(seed)
    r = np.zeros(n, dtype=RECORD_DTYPE)
    kind = rng.integers(0, 4, n).astype(np.uint8)
    size = rng.integers(1, 2**16, n).astype(np.uint64)
    size[kind == 2] = 1
    size[kind == 3] = 0
    addr = rng.integers(0, 2**64, n, dtype=np.uint64)
    limit = np.uint64(2**64 - 1) - np.maximum(size, 1) + np.uint64(1)
    addr = np.minimum(addr, limit)
    marker = kind == 3
    flags = np.zeros(n, dtype=np.uint16)
    flags[marker] = rng.integers(0, len(HEADER["markers"]), int(marker.sum()))
    w = np.flatnonzero(marker & ((flags == 4) | (flags == 5)))
    flags[w] = np.resize(np.array([4, 5], dtype=np.uint16), w.size)
    back = rng.integers(1, 4, n)
    src = np.arange(n) - back
    ok = ~marker & (src >= 0) & (rng.random(n) < 0.5)
    ok[ok] = kind[src[ok]] == 0
    r["addr"] = np.where(marker, rng.integers(0, 2**64, n, dtype=np.uint64), addr)
    r["gap"] = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    r["dep"] = np.where(ok, back, 0)
    r["size"] = size
    r["kind"] = kind
    r["tag"] = rng.integers(0, len(HEADER["tags"]), n)
    r["site"] = rng.integers(0, len(HEADER["sites"]), n)
    r["flags"] = flags
    return r


def brute_reuse_distances(lines) -> list[int]:
    """Reuse distance of each access by an explicit LRU stack (-1: first use): the
    brute-force reference the reuse-distance tests compare against."""
    stack: list[int] = []
    out = []
    for x in lines:
        if x in stack:
            out.append(len(stack) - 1 - stack.index(x))
            stack.remove(x)
        else:
            out.append(-1)
        stack.append(x)
    return out
