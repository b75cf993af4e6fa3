"""The suite's machine lock (tests/_machine.py): a multi-rank run waits
for the test another worker is in, and the next test waits for the run."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import _machine

TESTS = Path(__file__).resolve().parent

#: A second worker: holds the machine alone, says so, then waits for "release".
_EXCLUSIVE = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import _machine
flag = Path(sys.argv[2])
with _machine.whole_machine():
    flag.write_text("held")
    while not (flag.parent / "release").exists():
        time.sleep(0.02)
"""


def _wait_for(path: Path, timeout: float = 60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists():
            return True
        time.sleep(0.02)
    return False


def test_an_exclusive_run_waits_for_a_shared_test_and_the_next_test_waits_for_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", f"lock-test-{uuid.uuid4().hex}")
    flag = tmp_path / "flag"
    with _machine.shared():  # this worker is in a test
        other = subprocess.Popen([sys.executable, "-c", _EXCLUSIVE, str(TESTS), str(flag)])
        try:
            time.sleep(1.0)
            assert not flag.exists()  # the run waits for the test to end
        except BaseException:
            other.kill()
            raise
    try:
        assert _wait_for(flag)  # the test ended: the run has the machine
        started = threading.Event()
        waits = []

        def next_test():
            with _machine.shared() as waited:
                waits.append(waited)
                started.set()

        waiting = threading.Thread(target=next_test, daemon=True)
        waiting.start()
        assert not started.wait(1.0)  # the next test waits for the run
        (tmp_path / "release").write_text("")
        assert started.wait(60)  # and starts once it has ended
        assert waits[0] >= 1.0  # the wait it reports, which is not the test's own time (tests/_slow.py)
        assert other.wait(timeout=60) == 0
    finally:
        other.kill()
        other.wait()


def test_without_xdist_the_locks_do_nothing(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_TESTRUNUID", raising=False)
    with _machine.shared() as waited, _machine.whole_machine():
        assert waited == 0.0
