"""pytest fixtures for traces tests (shared helpers live in trace_helpers.py)."""

from __future__ import annotations

import pytest
from trace_helpers import HEADER


@pytest.fixture
def header() -> dict:
    return dict(HEADER)
