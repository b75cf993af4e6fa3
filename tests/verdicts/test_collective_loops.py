"""Collectives a training loop adds every step, on real CPU runs (2 gloo
ranks under DDP, ``advisor run``), each against the same loop without them:

* a loop that broadcasts each of the 50 parameter tensors from rank 0 every
  step, "to keep the replicas in sync", which DDP already does: 30.7 ms a
  step against 14.8 ms, 57% of it exposed communication, and advisor called
  the run clean (no rule read broadcasts);
* ZeroRedundancyOptimizer, whose step broadcasts each rank's updated
  parameters one tensor at a time: 42.7 ms a step against 23.0 ms with
  ``parameters_as_bucket_view=True``; those broadcasts are the optimizer's
  own and must not be called a redundant loop;
* 16 per-class accuracies and the loss each reduced to rank 0 on its own,
  then a barrier: 14.4 ms a step against 6.1 ms, and the lead finding was
  the gradient all-reduce (1.9 ms exposed), since no rule read reduces or
  barriers.

Each estimate is checked against its twin run's: the difference in exposed
communication between the two runs is what removing or merging those
collectives saves. (Their step times were the first check; beside the rest
of the suite on the 2 cores, two runs' steps differ by more than the effect:
the bucketed ZeRO twin once saved 4.5 ms of the 19.7 a quiet host shows.)
The check is one-sided: an estimate below half the twin's saving is wrong
whatever the load (the per-tensor all-reduce loop was once estimated at a
third of it). Above, the twin's saving is no bound on a crowded host: its
ranks, descheduled in turn, wait for each other in their all-reduce, and
that wait is exposed communication too (in full-suite runs the broadcast
loop's 12.7 ms faced a saving of 6.2 ms, the reduce loop's 3.9 ms one of
1.6 ms); there the estimate is held to the exposed time of the collectives
it is computed from.
"""

from __future__ import annotations

import pytest

from tests._profiled import profiled, value
from tests.e2e._teardown import EXIT_WITHOUT_TEARDOWN

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

#: DDP over 24 Linear layers of 128 (50 parameter tensors) on gloo, 24
#: steps; ``{optimizer}`` builds ``opt``, ``{after_step}`` runs after each
#: ``opt.step()``.
DEEP_MLP = """
import sys, torch, torch.distributed as dist
from torch import nn
from torch.distributed.optim import ZeroRedundancyOptimizer

dist.init_process_group("gloo")
torch.manual_seed(0)
layers = []
for _ in range(24):
    layers += [nn.Linear(128, 128), nn.ReLU()]
model = nn.parallel.DistributedDataParallel(nn.Sequential(*layers, nn.Linear(128, 10)))
{optimizer}
for step in range(24):
    x, y = torch.randn(64, 128), torch.randint(0, 10, (64,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
{after_step}
dist.destroy_process_group()
""" + EXIT_WITHOUT_TEARDOWN.replace("{", "{{").replace("}", "}}")
BROADCAST_SCRIPT = DEEP_MLP.format(
    optimizer="opt = torch.optim.SGD(model.parameters(), lr=0.01)",
    after_step="""    if sys.argv[1] == "broadcast":
        for p in model.parameters():
            dist.broadcast(p.data, 0)""")
ZERO_SCRIPT = DEEP_MLP.format(
    optimizer="""opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3,
                              parameters_as_bucket_view=sys.argv[1] == "buckets")""",
    after_step="")
SERIOUS = {"medium", "high", "critical"}
REDUCE_SCRIPT = """
import sys, torch, torch.distributed as dist
from torch import nn

dist.init_process_group("gloo")
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(24):
    x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))
    opt.zero_grad()
    out = model(x)
    loss = nn.functional.cross_entropy(out, y)
    loss.backward()
    opt.step()
    if sys.argv[1] == "reduce":
        pred = out.detach().argmax(1)
        for c in range(16):
            dist.reduce((pred[y == c] == c).float().sum(), 0)
        dist.reduce(loss.detach(), 0)
        dist.barrier()
dist.destroy_process_group()
""" + EXIT_WITHOUT_TEARDOWN


def _check_against_twin(report: dict, twin: dict, gain_ms: float) -> None:
    """``gain_ms`` at least half the exposed communication ``twin`` (the
    same loop with the fix) does without, and the twin's step the shorter
    (module doc)."""
    saved = value(report, "step.exposed_comm_ms") - value(twin, "step.exposed_comm_ms")
    assert gain_ms >= 0.5 * saved, (gain_ms, saved)
    assert value(twin, "step.time_ms") < value(report, "step.time_ms")


def _run(tmp_path, script: str, mode: str) -> dict:
    return profiled(tmp_path, script, mode, steps=12, warmup=3, name="train_ddp.py", ranks=2)[0]


def test_parameters_broadcast_every_step_under_ddp_are_named_with_their_whole_time(tmp_path):
    looped = _run(tmp_path / "loop", BROADCAST_SCRIPT, "broadcast")
    plain = _run(tmp_path / "plain", BROADCAST_SCRIPT, "none")
    metrics = {k: v["value"] for k, v in looped["metrics"].items()}
    assert metrics["comm.broadcasts_per_parameter"] == pytest.approx(1.0)
    found = {f["rule"]: f for f in looped["findings"]}
    assert "exposed-broadcast" in found and found["exposed-broadcast"]["severity"] in SERIOUS, list(found)
    finding = found["exposed-broadcast"]
    assert "one for each parameter tensor" in finding["message"]
    assert "_flatten_dense_tensors" in finding["fix"]["code"]
    # redundant under DDP: the whole exposed broadcast is the gain
    assert finding["estimated_gain_ms"] == pytest.approx(metrics["comm.exposed_broadcast_ms"], abs=1e-3)
    _check_against_twin(looped, plain, finding["estimated_gain_ms"])
    assert "exposed-broadcast" not in {f["rule"] for f in plain["findings"]}


def test_values_reduced_one_at_a_time_every_step_are_named_with_their_count(tmp_path):
    looped = _run(tmp_path / "loop", REDUCE_SCRIPT, "reduce")
    plain = _run(tmp_path / "plain", REDUCE_SCRIPT, "none")
    metrics = {k: v["value"] for k, v in looped["metrics"].items()}
    assert metrics["comm.other_collectives_per_step"] == {"gloo:reduce": 17.0, "gloo:barrier": 1.0}
    finding = {f["rule"]: f for f in looped["findings"]}["exposed-collective"]
    assert finding["severity"] in SERIOUS and looped["verdict"]["status"] == "problems"
    # it leads the communication findings, not the gradient all-reduce (a host whose load rises during the
    # run may add a finding of its own, growing-step, that outranks both)
    comm = [f["rule"] for f in looped["findings"] if f["rule"].startswith("exposed-")]
    assert comm[0] == "exposed-collective", [
        (f["rule"], f["estimated_gain_ms"], f["message"]) for f in looped["findings"]]
    assert "17.0 gloo:reduce" in finding["message"] and "torch.stack" in finding["fix"]["code"]
    # all but one of 18 small collectives' latency, bounded by their exposed time -- and lowered, with a
    # caveat that says so, when the findings' gains together would exceed the step (a loaded host)
    expected = metrics["comm.exposed_other_ms"] * 17 / 18
    lowered = any("lowered" in caveat for caveat in finding["caveats"])
    assert finding["estimated_gain_ms"] == pytest.approx(expected, rel=1e-3) or (
        lowered and finding["estimated_gain_ms"] < expected), finding
    _check_against_twin(looped, plain, finding["estimated_gain_ms"])
    assert "exposed-collective" not in {f["rule"] for f in plain["findings"]}


def test_a_sharded_optimizer_s_broadcasts_are_its_own_and_bucketed_by_its_option(tmp_path):
    per_tensor = _run(tmp_path / "tensors", ZERO_SCRIPT, "tensors")
    bucketed = _run(tmp_path / "buckets", ZERO_SCRIPT, "buckets")
    metrics = {k: v["value"] for k, v in per_tensor["metrics"].items()}
    assert metrics["host.sharded_optimizer"] == "ZeroRedundancyOptimizer"
    finding = {f["rule"]: f for f in per_tensor["findings"]}["exposed-broadcast"]
    assert finding["severity"] in SERIOUS
    assert "ZeroRedundancyOptimizer" in finding["message"] and "replicas stay equal" not in finding["message"]
    assert "parameters_as_bucket_view=True" in finding["fix"]["code"]
    # the latency of all but one broadcast per rank
    assert finding["estimated_gain_ms"] == pytest.approx(metrics["comm.fewer_broadcasts_save_ms"], abs=1e-3)
    assert finding["estimated_gain_ms"] <= metrics["comm.exposed_broadcast_ms"]
    _check_against_twin(per_tensor, bucketed, finding["estimated_gain_ms"])
    fixed = {f["rule"]: f for f in bucketed["findings"]}.get("exposed-broadcast")
    assert fixed is None or "parameters_as_bucket_view=True" not in fixed["fix"]["code"]

