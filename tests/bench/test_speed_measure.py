"""bench.speed's runner: a tool that leaves processes behind, is killed, or
runs too long is reported, and nothing of it is left running."""

from __future__ import annotations

import subprocess
import sys

from bench.speed import measure

MARK = "advisor-bench-test-orphan"
#: A process that sleeps for a minute, findable by ``MARK`` in its command line.
SLEEPER = f"{sys.executable} -c 'import time; time.sleep(60)' {MARK}"


def _left(mark: str) -> bool:
    return subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode == 0


def test_a_tool_that_leaves_a_child_holding_its_output_is_measured_and_cleaned_up(tmp_path):
    # the child keeps stdout/stderr open, as a killed msprof-analyze's worker did
    m = measure(["sh", "-c", f"{SLEEPER} & sleep 1; echo done"], tmp_path, timeout=30)
    assert m["ok"] and m["wall"] < 30 and m["rss"] > 0
    assert not _left(MARK)


def test_a_killed_tool_and_a_slow_one_are_reported(tmp_path):
    killed = measure(["sh", "-c", "kill -9 $$"], tmp_path)
    assert not killed["ok"] and "signal 9" in killed["note"]
    slow = measure(["sh", "-c", SLEEPER], tmp_path, timeout=2)
    assert not slow["ok"] and slow["note"] == "stopped after 2 s" and slow["wall"] < 30
    assert not _left(MARK)
