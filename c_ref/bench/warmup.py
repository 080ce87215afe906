"""Old spelling of the warm-up convergence study, kept for one release: the study is
:mod:`kvsim.experiments.warmup_convergence` (``python -m
kvsim.experiments.warmup_convergence``, same options); this script runs it."""

import sys

from kvsim.experiments.warmup_convergence import main

if __name__ == "__main__":
    sys.exit(main(prog="c_ref/bench/warmup.py"))
