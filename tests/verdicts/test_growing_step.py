"""growing-step on real CPU training loops (``advisor run``, PyTorch's
profiler, OMP_NUM_THREADS=1).

A loop that gathers its predictions with ``torch.cat`` into a growing tensor
copies everything gathered so far again every step: measured on a loaded
2-core host, its profiled steps took 17, 15, 31, 43, 52 and 55 ms, aten::cat
65% of the operator time, and the run used to be called clean. A loop whose
steps vary without a trend (the batch size changes), and one with a slow
evaluation step every third step (step-outlier's case) accumulate nothing.
docs/accuracy.md has the runs no test here repeats: a Python list that grows
and is walked every step (the same shape outside the operators) and a host
that gets busier step after step (whether spawned busy processes slow the
loop depends on the machine's cores).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tests._profiled import needs_torch, profiled, value
from advisor.collectors import load_profile
from advisor.collectors.kineto import op_trend
from advisor.metrics import evaluate, trend
from advisor.metrics.steps_view import steady_steps
from advisor.pipeline import analyze_profile

SCRIPT = """
import sys, torch
from torch import nn

torch.manual_seed(0)
kind, steps = sys.argv[1], int(sys.argv[2])
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512),
                      nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
lossf = nn.CrossEntropyLoss()
x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))
sizes = torch.randint(0, 3, (steps,)).tolist()
seen = torch.empty(0, 10)
for step in range(steps):
    xb, yb = x, y
    if kind == "jitter":  # the batch size varies from step to step, without a trend
        n = (32, 128, 256)[sizes[step]]
        xb, yb = x.repeat(2, 1)[:n], y.repeat(2)[:n]
    opt.zero_grad()
    out = model(xb)
    lossf(out, yb).backward()
    opt.step()
    if kind == "cat_loop":  # predictions gathered with torch.cat into a growing tensor
        for _ in range(40):
            seen = torch.cat([seen, out.detach()])
    elif kind == "periodic" and step % 3 == 2:  # an evaluation pass every third step
        with torch.no_grad():
            for _ in range(6):
                model(x.repeat(4, 1))
"""
RULE = "growing-step"
SERIOUS = {"medium", "high", "critical"}


def _run(tmp_path, kind: str, steps: int):
    return profiled(tmp_path, SCRIPT, kind, steps + 4, steps=steps, warmup=3, name="train_loop.py")


def _finding(report: dict) -> dict:
    found = {f["rule"]: f for f in report["findings"]}
    trend_values = ", ".join(f"{k}={v['value']}" for k, v in report["metrics"].items() if k.startswith("trend."))
    assert RULE in found, f"findings {list(found)}; {trend_values}"
    return found[RULE]


@needs_torch
def test_a_tensor_concatenated_every_step_is_named(tmp_path):
    # 16 steps: beside other profiled runs on the 2 cores, 12 left aten::cat's order rising at p = 0.02 once,
    # not enough for a part picked as the fastest riser of 4 (p times 4); 16 gave 2e-5 to 2e-6 in 3 of 3
    report, out = _run(tmp_path, "cat_loop", steps=16)
    f = _finding(report)
    assert f["severity"] in SERIOUS and report["verdict"]["status"] == "problems"
    assert value(report, "trend.rising_part") == "aten::cat" and "aten::cat" in f["message"]
    # the gain is the window's excess over its first steps, no more than aten::cat's own time
    assert f["estimated_gain_ms"] <= value(report, "trend.rising_part_ms") + 0.001
    assert f["estimated_gain_ms"] <= value(report, "trend.step_excess_ms") + 0.001
    assert "torch.cat(outs)" in f["fix"]["code"]

    # the trace: aten::cat's calls are the same every step (40), its time grows; a few names kept
    profile = load_profile(out / "trace")
    rows = profile.op_trend
    assert rows.loc[rows["kept_for"] == op_trend.RISE, "name"].nunique() <= op_trend.KEPT_NAMES
    cat = rows[rows["name"] == "aten::cat"].sort_values("step")
    assert (cat["calls"] == 40).all() and len(cat) == len(profile.steps)
    assert cat["time_us"].iloc[-1] > 2 * cat["time_us"].iloc[0]

    # the metrics from the trace's steady steps, against SciPy's tests of the same series
    d = steady_steps(profile).sort_values("step")
    steps, ms = d["step"].to_numpy(float), d["duration_us"].to_numpy(float) / 1000
    assert value(report, "trend.step_rise_p") == pytest.approx(  # report.json keeps 6 decimals
        stats.kendalltau(steps, ms, alternative="greater", method="exact").pvalue, rel=1e-4, abs=1e-6)
    assert value(report, "trend.step_slope_ms") == pytest.approx(stats.theilslopes(ms, steps).slope, rel=1e-4)
    first = np.median(ms[:max(1, int(ms.size * trend.FIRST_SHARE))])
    assert value(report, "trend.step_excess_ms") == pytest.approx(ms.mean() - first, rel=1e-4)

    # three of those steps cannot reach the 5% level in any order: not evaluated, with the reason
    few = load_profile(out / "trace")
    few.steps = few.steps[few.steps["step"] >= few.steps["step"].max() - 2].reset_index(drop=True)
    metrics, skipped = evaluate(few)
    assert "trend.step_rise_p" not in metrics and "growing-step" not in {f.rule for f in
                                                                         analyze_profile(few).findings}
    reason = {s.what: s.reason for s in skipped}["metric trend.step_rise_p"]
    assert "needs 4" in reason


@needs_torch
@pytest.mark.parametrize("kind", ["healthy", "jitter", "periodic"])
def test_loops_that_keep_nothing_across_steps_stay_quiet(tmp_path, kind):
    report, _ = _run(tmp_path, kind, steps=8)
    assert RULE not in {f["rule"] for f in report["findings"]}
    # the test ran: enough steady steps for it to reach its level
    assert "trend.step_rise_p" in report["metrics"]
