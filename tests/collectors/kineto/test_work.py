"""The ``flops`` table of a Kineto trace against PyTorch's own FLOPs
estimate (``with_flops=True``, torch/csrc/profiler/util.cpp computeFlops),
on a trace the real profiler records here."""

from __future__ import annotations

import json

import pytest

from advisor.collectors.kineto import work
from advisor.collectors.kineto.collector import read

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
from torch import nn  # noqa: E402

STEPS = 3


def _workload():
    """A conv (stride 2, padding 1, two groups), linear layers and batched
    matrix products: every counted operator, forward and backward."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2), nn.ReLU(), nn.Flatten(),
                          nn.Linear(8 * 8 * 8, 32), nn.ReLU(), nn.Linear(32, 10))
    x = torch.randn(6, 4, 16, 16)
    a, b, c = torch.randn(5, 6, 7), torch.randn(5, 7, 3), torch.randn(5, 6, 3)

    def step():
        model(x).sum().backward()
        torch.bmm(a, b)
        torch.baddbmm(c, a, b)
    return step


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(trace path, PyTorch's FLOPs per counted operator name over the steps)."""
    step = _workload()
    path = tmp_path_factory.mktemp("flops") / "rank0.pt.trace.json"
    theirs = {}

    def ready(prof):
        prof.export_chrome_trace(str(path))
        theirs.update({e.key: e.flops for e in prof.key_averages() if e.key in work.COUNTED_OPS})

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                                with_flops=True, schedule=torch.profiler.schedule(wait=0, warmup=1, active=STEPS),
                                on_trace_ready=ready) as prof:
        for _ in range(1 + STEPS):
            step()
            prof.step()
    return path, theirs


def test_each_operator_matches_pytorchs_own_estimate(recorded):
    path, theirs = recorded
    assert set(theirs) == work.COUNTED_OPS  # the workload calls each of them
    ours = dict.fromkeys(work.COUNTED_OPS, 0.0)
    for e in json.loads(path.read_text())["traceEvents"]:
        if e.get("name") in work.COUNTED_OPS and e.get("ph") == "X":
            args = e["args"]
            ours[e["name"]] += work.op_flops(e["name"], json.dumps(args["Input Dims"]).encode(),
                                             json.dumps(args.get("Concrete Inputs", "")).encode())
    assert ours == pytest.approx(theirs, rel=1e-12)


def test_the_trace_gives_one_row_per_step_with_the_steps_work(recorded):
    path, theirs = recorded
    flops = read(path).flops
    assert len(flops) == STEPS and flops["step"].is_unique
    assert (flops["rank"] == 0).all()
    # every step runs the same work; together they are all of it
    assert flops["mflops"].nunique() == 1
    assert flops["mflops"].sum() * 1e6 == pytest.approx(sum(theirs.values()), rel=1e-9)


@pytest.mark.parametrize("name, dims, concrete", [
    ("aten::mm", b"[[2, 3], [4, 5]]", b""),                    # inner sizes differ
    ("aten::bmm", b"[[2, 3], [3, 4]]", b""),                   # not batched
    ("aten::addmm", b"[[4], [2, 3]]", b""),                    # one operand missing
    ("aten::mm", b"not json", b""),
    ("aten::conv2d", b"[[1, 3, 8, 8], [4, 3, 3, 3], []]", b""),  # no concrete inputs: stride unknown
    ("aten::conv2d", b"[[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], []]",
     b'["", "", "", "[0, 0]", "[0, 0]", "[1, 1]", "1"]'),     # stride 0
])
def test_shapes_that_do_not_fit_count_nothing(name, dims, concrete):
    assert work.op_flops(name, dims, concrete) is None
