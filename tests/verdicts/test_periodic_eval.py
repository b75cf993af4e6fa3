"""A real CPU training loop that evaluates every other step inside the
profiled window (``advisor run``, PyTorch's profiler, OMP_NUM_THREADS=1).

Half of the steps then carry an evaluation pass (8 forward passes of a
512-row batch under ``torch.no_grad()``: 90-170 ms beside 22-58 ms training
steps, measured on a loaded 2-core host). That is half of the window, more
than a robust fit can leave out: the fit alone flagged 4 of those 7 steady
steps and measured their excess over a median that sat between the two
kinds of step. step-outlier names every one of them, their period, and the
time they add over a training step.
"""

from __future__ import annotations

import pytest

from tests._profiled import profiled

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

SCRIPT = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
loss_fn = nn.CrossEntropyLoss()
x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))
held_out = torch.randn(512, 256)
for step in range(14):
    opt.zero_grad(set_to_none=True)
    loss_fn(model(x), y).backward()
    opt.step()
    if step % 2 == 1:                      # evaluate every other step
        model.eval()
        with torch.no_grad():
            for _ in range(8):
                model(held_out)
        model.train()
"""


def test_an_evaluation_every_other_step_is_named_in_every_step_it_runs(tmp_path):
    report, _ = profiled(tmp_path, SCRIPT, steps=10, warmup=2, name="train_eval.py")
    metrics = {k: v["value"] for k, v in report["metrics"].items()}
    flagged = metrics["anomaly.step_outliers"]
    assert metrics["anomaly.step_outlier_period"] == 2, flagged
    # every steady step of the evaluating phase is flagged (the first step is not steady)
    steps = [row["step"] for row in report["tables"]["step_series"]][1:]
    assert flagged == [s for s in steps if s % 2 == flagged[0] % 2], (flagged, steps)
    found = {f["rule"]: f for f in report["findings"]}
    assert "step-outlier" in found and found["step-outlier"]["severity"] in ("high", "critical"), list(found)
    assert f"{len(flagged)} of the profiled steps" in found["step-outlier"]["message"]
    # the excess is over the training steps: at most what the slow steps take beyond the fastest training step
    durations = {row["step"]: row["step_ms"] for row in report["tables"]["step_series"]}
    training = [durations[s] for s in steps if s not in flagged]
    most = sum(durations[s] - min(training) for s in flagged) / len(steps)
    assert 0 < metrics["anomaly.step_outlier_excess_ms"] <= most + 1e-6
    assert found["step-outlier"]["estimated_gain_ms"] <= found["step-outlier"]["time_at_stake_ms"]
