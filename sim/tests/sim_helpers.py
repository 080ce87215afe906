"""Helpers shared by the sim tests (imported by name: pytest puts each tests folder on the path)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kvsim import traces

DATA = Path(__file__).resolve().parent / "data"
# In-repo copies of the golden vectors (traces/tests/data/README.md says where they come from).
GOLDEN = Path(__file__).resolve().parents[2] / "traces" / "tests" / "data"

#: A calibrated CPU file's least content (a core, two levels, DRAM), as a TOML document.
CALIBRATED_DOC = {
    "name": "t", "freq_ghz": 3.0, "core": {"width": 6, "rob": 256},
    "cache": [{"name": "L1D", "size": 49152, "ways": 12, "line": 64, "latency": 5},
              {"name": "L2", "size": 2097152, "ways": 16, "line": 64, "latency": 16}],
    "dram": {"latency_ns": 100.0},
}


def records(rows) -> np.ndarray:
    """Build a record array from (kind, addr, size[, gap, dep, tag, site, flags]) tuples;
    kind is a name of ``traces.KIND_NAMES`` ("load", "store", "prefetch", "marker")."""
    out = np.zeros(len(rows), dtype=traces.RECORD_DTYPE)
    names = ("kind", "addr", "size", "gap", "dep", "tag", "site", "flags")
    for i, row in enumerate(rows):
        for name, v in zip(names, row, strict=False):
            out[i][name] = traces.KIND_NAMES.index(v) if name == "kind" else v
    return out


def tiny_cpu_text(core: str, *, mshrs: int | None = 16, tail: str = "", freq_ghz: float = 2.0,
                  dram_ns: float = 100.0) -> str:
    """A CPU file of one 4 KiB L1D before DRAM: ``core`` is the ``[core]`` section's lines,
    ``tail`` any sections after ``[dram]`` (a ``[tlb]``, say)."""
    mshr_line = f"mshrs = {mshrs}\n" if mshrs is not None else ""
    return f"""name = "s"
freq_ghz = {freq_ghz}
[core]
{core}
[[cache]]
name = "L1D"
size = 4096
ways = 4
line = 64
latency = 4
{mshr_line}[dram]
latency_ns = {dram_ns}
{tail}"""
