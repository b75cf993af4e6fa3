"""``advisor run`` leaves no process of the job behind.

A training script may leave processes running when it exits: a helper it
started in a session of its own (``setsid()``), or a daemon (fork, fork
again, ``setsid()``, the middle process exits). Either used to outlive
``advisor run``, which exited 0 with them still running. Now every process
of the job is found in advisor's process tree and stopped with it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rb_util import TINY_LOOP

from advisor.collectors.live.backend import importable

pytestmark = [
    pytest.mark.skipif(not importable("torch"), reason="torch is not importable here"),
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to see the processes"),
]

#: A tiny real training loop that leaves two processes behind when it ends.
SCRIPT = textwrap.dedent("""
    import os, subprocess, sys, time

    pids = []
    helper = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(300)"])
    pids.append(helper.pid)
    read, write = os.pipe()
    if os.fork() == 0:              # the daemon: fork, setsid, fork again, the middle one exits
        os.setsid()
        if os.fork() == 0:
            os.write(write, str(os.getpid()).encode())
            time.sleep(300)
        os._exit(0)
    pids.append(int(os.read(read, 32)))
    with open(sys.argv[1], "w") as fh:
        fh.write(" ".join(map(str, pids)))
""") + TINY_LOOP


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def test_processes_the_script_leaves_behind_are_stopped(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    pids_file = tmp_path / "pids"
    log = tmp_path / "stderr.txt"
    # output to a file, not a pipe: a process left behind holds a pipe open,
    # and reading it would wait for that process instead of for advisor
    with log.open("w") as err:
        result = subprocess.run([sys.executable, "-m", "advisor", "run", "--steps", "2", "--warmup", "1",
                                 "-o", str(tmp_path / "out"), "--no-color", "--", sys.executable, str(script),
                                 str(pids_file)], stdout=subprocess.DEVNULL, stderr=err, timeout=600, cwd=tmp_path)
    stderr = log.read_text()
    pids = [int(p) for p in pids_file.read_text().split()]
    try:
        assert result.returncode == 0, stderr
        assert "2 process(es) of the job outlived it" in stderr
        assert [pid for pid in pids if _running(pid)] == []
    finally:  # never leave them to the machine, whatever the outcome
        for pid in pids:
            subprocess.run(["kill", "-9", str(pid)], capture_output=True, check=False)
