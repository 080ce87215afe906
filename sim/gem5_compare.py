"""Old import path of the gem5 comparison, kept for one release: the study is
:mod:`kvsim.experiments.gem5_compare` (it traces with c_ref and writes a result file, so it
sits above the simulator); ``python -m kvsim.sim.gem5_compare`` still runs it, and this
name is the same module object."""

import sys

from kvsim.experiments import gem5_compare

if __name__ == "__main__":
    sys.exit(gem5_compare.main(prog="python -m kvsim.sim.gem5_compare"))
sys.modules[__name__] = gem5_compare
