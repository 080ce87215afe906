"""Helpers shared by the sim tests (imported by name: pytest puts each tests folder on the path)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kvsim import traces

DATA = Path(__file__).resolve().parent / "data"
# In-repo copies of the golden vectors (traces/tests/data/README.md says where they come from).
GOLDEN = Path(__file__).resolve().parents[2] / "traces" / "tests" / "data"


def records(rows) -> np.ndarray:
    """Build a record array from (kind, addr, size[, gap, dep, tag, site, flags]) tuples;
    kind is a name of ``traces.KIND_NAMES`` ("load", "store", "prefetch", "marker")."""
    out = np.zeros(len(rows), dtype=traces.RECORD_DTYPE)
    names = ("kind", "addr", "size", "gap", "dep", "tag", "site", "flags")
    for i, row in enumerate(rows):
        for name, v in zip(names, row, strict=False):
            out[i][name] = traces.KIND_NAMES.index(v) if name == "kind" else v
    return out
