"""A rank of a gloo job can abort at interpreter exit after its training has
finished and its trace is written ("terminate called without an active
exception", SIGABRT), so torchrun or mp.spawn fails the job. It is a race in
PyTorch's teardown, not something ``advisor run`` does (it reports the job's
exit code, as it must): while the process group lives on past
``destroy_process_group()`` (held from C++: a DDP reducer, the autograd
graph of the last step), its run-loop thread frees its last finished work
during ``Py_Finalize``, and freeing the tensors that work holds takes the
GIL of a dying interpreter (gdb: ``AsyncWork::~AsyncWork`` ->
``decref_pyobject`` -> ``take_gil`` -> ``pthread_exit`` -> ``std::terminate``).
A script broadcasting every parameter each step aborted so in 8 of 20 plain
torchrun runs; a script reducing 17 values a step, in 1 of 20 on a quiet
host and twice in a row beside the rest of the suite.

The multi-process scripts of the tests end with :data:`EXIT_WITHOUT_TEARDOWN`
(``examples/train_ddp.py`` with its ``exit_without_teardown``): the exit
handlers run as at any exit (``advisor run``'s flush and status among
them), then the process ends without finalizing the interpreter, so
there is no teardown to race (0 aborts in 20 runs of the reduce script
under ``advisor run``). Tests that check a *successful* multi-process run
still re-run a job that aborts so once; any other failure, or the same
abort twice, fails the test."""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import nullcontext

from _machine import whole_machine

SIGNATURE = "terminate called without an active exception"
#: The last lines of a test's multi-process script (module doc).
EXIT_WITHOUT_TEARDOWN = """
import atexit as _atexit, os as _os, sys as _sys
_atexit._run_exitfuncs()
_sys.stdout.flush()
_sys.stderr.flush()
_os._exit(0)
"""


def run_twice_on_teardown_abort(run, exit_code, stderr):
    """``run()``, once more when its result failed by the exit-time abort;
    ``exit_code(result)`` and ``stderr(result)`` read the result."""
    result = run()
    if exit_code(result) != 0 and SIGNATURE in stderr(result):
        result = run()
    return result


def advisor_run_report(argv: list[str], out, steps: int, cwd, env: dict | None = None, timeout: int = 300,
                       alone: bool = False) -> dict:
    """Run ``argv`` (an ``advisor run ... -o out`` command line) to success,
    re-running once on the exit-time abort, and return its report.json
    after checking that it profiled ``steps`` steps. A multi-rank run
    (``--nproc_per_node``), or one the test says needs the machine
    (``alone``), has it to itself (tests/_machine.py)."""
    with whole_machine() if alone or "--nproc_per_node" in argv else nullcontext():
        result = run_twice_on_teardown_abort(
            lambda: subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                                   env=dict(os.environ, **(env or {}))),
            lambda r: r.returncode, lambda r: r.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["steps_found"] == steps
    return report
