"""Fixtures for the sim tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import GOLDEN


@pytest.fixture
def golden_dir() -> Path:
    assert (GOLDEN / "small_mixed_trace.din").exists(), f"golden files missing under {GOLDEN}"
    return GOLDEN
