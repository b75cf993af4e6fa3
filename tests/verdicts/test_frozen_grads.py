"""grads-for-frozen-params on real CPU training loops (``advisor run``,
PyTorch's profiler, OMP_NUM_THREADS=1).

A backbone "frozen" by leaving it out of the optimizer, its parameters
still requiring gradients, used to be called clean. Measured on a loaded
2-core host: a 6-layer 512-wide backbone under a trained head took 66 ms a
step so, 31 ms with ``requires_grad_(False)``; the profile put 38% of the
step in weight gradients no optimizer step reads. Runs whose optimizer
takes every parameter (plain, fused AdamW, gradient clipping,
checkpointing) have none.
"""

from __future__ import annotations

import json

import pytest

import advisor

from tests._profiled import needs_torch, profiled, value
from advisor.collectors.kineto import shaped_events

SCRIPT = """
import sys, torch
from torch import nn

kind = sys.argv[1]
torch.manual_seed(0)
depth = 20 if kind == "full-deep" else 4
backbone = nn.Sequential(*[nn.Sequential(nn.Linear(384, 384), nn.ReLU()) for _ in range(depth)])
head = nn.Linear(384, 10)
if kind == "no-grad":  # frozen the right way
    backbone.requires_grad_(False)
if kind in ("full", "full-deep"):  # every parameter trained, by fused AdamW
    opt = torch.optim.AdamW(list(backbone.parameters()) + list(head.parameters()), lr=1e-3, fused=True)
else:  # only the head is trained
    opt = torch.optim.SGD(head.parameters(), lr=0.01)
x, y = torch.randn(192, 384), torch.randint(0, 10, (192,))
for step in range(10):
    opt.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(head(backbone(x)), y).backward()
    opt.step()
"""
SERIOUS = {"medium", "high", "critical"}
RULE = "grads-for-frozen-params"


def test_shapes_are_read_from_input_dims_tensor_lists_included():
    # Kineto's "Input Dims": one entry per argument, a tensor list's entry a list of shapes
    # (torch/csrc/profiler/util.cpp, inputSizes); scalars record []
    assert shaped_events.shapes(b"[[512, 512], [512, 512], []]") == ((512, 512), (512, 512))
    assert shaped_events.shapes(b"[[[10, 512], [10]], [[10, 512], [10]], []]") == ((10, 512), (10,), (10, 512), (10,))
    assert shaped_events.shapes(b"") == ()
    assert shaped_events.shapes(b"[broken") == ()
    assert shaped_events.role_of("torch::autograd::AccumulateGrad") == shaped_events.ACCUMULATE
    assert shaped_events.role_of("aten::_fused_adamw_") == shaped_events.OPTIMIZER
    assert shaped_events.role_of("aten::relu") is None
    assert shaped_events.role_of("aten::linear") == shaped_events.LINEAR_OP  # tied tables (kineto.dense_embedding)


@needs_torch
def test_a_backbone_left_out_of_the_optimizer_is_named(tmp_path):
    report, out = profiled(tmp_path, SCRIPT, "head-only", steps=5, warmup=3, name="train_frozen.py")
    found = {f["rule"]: f for f in report["findings"]}
    assert RULE in found and found[RULE]["severity"] in SERIOUS, list(found)
    # the 4 weights and 4 biases of the backbone, in every step
    assert value(report, "ops.frozen_grads") == 8
    f = found[RULE]
    assert f["estimated_gain_ms"] <= f["time_at_stake_ms"] == pytest.approx(value(report, "ops.frozen_grad_ms"),
                                                                             rel=1e-3)
    assert f["time_at_stake_ms"] <= value(report, "step.time_ms")
    assert "requires_grad_(False)" in f["fix"]["code"]
    # the optimizer's range under the categories other writers give it: the same gradients are unread
    trace = next((out / "trace").glob("*.pt.trace.json"))
    for category in ("cpu_op", "Operator"):  # torch_npu's trace_view.json, PyTorch 1.8
        data = json.loads(trace.read_text())
        for ev in data["traceEvents"]:
            if ev.get("name", "").startswith("Optimizer.step#") and ev.get("cat") == "user_annotation":
                ev["cat"] = category
        copy = tmp_path / category / trace.name
        copy.parent.mkdir()
        copy.write_text(json.dumps(data))
        assert advisor.analyze(copy).metrics["ops.frozen_grads"].value == 8, category


@needs_torch
@pytest.mark.parametrize("kind", ["no-grad", "full"])
def test_an_optimizer_that_takes_every_gradient_keeps_it_quiet(tmp_path, kind):
    report = profiled(tmp_path, SCRIPT, kind, steps=5, warmup=3, name="train_frozen.py")[0]
    assert RULE not in {f["rule"] for f in report["findings"]}
    assert value(report, "ops.frozen_grads") == 0
    assert value(report, "ops.frozen_grad_ms") == 0.0


@needs_torch
def test_a_fused_optimizer_recorded_without_shapes_is_not_judged(tmp_path):
    """Over 42 tensors the profiler wrote fused AdamW's tensor lists without
    shapes ([] for each): every gradient then looked unread, and a model
    trained whole was called high (173 ms, 40% of the step). What such an
    optimizer reads is unknown, so the check is not made."""
    report = profiled(tmp_path, SCRIPT, "full-deep", steps=5, warmup=3, name="train_frozen.py")[0]
    assert RULE not in {f["rule"] for f in report["findings"]}
    assert "ops.frozen_grads" not in report["metrics"]
