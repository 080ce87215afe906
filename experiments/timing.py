"""The statistics of native timings under their old name: :mod:`kvsim.stats` is the module
(below every layer, so the simulator's and the benchmarks' native comparisons use it too,
and "timing" keeps one meaning: the engine's out-of-order model, sim/_engine/timing.h).
This name is the same module object."""

import sys

from kvsim import stats

sys.modules[__name__] = stats
