"""Activation checkpointing, on real CPU runs under ``advisor run``: six
pre-norm MLP blocks (LayerNorm, Linear 256->1024, GELU, Linear 1024->256,
residual add), each wrapped in ``torch.utils.checkpoint`` (non-reentrant
and reentrant) or not. Checkpointed, the backward pass runs each block's
forward again; before ``host.recompute_ms`` no rule read that time, and the
run was reported without it.

The recomputed time is checked within its own run, against the first
forward pass of the same blocks, so the load on the machine cancels. The
``ops`` table of a CPU trace holds the outermost operators: without
re-entry the forward's own ``aten::linear`` calls (12 of its 13 a step are
recomputed; the head is not checkpointed), with re-entry the
``CheckpointFunction`` around each block's forward.
"""

from __future__ import annotations

import pytest

from advisor.collectors import load_profile
from tests._profiled import needs_torch, profiled, value

SCRIPT = """
import sys, torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
mode = sys.argv[1]


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(256)
        self.mlp = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(6))
        self.head = nn.Linear(256, 10)

    def forward(self, x):
        for block in self.blocks:
            if mode == "none":
                x = block(x)
            else:
                x = checkpoint(block, x, use_reentrant=mode == "reentrant")
        return self.head(x.mean(1))


model = Net()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(12):
    x = torch.randn(8, 32, 256, requires_grad=mode == "reentrant")
    y = torch.randint(0, 10, (8,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
"""
SERIOUS = {"medium", "high", "critical"}


def _run(tmp_path, mode: str):
    return profiled(tmp_path / mode, SCRIPT, mode, steps=6, warmup=2, name="train_ckpt.py")


@needs_torch
@pytest.mark.parametrize("mode", ["nonreentrant", "reentrant"])
def test_checkpointed_blocks_are_named_with_the_time_their_recomputation_takes(tmp_path, mode):
    report, out = _run(tmp_path, mode)
    ops = {o["name"]: o for o in value(report, "host.recompute_ops")}
    # each of the 6 blocks recomputes its LayerNorm, two Linears and GELU once a step
    assert {n: o["per_step"] for n, o in ops.items()} == {
        "aten::linear": 12.0, "aten::layer_norm": 6.0, "aten::gelu": 6.0}, ops
    found = {f["rule"]: f for f in report["findings"]}
    assert "recompute-overhead" in found, [f["rule"] for f in report["findings"]]
    finding = found["recompute-overhead"]
    assert finding["severity"] in SERIOUS, finding
    recompute = value(report, "host.recompute_ms")
    assert 0 < finding["estimated_gain_ms"] <= recompute, (finding["estimated_gain_ms"], recompute)
    assert "aten::linear" in finding["message"], finding["message"]
    # the recomputation against the first forward of the same blocks (module doc)
    first, again = ("CheckpointFunction", recompute) if mode == "reentrant" else (
        "aten::linear", ops["aten::linear"]["ms"])
    forward = load_profile(out / "trace", jobs=1).table("ops")
    forward_ms = forward.loc[forward["name"] == first, "total_us"].sum() / 1000 / report["run"]["steps_found"]
    assert 0.4 <= again / forward_ms <= 1.3, (again, first, forward_ms)


@needs_torch
def test_blocks_run_once_have_nothing_recomputed(tmp_path):
    report, _ = _run(tmp_path, "none")
    assert value(report, "host.recompute_ms") == 0.0
    assert value(report, "host.recompute_ops") == []
    assert "recompute-overhead" not in {f["rule"] for f in report["findings"]}
