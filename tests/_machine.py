"""The whole machine for a multi-rank training run.

Under ``-n 2`` the suite's two worker processes share the machine's two
cores. A multi-rank run (two to four gloo training processes under
``advisor run``) asserts which rank is slow, or that none is; with another
test's process on the cores, the OS descheduling one rank for a few
milliseconds in some steps made a healthy rank slow, or hid a slow one:
4 failures in 6 full-suite runs, each test passing alone.

So every test holds the machine lock shared while it runs (the autouse
fixture in conftest), and a multi-rank run takes it exclusively for the
run (:func:`whole_machine`): the other worker finishes the test it is in
and waits until the run ends. A turnstile lock keeps a pending exclusive
holder from being passed by shared ones. Without xdist (one process) the
locks do nothing. Locks are ``flock`` on files named after the xdist run:
released by the kernel if a worker dies, and explicitly (``LOCK_UN``)
otherwise, whatever processes the test forked still hold the files open.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: A test's user property: seconds its setup waited for the machine (conftest;
#: tests/_slow.py leaves the wait out of the test's time).
MACHINE_WAIT = "machine_wait_s"
#: The lock file this worker holds shared during a test, None between tests.
_held: int | None = None


def _open(name: str) -> int | None:
    """A descriptor of this xdist run's lock file ``name``; None without xdist."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:
        return None
    return os.open(Path(tempfile.gettempdir()) / f"advisor-tests-{run}.{name}", os.O_RDWR | os.O_CREAT, 0o600)


def _release(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def _take_shared(room: int) -> None:
    """Shared hold of ``room``, behind any exclusive holder already waiting."""
    turnstile = _open("turnstile")
    fcntl.flock(turnstile, fcntl.LOCK_EX)
    try:
        fcntl.flock(room, fcntl.LOCK_SH)
    finally:
        _release(turnstile)


@contextmanager
def shared() -> Iterator[float]:
    """Hold the machine shared for one test; gives the seconds it waited
    for a multi-rank run to end."""
    global _held
    room = _open("room")
    if room is None:
        yield 0.0
        return
    start = time.monotonic()
    _take_shared(room)
    previous, _held = _held, room
    try:
        yield time.monotonic() - start
    finally:
        _held = previous
        _release(room)


@contextmanager
def whole_machine() -> Iterator[None]:
    """Hold the machine alone: no other test runs until this ends. The
    test's shared hold is given up first (two workers each waiting for the
    other's shared hold would wait forever) and taken again after."""
    room = _open("room")
    if room is None:
        yield
        return
    if _held is not None:
        fcntl.flock(_held, fcntl.LOCK_UN)
    turnstile = _open("turnstile")
    fcntl.flock(turnstile, fcntl.LOCK_EX)
    try:
        fcntl.flock(room, fcntl.LOCK_EX)
        try:
            yield
        finally:
            _release(room)
    finally:
        _release(turnstile)
        if _held is not None:
            _take_shared(_held)
