"""Shared helpers for the sim tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import traces

DATA = Path(__file__).resolve().parent / "data"
# In-repo copies of ../shared/golden (traces/tests/data/README.md says where they come from).
GOLDEN = Path(__file__).resolve().parents[2] / "traces" / "tests" / "data"


def records(rows) -> np.ndarray:
    """Build a record array from (kind, addr, size[, gap, dep, tag, site, flags]) tuples."""
    out = np.zeros(len(rows), dtype=traces.RECORD_DTYPE)
    names = ("kind", "addr", "size", "gap", "dep", "tag", "site", "flags")
    for i, row in enumerate(rows):
        for name, v in zip(names, row, strict=False):
            out[i][name] = v
    return out


@pytest.fixture
def golden_dir() -> Path:
    assert (GOLDEN / "small_mixed_trace.din").exists(), f"golden files missing under {GOLDEN}"
    return GOLDEN
