"""A model split over two ranks by hand (real CPU run on gloo under
``advisor run``): rank 0 runs the first four layers and sends their
activations to rank 1, which runs four more and the loss and sends the
gradient back; one batch at a time, so each rank waits for the other half
of every step.

gloo records a receive as ``c10d::recv_``, which returns in microseconds,
and ``gloo:recv``, which starts inside it and lasts until the message
arrives (16-21 ms of a 45-49 ms step). Taken as nested in the first, the
wait was read as time with no operator: ``host-time-outside-ops`` high,
"the host's own work outside the operators, the Python and the framework's
bookkeeping", on a loop that was waiting for its neighbour.
"""

from __future__ import annotations

import pytest

from tests._profiled import profiled
from tests.e2e._teardown import EXIT_WITHOUT_TEARDOWN

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

SCRIPT = """
import torch, torch.distributed as dist
from torch import nn

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)
B, H = 256, 512
stage = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(H, H), nn.ReLU())])
head = nn.Linear(H, 10) if rank == 1 else None
opt = torch.optim.SGD(list(stage.parameters()) + (list(head.parameters()) if head else []), lr=0.01)
for step in range(20):
    opt.zero_grad()
    if rank == 0:
        out = stage(torch.randn(B, H))
        dist.send(out.detach(), 1)
        grad = torch.empty(B, H)
        dist.recv(grad, 1)
        out.backward(grad)
    else:
        inp = torch.empty(B, H)
        dist.recv(inp, 0)
        inp.requires_grad_()
        nn.functional.cross_entropy(head(stage(inp)), torch.randint(0, 10, (B,))).backward()
        dist.send(inp.grad, 0)
    opt.step()
dist.destroy_process_group()
""" + EXIT_WITHOUT_TEARDOWN


def test_a_stage_waiting_for_its_neighbour_is_communication_not_host_work(tmp_path):
    report, _ = profiled(tmp_path, SCRIPT, steps=12, warmup=3, name="train_stages.py", ranks=2)
    metrics = {k: v["value"] for k, v in report["metrics"].items()}
    found = {f["rule"]: f for f in report["findings"] if f["severity"] in ("medium", "high", "critical")}
    # each rank computes half of the step and waits for the other half in its receive
    assert metrics["step.exposed_comm_ratio"] >= 0.25, metrics["step.exposed_comm_ratio"]
    assert metrics["step.free_ratio"] < 0.15, metrics["step.free_ratio"]
    assert "exposed-p2p" in found, list(found)
    assert "host-time-outside-ops" not in found, found.get("host-time-outside-ops", {}).get("message")
    per_step = metrics["comm.collectives_per_step"]
    assert per_step.get("receive") == pytest.approx(1.0) and per_step.get("send") == pytest.approx(1.0), per_step
