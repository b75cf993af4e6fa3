"""Run a training loop script under ``advisor run`` on the CPU
(OMP_NUM_THREADS=1, strict schema) and read its report: the real-run
verdict tests of CPU loops share it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def advisor_run(tmp_path: Path, script: Path, *args: str, steps: int = 5, warmup: int = 3) -> dict:
    """report.json of ``advisor run`` over ``python script *args``."""
    out = tmp_path / "out"
    env = dict(os.environ, OMP_NUM_THREADS="1", ADVISOR_STRICT="1")
    proc = subprocess.run(
        [sys.executable, "-m", "advisor", "run", "--steps", str(steps), "--warmup", str(warmup), "-o", str(out),
         "--no-color", "--", sys.executable, str(script), *args],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "report.json").read_text())


def value(report: dict, metric: str):
    """A metric's value in a report."""
    return report["metrics"][metric]["value"]


def write_script(tmp_path_factory, name: str, text: str) -> Path:
    """The loop's script written to a fresh folder (skips the test without torch)."""
    import pytest

    pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    path = tmp_path_factory.mktemp("loops") / name
    path.write_text(text)
    return path
