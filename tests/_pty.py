"""Run the real ``advisor`` command with its stdout on a pseudo-terminal,
as a user's terminal would show it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def advisor_on_pty(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 300,
                   stderr_too: bool = False) -> tuple[int, str, str]:
    """``python -m advisor ARGS`` with stdout on a pty -> (exit code, what
    the terminal received, stderr); with ``stderr_too`` stderr goes to the
    same pty (and "" is returned for it)."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "advisor", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=slave if stderr_too else subprocess.PIPE, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the command closed the pty
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace"), (err or b"").decode("utf-8", "replace")
