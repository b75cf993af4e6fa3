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


CRASHING = '''
import os, signal, sys
import torch
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
how = sys.argv[1]
for step in range(100):
    loss = model(torch.randn(16, 8)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    if step == 6:
        if how == "raise":
            raise RuntimeError("boom at step 6")
        os.kill(os.getpid(), signal.SIGTERM)
'''


@pytest.mark.parametrize("how,code", [("raise", 1), ("signal", 128 + 15)])
def test_crash_or_signal_leaves_a_partial_report(tmp_path, how, code):
    """A job that dies mid-window still gets a report of the steps captured,
    the job's own exit code, and no process left behind."""
    script = tmp_path / "crashy.py"
    script.write_text(CRASHING)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "advisor", "run", "--steps", "10", "--warmup", "1", "-o", str(out), "--no-color",
         str(script), how],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert result.returncode == code, result.stderr[-2000:]
    assert "Traceback" not in result.stdout
    report = json.loads((out / "report.json").read_text())
    assert 1 <= report["run"]["steps_found"] < 10  # the window was cut short
    assert "step.time_ms" in report["metrics"]
    leftovers = subprocess.run(["pgrep", "-f", str(script)], capture_output=True, text=True)
    assert leftovers.stdout.strip() == ""


def test_a_job_that_fails_before_its_first_step_ends_on_its_own_exit(tmp_path):
    """Nothing was traced because the job failed: the last line says so and
    advisor ends with the job's exit code, not with an error about an empty
    trace folder."""
    script = tmp_path / "broken.py"
    script.write_text("import sys\nprint('cannot open the dataset', file=sys.stderr)\nsys.exit(3)\n")
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "advisor", "run", "-o", str(out), "--no-color", str(script)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert result.returncode == 3, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert "cannot open the dataset" in result.stderr
    assert lines[-1] == ("advisor: error: nothing to report: the training command exited with code 3 before any "
                         "trace was written (its output above says why)")
    assert "no profiler output found" not in result.stderr and "Traceback" not in result.stderr
    assert not (out / "report.json").exists()


def test_a_script_without_a_training_loop_ends_on_one_line(tmp_path):
    """A script that never steps an optimizer is not profiled: the note says
    why, the last line says there is nothing to report, exit code 2."""
    script = tmp_path / "infer.py"
    script.write_text("print('inference only')\n")
    result = subprocess.run(
        [sys.executable, "-m", "advisor", "run", "-o", str(tmp_path / "out"), "--no-color", str(script)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert "no optimizer step was seen" in lines[-2]
    assert lines[-1] == "advisor: error: nothing to report: the command wrote no trace (see the note above)"
