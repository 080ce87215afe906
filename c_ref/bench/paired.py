"""Old spelling of the paired build comparison, kept for one release: it is the benchmark
suite ``paired`` of the repository's one driver (``python -m bench paired``, bench/paired.py,
same arguments); this script runs it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's bench/

from bench.paired import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(prog="c_ref/bench/paired.py"))
