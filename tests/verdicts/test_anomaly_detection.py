"""anomaly-detection on real CPU training loops (``advisor run``, PyTorch's
profiler, OMP_NUM_THREADS=1).

``torch.autograd.set_detect_anomaly(True)`` left on from debugging used to
be called clean. Measured on a 2-core host, a 5-layer MLP's step took
25.4 ms with it against 18.4 ms without; its profile holds the engine's
NaN check on every output of every backward node (``aten::isnan``,
``aten::_is_any_true`` and an ``aten::item`` inside
``autograd::engine::evaluate_function``), 5.2 ms of the step.
"""

from __future__ import annotations

import pytest

from tests._profiled import needs_torch, profiled, value

SCRIPT = """
import sys, torch
from torch import nn

kind = sys.argv[1]
torch.manual_seed(0)
if kind == "anomaly":
    torch.autograd.set_detect_anomaly(True)
if kind == "anomaly-no-nan-check":  # stack recording only: no check runs
    torch.autograd.set_detect_anomaly(True, check_nan=False)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512),
                      nn.ReLU(), nn.Linear(512, 10))
if kind == "one-hook":  # a NaN check on one layer's weight gradient, written by the user
    model[0].weight.register_hook(lambda g: g if not torch.isnan(g).any() else g.nan_to_num())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))
for step in range(10):
    opt.zero_grad(set_to_none=True)
    if kind == "block":
        with torch.autograd.detect_anomaly():
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
    else:
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}", flush=True)  # a sync outside backward
"""
RULE = "anomaly-detection"


def _calls(report_dir, cls):
    """The host_calls rows of one class in the run's trace, read by advisor."""
    from advisor.collectors import load_profile

    table = load_profile(report_dir / "trace", jobs=1).table("host_calls")
    return table[table["cls"] == cls]


@needs_torch
@pytest.mark.parametrize("kind", ["anomaly", "block"])
def test_anomaly_mode_is_named_with_its_checks(tmp_path, kind):
    report, out = profiled(tmp_path, SCRIPT, kind, steps=5, warmup=3, name="train_anomaly.py")
    found = {f["rule"]: f for f in report["findings"]}
    assert RULE in found, list(found)
    f = found[RULE]
    # every node with outputs checks them: most of the nodes (AccumulateGrad has none)
    assert value(report, "host.nan_checks") >= 0.5 * value(report, "host.backward_nodes")
    assert f["time_at_stake_ms"] == pytest.approx(value(report, "host.nan_check_ms"), rel=1e-3)
    assert 0 < f["estimated_gain_ms"] <= f["time_at_stake_ms"] + 0.001 <= value(report, "step.time_ms")
    assert "set_detect_anomaly" in f["fix"]["code"]
    # inside backward the .item() is the check's, counted once; the loop's own loss.item() stays a sync
    checks = _calls(out, "nan_check")
    assert set(checks["name"]) == {"aten::isnan", "aten::_is_any_true", "aten::item"}
    syncs = _calls(out, "sync")
    assert syncs.loc[syncs["name"] == "aten::item", "count"].sum() <= syncs["step"].nunique() + 1


@needs_torch
@pytest.mark.parametrize("kind", ["off", "anomaly-no-nan-check", "one-hook"])
def test_loops_without_the_engines_checks_stay_quiet(tmp_path, kind):
    report = profiled(tmp_path, SCRIPT, kind, steps=5, warmup=3, name="train_anomaly.py")[0]
    assert RULE not in {f["rule"] for f in report["findings"]}
    assert value(report, "host.backward_nodes") > 10
    assert value(report, "host.nan_checks") <= (1 if kind == "one-hook" else 0)
