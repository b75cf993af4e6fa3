"""A rank of a gloo job can abort at interpreter exit after its training has
finished and its trace is written ("terminate called without an active
exception", SIGABRT), so torchrun or mp.spawn fails the job. It is a race in
PyTorch's teardown, not something ``advisor run`` does (it reports the job's
exit code, as it must): when an object the script keeps to the end (a DDP
module, a ZeroRedundancyOptimizer) holds the process group past
``destroy_process_group()``, the group's run-loop thread frees its last
finished work during ``Py_Finalize``, and freeing the tensors that work holds
takes the GIL of a dying interpreter (gdb: ``AsyncWork::~AsyncWork`` ->
``decref_pyobject`` -> ``take_gil`` -> ``pthread_exit`` -> ``std::terminate``).
A script that broadcast every parameter each step and kept its DDP module
aborted so in 8 of 20 plain torchrun runs, and in 0 of 20 once it deleted
the module and optimizer before ``destroy_process_group()``: the test
scripts here do that. Tests that check a *successful* multi-process run
still re-run a job that aborts so once; any other failure, or the same abort
twice, fails the test."""

from __future__ import annotations

import json
import os
import subprocess

SIGNATURE = "terminate called without an active exception"


def run_twice_on_teardown_abort(run, exit_code, stderr):
    """``run()``, once more when its result failed by the exit-time abort;
    ``exit_code(result)`` and ``stderr(result)`` read the result."""
    result = run()
    if exit_code(result) != 0 and SIGNATURE in stderr(result):
        result = run()
    return result


def advisor_run_report(argv: list[str], out, steps: int, cwd, env: dict | None = None, timeout: int = 300) -> dict:
    """Run ``argv`` (an ``advisor run ... -o out`` command line) to success,
    re-running once on the exit-time abort, and return its report.json
    after checking that it profiled ``steps`` steps."""
    result = run_twice_on_teardown_abort(
        lambda: subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                               env=dict(os.environ, **(env or {}))),
        lambda r: r.returncode, lambda r: r.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["steps_found"] == steps
    return report
