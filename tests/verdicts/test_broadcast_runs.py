"""exposed-broadcast on real CPU runs (2 gloo ranks under DDP, ``advisor
run``): a loop that broadcasts each of the 50 parameter tensors from rank 0
every step, "to keep the replicas in sync", which DDP already does. The
step took 30.7 ms against 14.8 ms without the loop, 57% of it exposed
communication, and advisor called the run clean: no rule read broadcasts.
"""

from __future__ import annotations

import pytest

from tests._profiled import profiled

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

SCRIPT = """
import sys, torch, torch.distributed as dist
from torch import nn

dist.init_process_group("gloo")
torch.manual_seed(0)
layers = []
for _ in range(24):
    layers += [nn.Linear(128, 128), nn.ReLU()]
model = nn.parallel.DistributedDataParallel(nn.Sequential(*layers, nn.Linear(128, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(24):
    x, y = torch.randn(64, 128), torch.randint(0, 10, (64,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    if sys.argv[1] == "broadcast":
        for p in model.parameters():
            dist.broadcast(p.data, 0)
dist.destroy_process_group()
"""
SERIOUS = {"medium", "high", "critical"}


def _run(tmp_path, mode: str) -> dict:
    return profiled(tmp_path, SCRIPT, mode, steps=12, warmup=3, name="train_ddp.py", ranks=2)[0]


def test_parameters_broadcast_every_step_under_ddp_are_named_with_their_whole_time(tmp_path):
    looped = _run(tmp_path / "loop", "broadcast")
    plain = _run(tmp_path / "plain", "none")
    metrics = {k: v["value"] for k, v in looped["metrics"].items()}
    assert metrics["comm.broadcasts_per_parameter"] == pytest.approx(1.0)
    found = {f["rule"]: f for f in looped["findings"]}
    assert "exposed-broadcast" in found and found["exposed-broadcast"]["severity"] in SERIOUS, list(found)
    finding = found["exposed-broadcast"]
    assert "one for each parameter tensor" in finding["message"]
    assert "_flatten_dense_tensors" in finding["fix"]["code"]
    # redundant under DDP: the whole exposed broadcast is the gain, and no more than the loop costs the step
    assert finding["estimated_gain_ms"] == pytest.approx(metrics["comm.exposed_broadcast_ms"], abs=1e-3)
    saved = metrics["step.time_ms"] - plain["metrics"]["step.time_ms"]["value"]
    assert 0.4 * saved <= finding["estimated_gain_ms"] <= 1.5 * saved, (finding["estimated_gain_ms"], saved)
    assert "exposed-broadcast" not in {f["rule"] for f in plain["findings"]}
