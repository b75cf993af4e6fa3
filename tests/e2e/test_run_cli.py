"""`advisor run` end to end: a real CPU training run under the real PyTorch
profiler, analyzed into the same report as `advisor report`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")


def test_run_slow_dataloader_is_input_bound(examples, tmp_path):
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "advisor", "run", "--steps", "4", "--warmup", "2", "-o", str(out), "--no-color",
         str(examples / "train_mlp.py"), "--slow-data", "0.004", "--num-workers", "0", "--steps", "10"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["framework"] == "pytorch" and report["run"]["device"] == "cpu"
    assert report["run"]["steps_found"] == 4
    rules = [f["rule"] for f in report["findings"]]
    assert rules[0] == "input-bound", rules
    assert "num_workers=" in report["findings"][0]["fix"]["code"]
    assert report["metrics"]["step.data_wait_ratio"]["value"] > 0.5
    assert list((out / "trace").glob("*.pt.trace.json*"))
