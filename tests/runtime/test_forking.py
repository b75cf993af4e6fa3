"""runtime.forking.beside in a fresh interpreter (no thread left by other
tests): the function runs in another process, its result and its
exception come back, and a process that dies has the function run here."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import os
from advisor.runtime import forking

assert forking.can_fork()
assert forking.beside(os.getpid)() != os.getpid()
assert forking.beside(divmod, 7, 2)() == (3, 1)
try:
    forking.beside(divmod, 1, 0)()
except ZeroDivisionError:
    pass
else:
    raise AssertionError("the error was not raised again")
forking._run_and_send = lambda *args: os._exit(1)
assert forking.beside(os.getpid)() == os.getpid()
print("ok")
"""


def test_beside_forks_returns_raises_and_falls_back():
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
