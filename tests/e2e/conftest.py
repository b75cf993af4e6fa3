"""End-to-end tests run in strict mode (tests/_strict.py)."""

from __future__ import annotations

import pytest
from _strict import strict


@pytest.fixture(scope="module", autouse=True)
def _strict_mode():
    with strict():
        yield
