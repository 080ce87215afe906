"""The machine an experiment's cells ran on, as flat columns of its result rows.

:func:`kvsim.provenance.machine` gives the CPU model, cores, memory, kernel and load; this
adds what a cache study needs besides: the cache sizes the kernel reports
(``/sys/devices/system/cpu/cpu0/cache/index*``) and the transparent-huge-page setting
(``/sys/kernel/mm/transparent_hugepage/enabled``, the bracketed word), since the page size
changes TLB misses. Everything is read fresh on every call, never assumed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvsim import provenance

__all__ = ["caches", "describe", "thp"]

_SYS_CPU = Path("/sys/devices/system/cpu/cpu0/cache")
_THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def caches() -> str | None:
    """``"L1d 32K, L1i 32K, L2 1024K, L3 36608K"`` (the kernel's own size strings), or None."""
    out = []
    for d in sorted(_SYS_CPU.glob("index*")):
        level, kind, size = (_read(d / f) for f in ("level", "type", "size"))
        if not (level and size):
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind or "", "")
        out.append(f"L{level}{suffix} {size}")
    return ", ".join(out) or None


def thp() -> str | None:
    """The transparent huge page mode in force (``always``, ``madvise`` or ``never``)."""
    text = _read(_THP)
    if not text:
        return None
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return text


def describe() -> dict[str, Any]:
    """Flat ``machine_*`` columns: cpu, caches, kernel, thp, cores, memory_gib, hypervisor,
    load_1m, autogroup (whether ``nice`` held across shells), host."""
    m = provenance.machine()
    return {
        "machine_cpu": m["cpu_model"],
        "machine_caches": caches(),
        "machine_kernel": m["kernel"],
        "machine_thp": thp(),
        "machine_cores": m["cores"],
        "machine_memory_gib": m["memory_gib"],
        "machine_hypervisor": m["hypervisor"],
        "machine_load_1m": m["load_average_1m"],
        "machine_autogroup": m["sched_autogroup"],
        "machine_host": m["hostname"],
    }
