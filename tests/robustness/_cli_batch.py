"""Run many ``advisor`` command lines in one process, each in a fork.

Usage: ``python _cli_batch.py JOBS.json`` where JOBS.json is a list of
``{"argv": [...], "cwd": ..., "out": PREFIX}``. For each job a forked child
runs ``advisor.cli.main(argv)`` exactly as ``python -m advisor`` would --
stdout/stderr to ``PREFIX.stdout``/``PREFIX.stderr``, an uncaught exception
printed as a traceback with exit code 1 -- and the exit code goes to
``PREFIX.rc``. The heavy imports (pandas, scikit-learn, CEL) are paid once,
which keeps a corpus of dozens of CLI runs within the test-time budget on a
small machine. The network guard of the test suite is installed first, so
the CLI itself runs with sockets blocked.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for _netguard

import _netguard  # noqa: E402


def _child(job: dict) -> int:
    from advisor.cli import main

    signal.alarm(int(job.get("timeout", 60)))  # a hang dies with SIGALRM (rc -14)
    os.chdir(job["cwd"])
    for fd, suffix in ((1, ".stdout"), (2, ".stderr")):
        f = os.open(job["out"] + suffix, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(f, fd)
        os.close(f)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False, buffering=1)
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False, buffering=1)
    env = job.get("env") or {}
    os.environ.update(env)
    try:
        main(job["argv"])
        code = 0
    except SystemExit as exc:  # what the interpreter does with sys.exit(...)
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 -- an escaped exception: the interpreter prints it
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def main() -> None:
    jobs = json.loads(Path(sys.argv[1]).read_text())
    parallel = int(os.environ.get("ADVISOR_BATCH_PARALLEL", "2"))
    _netguard.block()
    import advisor.cli  # noqa: F401
    import advisor.pipeline  # noqa: F401  -- warm imports, shared by every fork
    import advisor.reports  # noqa: F401
    import advisor.reports.terminal  # noqa: F401

    running: dict[int, dict] = {}
    pending = list(jobs)
    while pending or running:
        while pending and len(running) < parallel:
            job = pending.pop(0)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    code = _child(job)
                finally:
                    os._exit(code)
            running[pid] = job
        pid, status = os.wait()
        job = running.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        Path(job["out"] + ".rc").write_text(str(code))


if __name__ == "__main__":
    main()
