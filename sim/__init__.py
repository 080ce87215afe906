"""kvsim's cache-hierarchy simulator: caches, TLBs, DRAM and out-of-order timing.

    from kvsim import sim, traces
    cpu = sim.load_cpu("graviton3")                   # or "local", or a path to a .toml
    result = sim.simulate("run.kvt", cpu)             # JSON-ready dict; or a traces.open reader
    results = sim.simulate_many("run.kvt", ["graviton3", "epyc-7713"])  # one pass, many CPUs
    df = sim.stats_dataframe(result)                  # level x tag x kind
    frames = sim.dataframes(result)                   # levels, by_tag, timing, stalls, ...
    res = sim.simulate(records, cpu, timeline=(1000, 64))  # + per-record times of a window

The compiled engine (``sim/_engine``) and the pure-Python reference (``sim.reference``)
implement the same model (sim/MODEL.md) and are tested to agree exactly.
"""

from ._binding import EngineMissing
from .api import concat_dataframes, dataframes, simulate, simulate_many, stats_dataframe
from .config import ConfigError, CpuConfig, list_presets, load_cpu, parse_cpu, preset_names

__all__ = [
    "ConfigError",
    "concat_dataframes",
    "CpuConfig",
    "EngineMissing",
    "dataframes",
    "list_presets",
    "load_cpu",
    "parse_cpu",
    "preset_names",
    "simulate",
    "simulate_many",
    "stats_dataframe",
]
