"""unfused-optimizer on a CPU counts the optimizer's passes over the
parameters: a fused optimizer makes one, so plain SGD (one ``add_`` per
parameter tensor) has nothing to fuse, while SGD with momentum makes three.
Measured on a CPU core for SGD over this 5.3M-parameter MLP: 0.456 / 0.446 /
0.481 ms per step single-tensor / foreach / fused without momentum, 1.44 /
1.50 / 1.02 ms with it."""

from __future__ import annotations

import pytest

from tests._profiled import needs_torch, profiled, value

SCRIPT = """
import sys, torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=float(sys.argv[1]))
x, y = torch.randn(2, 512), torch.randint(0, 10, (2,))
for step in range(12):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@needs_torch
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_an_optimizer_that_makes_one_pass_has_nothing_to_fuse(tmp_path, momentum):
    report, _ = profiled(tmp_path, SCRIPT, momentum, steps=5, warmup=2)
    assert value(report, "host.optimizer_impl") == "per-parameter"
    passes = value(report, "host.optimizer_passes")
    fired = "unfused-optimizer" in {f["rule"] for f in report["findings"]}
    if not momentum:
        assert passes == pytest.approx(1.0)  # one add_ per parameter tensor
        assert not fired
    else:  # the buffer's mul_ and add_, the parameter's add_ (and a copy_ of the momentum value)
        assert 3.0 <= passes <= 4.0
        assert fired == (value(report, "host.fusable_optimizer_ms") >= 1.0
                         and value(report, "host.optimizer_ratio") >= 0.05)


@pytest.mark.parametrize("impl, alternative", [("per-parameter", True), ("foreach", False)])
def test_the_fix_names_the_optimizer_class_and_no_implementation_already_used(impl, alternative):
    """The fix's code uses the class the trace names (SGD here, not a fixed
    AdamW), and offers foreach as the fallback only where the optimizer is
    not foreach already."""
    from advisor.engine.evaluation import compile_rule, evaluate_rule, run_context
    from advisor.engine.loader import load_rules

    compiled = compile_rule(next(r for r in load_rules([]) if r.name == "unfused-optimizer"))
    metrics = {"step.time_ms": 20.0, "host.cpu_only": True, "host.optimizer_impl": impl, "host.optimizer_ms": 3.0,
               "host.fusable_optimizer_ms": 3.0, "host.optimizer_ratio": 0.15, "host.optimizer_ops": 24.0,
               "host.optimizer_passes": 4.0, "host.optimizer_classes": ["SGD"],
               "host.fusable_optimizer_classes": ["SGD"]}
    finding, skip = evaluate_rule(compiled, metrics, framework="pytorch", device="cpu",
                                  run=run_context(framework="pytorch", device="cpu"))
    assert skip is None and finding is not None
    assert "torch.optim.SGD(model.parameters(), lr=lr, fused=True)" in finding.fix.code
    assert "AdamW" not in finding.fix.code
    assert ("foreach=True" in finding.fix.code) == alternative
