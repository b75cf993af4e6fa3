"""A module fixture's work done once per test run, however many xdist
workers run the module's tests: under ``-n 2`` the load scheduler gives
tests of one module to both workers, and each built the module's fixtures.

:func:`once` runs ``make`` in the first worker that asks, in a folder both
workers share (the parent of each worker's base temporary folder), and the
others wait for it and read its result back; a worker whose ``make`` failed
leaves nothing, and the next one that asks runs it again. Without xdist
the one process makes it, in its own base temporary folder.
"""

from __future__ import annotations

import fcntl
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from _machine import _release

T = TypeVar("T")


def once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], T]) -> T:
    """``make(folder)``'s result (picklable), made once per run (module doc)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # pytest-of-<user>/pytest-N: every worker's base temp lies in it
    lock = os.open(base / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = base / f"{name}.pickle"
        if done.exists():
            return pickle.loads(done.read_bytes())
        folder = base / name
        folder.mkdir(exist_ok=True)
        value = make(folder)
        done.write_bytes(pickle.dumps(value))
        return value
    finally:
        _release(lock)
