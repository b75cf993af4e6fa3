"""memory-growth on PyTorch traces recorded with ``profile_memory=True``
(``advisor run --memory``): the ``[memory]``
events (each allocation and free, and the allocator's total after it)
make the ``memory`` table, so a loop that keeps every step's loss and an
activation alive is named, and the same loop keeping ``loss.item()`` is
not."""

from __future__ import annotations

import pytest

from advisor.collectors.kineto.collector import read
from tests._profiled import needs_torch, profiled, value

SCRIPT = """
import sys, torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))
kept = []
for step in range(16):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if sys.argv[1] == "leak":
        kept.append(loss)                          # the loss and its graph
        kept.append(model[1](model[0](x)))         # and a 0.5 MB activation, every step
    else:
        kept.append(loss.item())
"""
RULE = "memory-growth"


@needs_torch
@pytest.mark.parametrize("variant", ["leak", "fixed"])
def test_memory_kept_every_step_is_named_from_the_trace_memory_events(tmp_path, variant):
    report, out = profiled(tmp_path, SCRIPT, variant, steps=8, warmup=2, options=("--memory",))
    (trace,) = (out / "trace").glob("*.json")
    memory = read(trace).memory
    assert memory is not None and set(memory["category"]) == {"unknown"}
    # the CPU allocator's totals start with the recording: the levels count from zero, and the report says so
    assert not (memory["action"] == "preexisting").any()
    assert any(n.startswith("memory levels count from the start of recording") for n in report["run"]["notes"])
    assert value(report, "memory.iterations") >= 6  # the steps: 8 recorded, 7 between their troughs
    found = {f["rule"] for f in report["findings"]}
    if variant == "leak":
        assert RULE in found, value(report, "memory.iteration_troughs_gib")
        assert value(report, "memory.trough_rise_share") >= 0.75
        # a CPU run: what holds the memory is found among the live tensors, not in a CUDA snapshot
        fix = next(f for f in report["findings"] if f["rule"] == RULE)["fix"]
        assert "gc.get_objects()" in fix["code"] and "cuda" not in fix["code"], fix
    else:
        assert RULE not in found
        assert value(report, "memory.trough_rise_share") < 0.75
