"""Fixtures for the gate tests: real CPU training runs of examples/train_mlp.py.

One set of runs serves every live test, made once per test run however
many xdist workers ask for it (``tests/_once.py``): ``HEALTHY`` runs of the
same healthy script and one input-bound run (``--slow-data``). Children
run with ``OMP_NUM_THREADS=1``: on a 2-core host shared with other jobs,
intra-op threads only fight each other and the neighbours (5x noisier
steps); a CI runner should pin threads the same way.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from _once import once

from advisor.collectors.live.backend import importable
from tests.regression.gate_runs import Run, Runs

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "train_mlp.py"
HEALTHY = 4
WORKLOAD = ["--hidden", "512", "--batch-size", "64", "--steps", "30"]
SLOW_DATA = "0.001"  # seconds per sample: 64 ms of loading per 64-sample batch
RECORD_STEPS, WARMUP = 24, 2

needs_torch = pytest.mark.skipif(not importable("torch"),
                                 reason="torch is not importable here (pip install torch==2.13.0)")


@pytest.fixture(scope="session")
def live_runs(tmp_path_factory) -> Runs:
    if not importable("torch"):
        pytest.skip("torch is not importable here (pip install torch==2.13.0)")
    return once(tmp_path_factory, "gate-runs", _run_all)


def _run_all(root: Path) -> Runs:
    """The runs, in ``root`` (``live_runs``: made once per test run, ``_once``)."""
    from advisor.collectors.live.runner import run_profiled
    from advisor.pipeline import analyze

    old = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    started = time.monotonic()

    def one(name: str, extra: list[str]) -> Run:
        result = run_profiled([str(SCRIPT), *WORKLOAD, *extra], root / name, steps=RECORD_STEPS,
                              warmup=WARMUP, timeout=300)
        assert result.exit_code == 0 and result.steps_captured == RECORD_STEPS, result.notes
        report = analyze(result.trace_dir, jobs=1)
        path = root / f"{name}.report.json"
        path.write_text(report.model_dump_json(), encoding="utf-8")
        return Run(name, result.trace_dir, path)

    try:
        healthy = [one(f"healthy{i}", []) for i in range(HEALTHY)]
        slow = one("slow", ["--slow-data", SLOW_DATA])
    finally:
        if old is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = old
    return Runs(healthy, slow, time.monotonic() - started)
