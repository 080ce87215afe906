"""Helpers shared by the model tests: the example-count scale (imported by name: pytest puts
each tests folder on the path). The Hypothesis profiles are the suite's, in the top-level
conftest.py."""

from __future__ import annotations

import os

SLOW = os.environ.get("KVSIM_HYPOTHESIS_PROFILE") == "slow"


FACTOR = float(os.environ.get("KVSIM_EXAMPLES_FACTOR", "1"))


def scale(n: int) -> int:
    """Example count for the active profile (x20 under the slow profile), times
    ``$KVSIM_EXAMPLES_FACTOR`` (the ASan re-run uses a fraction)."""
    return max(1, int(n * (20 if SLOW else 1) * FACTOR))
