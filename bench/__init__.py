"""kvsim's benchmarks: one driver (``python -m bench``, from the repository root) for
throughput, instruction counts (callgrind) and A/B runs. Not part of the kvsim package
(the wheel does not ship it): what a benchmark measures is never an input of a simulated
result (kvsim.experiments.cells.cell_inputs). See bench/README.md."""
