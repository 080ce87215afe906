"""kvsim's cache-hierarchy simulator: caches, TLBs, DRAM and out-of-order timing.

    from kvsim import sim, traces
    cpu = sim.load_cpu("graviton3")                   # or "local", or a path to a .toml
    with traces.open("run.kvt") as tr:
        result = sim.simulate(tr, cpu)                # JSON-ready dict
    df = sim.stats_dataframe(result)                  # level x tag x kind

The compiled engine (``sim/_engine``) and the pure-Python reference (``sim.reference``)
implement the same model (sim/MODEL.md) and are tested to agree exactly.
"""

from ._binding import EngineMissing
from .api import simulate, stats_dataframe
from .config import ConfigError, CpuConfig, list_presets, load_cpu, parse_cpu, preset_names

__all__ = [
    "ConfigError",
    "CpuConfig",
    "EngineMissing",
    "list_presets",
    "load_cpu",
    "parse_cpu",
    "preset_names",
    "simulate",
    "stats_dataframe",
]
