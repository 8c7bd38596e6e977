"""Shared fixtures: every filter test runs on both layouts."""

from __future__ import annotations

import numpy as np
import pytest

LAYOUTS = ["blocked", "standard"]


@pytest.fixture(params=LAYOUTS)
def layout(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def rng() -> np.random.Generator:
    """A fixed-seed generator: statistical tests are repeatable."""
    return np.random.default_rng(20261121)
