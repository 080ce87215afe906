"""pycachesim's side of the benchmarks' comparisons (``bench.sim`` in this process,
``bench.presets`` in a process of its own): a kvsim cache hierarchy built in pycachesim, LRU at
every level, memory below the last. Light on purpose: the whole-process comparison imports it
in the measured process, which must not pay for importing ``kvsim.sim``."""

from __future__ import annotations

from importlib import metadata
from typing import Any


def levels(cpu: Any) -> list[list[int]]:
    """``[sets, ways, line]`` of each cache level of a ``kvsim.sim.CpuConfig``, L1 first."""
    return [[c.size // (c.ways * c.line), c.ways, c.line] for c in cpu.caches]


def simulator(geometry: list[list[int]]) -> Any:
    """A pycachesim ``CacheSimulator`` of the levels ``geometry`` (:func:`levels`): each level
    loads from and stores to the one below, the last from and to main memory."""
    from cachesim import Cache, CacheSimulator, MainMemory

    mem = MainMemory()
    below = None
    for i in range(len(geometry), 0, -1):
        sets, ways, line = geometry[i - 1]
        link = {} if below is None else {"store_to": below, "load_from": below}
        cache = Cache(f"L{i}", sets, ways, line, "LRU", **link)
        if below is None:
            mem.load_to(cache)
            mem.store_from(cache)
        below = cache
    return CacheSimulator(below, mem)


def version() -> str | None:
    """pycachesim's version, "unknown" where it does not say, None where it is missing."""
    try:
        import cachesim  # noqa: F401
    except ImportError:
        return None
    try:
        return metadata.version("pycachesim")
    except metadata.PackageNotFoundError:
        return "unknown"


def run_trace(geometry: list[list[int]], path: str) -> None:
    """The loads and stores of the trace at ``path`` through :func:`simulator` with
    pycachesim's batched ``load(list, length=8)``, chunk by chunk (memory does not grow with
    the trace)."""
    import numpy as np

    from kvsim import traces

    cs = simulator(geometry)
    with traces.open(path) as tr:
        for recs in tr:
            cs.load(recs["addr"][recs["kind"] <= 1].astype(np.int64).tolist(), length=8)
