"""per-parameter-expression on real CPU training loops (``advisor run``,
PyTorch's profiler, OMP_NUM_THREADS=1).

An L2 penalty written into the loss as a loop over ``model.parameters()``
used to be called clean. Measured on a 2-core host, a 26-layer MLP's step
took 49.9 ms with it against 31.1 ms with the same penalty as SGD's
``weight_decay``; its backward runs PowBackward0, SumBackward0 and
AddBackward0 once per parameter tensor (100 tensors), 30% of the profiled
step.

A model whose every layer has one parameter tensor (bias-free linear
layers, or FSDP's one flat parameter per wrapped layer) runs its layers'
own nodes (MmBackward0, ReluBackward0, TBackward0) once per tensor too; such
an MLP of 21 layers was called critical (9.45 ms, 50% of the step). Only
elementwise and reduction nodes, one of them a reduction, count now.
"""

from __future__ import annotations

import pytest

from tests._profiled import needs_torch, profiled, value

SCRIPT = """
import sys, torch
from torch import nn

kind = sys.argv[1]
torch.manual_seed(0)
if kind == "lstmcell":  # a recurrent cell unrolled over 64 time steps: many nodes per weight, none per tensor
    cell, head = nn.LSTMCell(32, 64), nn.Linear(64, 10)
    params = list(cell.parameters()) + list(head.parameters())
elif kind == "no-bias":  # one weight per layer: the layers' own nodes run once per parameter tensor
    layers = []
    for _ in range(20):
        layers += [nn.Linear(256, 256, bias=False), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(256, 10, bias=False))
    params = list(model.parameters())
else:
    layers = []
    for _ in range(12):
        layers += [nn.Linear(256, 256), nn.LayerNorm(256), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(256, 10))
    params = list(model.parameters())
opt = torch.optim.SGD(params, lr=0.01, weight_decay=2e-4 if kind == "weight-decay" else 0.0)
x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))
seq = torch.randn(64, 16, 32)
for step in range(10):
    opt.zero_grad(set_to_none=True)
    if kind == "lstmcell":
        h = c = torch.zeros(16, 64)
        for t in range(64):
            h, c = cell(seq[t], (h, c))
        loss = nn.functional.cross_entropy(head(h), y[:16])
    else:
        loss = nn.functional.cross_entropy(model(x), y)
    if kind == "l2-in-loss":
        loss = loss + 1e-4 * sum(p.pow(2).sum() for p in params)
    if kind == "norms-no-grad":  # per-tensor statistics outside the graph
        with torch.no_grad():
            norms = [p.norm() for p in params]
    loss.backward()
    opt.step()
"""
RULE = "per-parameter-expression"


@needs_torch
def test_an_l2_penalty_in_the_loss_is_named_with_its_nodes(tmp_path):
    report = profiled(tmp_path, SCRIPT, "l2-in-loss", steps=5, warmup=3, name="train_l2.py")[0]
    found = {f["rule"]: f for f in report["findings"]}
    assert RULE in found, list(found)
    f = found[RULE]
    tensors = value(report, "host.parameter_tensors")
    assert tensors == 50  # 13 Linear and 12 LayerNorm layers, a weight and a bias each
    assert "PowBackward0" in value(report, "host.per_param_nodes")
    assert f["time_at_stake_ms"] == pytest.approx(value(report, "host.per_param_backward_ms"), rel=1e-3)
    assert 0 < f["estimated_gain_ms"] <= f["time_at_stake_ms"] + 0.001 <= value(report, "step.time_ms")
    assert "weight_decay" in f["fix"]["code"]


@needs_torch
@pytest.mark.parametrize("kind", ["weight-decay", "norms-no-grad", "lstmcell", "no-bias"])
def test_loops_without_a_per_tensor_expression_in_the_graph_stay_quiet(tmp_path, kind):
    report = profiled(tmp_path, SCRIPT, kind, steps=5, warmup=3, name="train_l2.py")[0]
    assert RULE not in {f["rule"] for f in report["findings"]}
    metrics = report["metrics"]
    if kind == "lstmcell":  # 6 tensors: too few to tell a per-tensor expression from a coincidence
        assert "host.per_param_backward_ms" not in metrics
    else:
        assert value(report, "host.per_param_backward_ms") == 0.0
