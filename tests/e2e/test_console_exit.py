"""The ``advisor`` command ends without the interpreter's teardown
(``cli.console_main``): exit handlers still run, everything written is
flushed, and the exit code is the command's."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import atexit, sys
from advisor.cli import console_main
atexit.register(lambda: print("exit handler ran", flush=True))
sys.argv = ["advisor", *sys.argv[1:]]
print("a line before", end="")  # left in the buffer: the exit must flush it
console_main()
"""


def _advisor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True, text=True, timeout=120)


def test_exit_handlers_run_output_is_flushed_and_the_code_kept(tmp_path):
    done = _advisor("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("a line before") and "advisor, version" in done.stdout
    assert done.stdout.rstrip().endswith("exit handler ran")
    done = _advisor("report", str(tmp_path / "missing"))
    assert done.returncode == 2 and "no such file or folder" in done.stderr
    assert "exit handler ran" in done.stdout
