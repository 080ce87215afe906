"""Shared fixtures: Hypothesis profiles, the c_ref library gate, the variant checker."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from model import cref
from model.harness import assert_variant_equivalent

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


@pytest.fixture(scope="session")
def cref_lib() -> str:
    """Path of libkvsim_cref.so; skips (with every path tried) only if it is not built."""
    try:
        return str(cref.library_path())
    except cref.LibraryMissing as e:
        pytest.skip(str(e))


@pytest.fixture
def check_variant(cref_lib: str):
    """``check_variant(variant, options="", **kw)``: assert a c_ref variant equals naive
    execution (and the model) under the lockstep machine; see model/README.md."""

    def run(variant, options: str = "", **kw):
        kw.setdefault("max_examples", scale(30))
        return assert_variant_equivalent(variant, options, **kw)

    return run
