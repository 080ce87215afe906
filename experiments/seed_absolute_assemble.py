"""``python -m kvsim.experiments.seed_absolute_assemble DIR [--publish]``: the seed_absolute
tables assembled again from the cells of ``kvsim experiment run seed_absolute -o DIR`` with the
current code and ``results/scale.json``, no cell recomputed
(:func:`kvsim.experiments.seed_absolute.reassemble`). A module of its own: the study's module
registers the experiment when imported, so it cannot also run as ``__main__``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from kvsim.experiments import seed_absolute

    ap = argparse.ArgumentParser(prog="python -m kvsim.experiments.seed_absolute_assemble",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("directory", type=Path)
    ap.add_argument("--publish", action="store_true",
                    help="also copy seed_absolute.json and its plot to results/experiments/")
    ap.add_argument("--scale-until", default=None, metavar="DATE",
                    help="read results/scale.json's rows written up to this UTC date (ISO), "
                         "those of the cells' model (default: up to the newest cell)")
    a = ap.parse_args(argv)
    try:
        print(seed_absolute.reassemble(a.directory, a.publish, a.scale_until))
    except (OSError, ValueError) as exc:
        print(f"seed_absolute_assemble: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
