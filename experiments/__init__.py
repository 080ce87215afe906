"""kvsim experiments: the `kvsim` CLI, seed-table studies and sweeps.

Experiments sit at the end of the data flow (c_ref -> traces -> sim -> experiments): they run
c_ref natively or traced, simulate the traces on CPU presets and write result tables and plots
to ``experiments/results/``. They contain no simulator logic.
"""

__all__ = ["cells", "cref", "framework", "pipeline_demo", "report", "runner", "studies"]
