"""Run the real ``advisor`` command with its stdout on a pseudo-terminal,
as a user's terminal would show it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def advisor_on_pty(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> tuple[int, str, str]:
    """``python -m advisor ARGS`` with stdout on a pty -> (exit code, what
    the terminal received, stderr)."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "advisor", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=subprocess.PIPE, env=env)
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
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace"), err.decode("utf-8", "replace")
