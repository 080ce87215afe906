"""The suite's Hypothesis profiles, loaded before any test module is imported, so that every
``@settings`` in the tests inherits from the active one.

- ``ci`` (the default, what ``make test`` runs): derandomized, no example database. Each
  property test draws the same examples on every machine and every run, so the suite passes or
  fails for a reason; a counterexample found by exploration is kept as an ``@example``.
- ``explore`` (``make test-slow``): random examples from the seed that ``make test-slow``
  prints (``--hypothesis-seed``), so a failure there replays with the same seed.
- ``slow``: ``explore`` with twenty times the examples where a test sizes its example count
  by the profile (``model/tests/model_helpers.scale``).

``KVSIM_HYPOTHESIS_PROFILE`` chooses; pytest's ``--hypothesis-profile`` overrides it.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# No health check fails a test: they judge how examples are drawn (and too_slow, by the clock),
# not what the code does.
_COMMON = dict(deadline=None, print_blob=True, suppress_health_check=list(HealthCheck))

settings.register_profile("ci", derandomize=True, database=None, **_COMMON)
settings.register_profile("explore", derandomize=False, **_COMMON)
settings.register_profile("slow", derandomize=False, **_COMMON)
settings.load_profile(os.environ.get("KVSIM_HYPOTHESIS_PROFILE", "ci"))
