"""pytest fixtures for traces tests (helpers live in helpers.py)."""

from __future__ import annotations

import pytest

from traces.tests.helpers import HEADER


@pytest.fixture
def header() -> dict:
    return dict(HEADER)
