"""Old spelling of the fidelity study, kept for one release: the study is
:mod:`kvsim.experiments.fidelity` (``python -m kvsim.experiments.fidelity``, same options);
this script runs it."""

import sys

from kvsim.experiments.fidelity import main

if __name__ == "__main__":
    sys.exit(main(prog="c_ref/bench/fidelity.py"))
