"""Shared fixtures: the c_ref library and the variant checker (the Hypothesis profiles are
registered in model_helpers.py)."""

from __future__ import annotations

import pytest
from model_helpers import scale

from kvsim.model import cref_binding as cref
from kvsim.model.harness import assert_variant_equivalent


@pytest.fixture(scope="session")
def cref_lib() -> str:
    """Path of libkvsim_cref.so (LibraryMissing, naming every path tried, fails the test)."""
    return str(cref.library_path())


@pytest.fixture
def check_variant(cref_lib: str):
    """``check_variant(variant, options="", **kw)``: assert a c_ref variant equals naive
    execution (and the model) under the lockstep machine; see model/README.md."""

    def run(variant, options: str = "", **kw):
        kw.setdefault("max_examples", scale(30))
        return assert_variant_equivalent(variant, options, **kw)

    return run
