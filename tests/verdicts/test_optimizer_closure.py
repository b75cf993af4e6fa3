"""An optimizer stepped with a closure (``optimizer.step(closure)``, as
PyTorch Lightning's automatic optimization and LBFGS do) on a real CPU run
(``advisor run``, OMP_NUM_THREADS=1).

The closure runs forward and backward inside ``Optimizer.step``, and the
whole step used to be read as optimizer time: "The optimizer (SGD) takes
11.95 ms of each step (99.1%)", unfused-optimizer critical with 5.97 ms to
gain, where the update itself took 1.4 ms. The optimizer's range now starts
where the closure's backward ends, and the report says so.
"""

from __future__ import annotations

from tests._profiled import needs_torch, profiled, value
from tests.e2e._teardown import EXIT_WITHOUT_TEARDOWN

SCRIPT = """
import sys, torch
from torch import nn

torch.manual_seed(0)
layers = []
for _ in range(12):
    layers += [nn.Linear(256, 256), nn.ReLU()]
model = nn.Sequential(*layers, nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), 0.01, momentum=0.9)
x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))


def closure():
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss


for step in range(12):
    if sys.argv[1] == "closure":
        opt.step(closure)
    else:
        closure()
        opt.step()
"""
NOTE = "the optimizer's step() runs a closure"
#: The same closure loop under DDP on 2 gloo ranks: after the closure's last
#: backward node the reducer waits for the all-reduce and copies the buckets
#: into the gradients (1-8.5 ms a step in a Lightning run), still the closure's.
DDP_SCRIPT = SCRIPT.replace("import sys, torch\n", "import sys, torch, torch.distributed as dist\n").replace(
    "model = nn.Sequential(*layers, nn.Linear(256, 10))",
    "dist.init_process_group('gloo')\nmodel = nn.parallel.DistributedDataParallel(nn.Sequential(*layers, nn.Linear(256, 10)))",
) + EXIT_WITHOUT_TEARDOWN


def _run(tmp_path, kind: str) -> dict:
    return profiled(tmp_path / kind, SCRIPT, kind, steps=5, warmup=3, name="train_closure.py")[0]


@needs_torch
def test_a_closure_is_not_optimizer_time(tmp_path):
    closure, plain = _run(tmp_path, "closure"), _run(tmp_path, "plain")
    assert any(n.startswith(NOTE) for n in closure["run"]["notes"]), closure["run"]["notes"]
    assert not any(n.startswith(NOTE) for n in plain["run"]["notes"])
    # the same update either way: the same ops, about the same time, a small share of the step
    assert value(closure, "host.optimizer_ops") == value(plain, "host.optimizer_ops") == 4 * 26
    assert value(closure, "host.optimizer_ratio") < 0.3, value(closure, "host.optimizer_ratio")
    assert value(closure, "host.optimizer_ms") < 2.0 * value(plain, "host.optimizer_ms") + 0.5
    found = {f["rule"]: f for f in closure["findings"]}
    if "unfused-optimizer" in found:
        assert found["unfused-optimizer"]["severity"] not in ("high", "critical")
        assert found["unfused-optimizer"]["estimated_gain_ms"] <= value(closure, "host.optimizer_ms")


@needs_torch
def test_under_ddp_the_reducer_finishing_backward_is_the_closures_too(tmp_path):
    report = profiled(tmp_path, DDP_SCRIPT, "closure", steps=5, warmup=3, name="train_closure_ddp.py", ranks=2)[0]
    assert any(n.startswith(NOTE) for n in report["run"]["notes"])
    # the update alone: the 104 ops of SGD with momentum over 26 tensors, not the reducer's 26 copies too
    assert value(report, "host.optimizer_ops") == 4 * 26
    assert value(report, "host.optimizer_ratio") < 0.3, value(report, "host.optimizer_ratio")
