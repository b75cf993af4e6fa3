"""A training script run under ``advisor run`` for a real-run test: the
command line and environment those tests share (one thread per process,
strict mode), on top of :func:`tests.e2e._teardown.advisor_run_report`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.e2e._teardown import advisor_run_report

#: Mark for a test that profiles a PyTorch script (module-level importorskip
#: would also skip a file's tests that need no torch).
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch is not installed (pip install torch==2.13.0)")

#: Environment of every profiled script: one compute thread per process (the
#: 2-core machines run two ranks or a test beside another), strict checks.
ENV = {"OMP_NUM_THREADS": "1", "ADVISOR_STRICT": "1"}


def profiled(tmp_path: Path, script: str, *args, steps: int, warmup: int, env: dict | None = None,
             name: str = "train_loop.py", timeout: int = 300, ranks: int = 1,
             options: tuple[str, ...] = (), alone: bool = False) -> tuple[dict, Path]:
    """Write ``script`` to ``tmp_path / name``, run it with ``args`` under
    ``advisor run --steps steps --warmup warmup`` and return (report.json,
    the output folder); fails unless the run succeeds with ``steps`` steps.
    ``ranks`` above 1: the script runs under ``torch.distributed.run`` with
    that many processes (a gloo job on this host). ``options``: more
    ``advisor run`` options (``--stacks``, ``--memory``). ``alone``: the run
    has the machine to itself (``tests/_machine.py``), for a test that
    compares its step time with another run's."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / name
    path.write_text(script)
    out = tmp_path / "out"
    launch = [sys.executable, str(path)] if ranks == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks), str(path)]
    argv = [sys.executable, "-m", "advisor", "run", "--steps", str(steps), "--warmup", str(warmup), "-o", str(out),
            "--no-color", *options, "--", *launch, *map(str, args)]
    return advisor_run_report(argv, out, steps, cwd=tmp_path, env={**ENV, **(env or {})}, timeout=timeout,
                              alone=alone), out


def value(report: dict, metric: str):
    """A metric's value in a report.json."""
    return report["metrics"][metric]["value"]
