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
    """``n`` random records with every field exercised (including markers)."""
    rng = np.random.default_rng(seed)
    r = np.zeros(n, dtype=RECORD_DTYPE)
    r["addr"] = rng.integers(0, 2**64, n, dtype=np.uint64)
    r["gap"] = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    r["dep"] = rng.integers(0, 4, n)
    r["size"] = rng.integers(0, 2**16, n)
    r["kind"] = rng.integers(0, 4, n)
    r["tag"] = rng.integers(0, 256, n)
    r["site"] = rng.integers(0, 2**16, n)
    r["flags"] = rng.integers(0, 2**16, n)
    return r
