"""Helpers shared by the model tests: the Hypothesis profiles and the example-count scale
(imported by name: pytest puts each tests folder on the path)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, suppress_health_check=list(HealthCheck), print_blob=True
)
settings.register_profile(
    "slow", max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck),
    print_blob=True,
)
settings.load_profile(os.environ.get("KVSIM_HYPOTHESIS_PROFILE", "default"))

SLOW = os.environ.get("KVSIM_HYPOTHESIS_PROFILE") == "slow"


FACTOR = float(os.environ.get("KVSIM_EXAMPLES_FACTOR", "1"))


def scale(n: int) -> int:
    """Example count for the active profile (x20 under the slow profile), times
    ``$KVSIM_EXAMPLES_FACTOR`` (the ASan re-run uses a fraction)."""
    return max(1, int(n * (20 if SLOW else 1) * FACTOR))
