"""Strict mode for tests on real data: the corpus tests (the ``corpus``
fixture) and the end-to-end tests (tests/e2e) run with ``ADVISOR_STRICT=1``,
which subprocesses inherit: Profiles are checked against their column schema
and a metric that raises fails the test instead of becoming a skipped metric."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest


@contextmanager
def strict() -> Iterator[None]:
    """``ADVISOR_STRICT=1`` while the block runs."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ADVISOR_STRICT", "1")
        yield
