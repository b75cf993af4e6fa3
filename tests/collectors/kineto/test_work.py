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
            flops, _, _ = work.op_work(e["name"], json.dumps(args["Input Dims"]).encode(),
                                    json.dumps(args.get("Concrete Inputs", "")).encode())
            ours[e["name"]] += flops
    assert ours == pytest.approx(theirs, rel=1e-12)


def test_the_operand_type_is_read_from_the_recorded_input_types(recorded):
    path, _ = recorded
    types = {work.op_work(e["name"], json.dumps(e["args"]["Input Dims"]).encode(),
                          json.dumps(e["args"].get("Concrete Inputs", "")).encode(),
                          json.dumps(e["args"]["Input type"]).encode())[2]
             for e in json.loads(path.read_text())["traceEvents"]
             if e.get("name") in work.COUNTED_OPS and e.get("ph") == "X"}
    assert types == {work.OPERAND_TYPES.index("FLOAT")}  # the workload computes in float32


@pytest.mark.parametrize("name, types, spelled", [
    # Input type entries as PyTorch records them: addmm's first input is the bias, the matrices follow
    ("aten::addmm", b'["float", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"]', "BF16"),
    ("aten::mm", b'["c10::Half", "c10::Half"]', "FLOAT16"),
    ("aten::bmm", b'["double", "double"]', "DOUBLE"),
    ("aten::mm", b'["long int", "long int"]', ""),
    ("aten::mm", b"", ""),
    ("aten::mm", b"[[", ""),
])
def test_operand_types(name, types, spelled):
    dims = b"[[4], [2, 3], [3, 4]]" if name == "aten::addmm" else (
        b"[[2, 2, 3], [2, 3, 4]]" if name == "aten::bmm" else b"[[2, 3], [3, 4]]")
    assert work.op_work(name, dims, b"", types)[2] == (work.OPERAND_TYPES.index(spelled) if spelled else 0)


def test_the_trace_gives_one_row_per_step_with_the_steps_work(recorded):
    path, theirs = recorded
    flops = read(path).flops
    assert len(flops) == STEPS and flops["step"].is_unique
    assert (flops["rank"] == 0).all()
    # every step runs the same work; together they are all of it
    assert flops["mflops"].nunique() == 1
    assert flops["mflops"].sum() * 1e6 == pytest.approx(sum(theirs.values()), rel=1e-9)


@pytest.mark.parametrize("name, dims, concrete, smallest", [
    ("aten::mm", b"[[1, 256], [256, 512]]", b"", 1),                 # one row
    ("aten::mm", b"[[512, 1], [1, 256]]", b"", 1),                   # an outer product: inner size 1
    ("aten::addmm", b"[[1], [64, 512], [512, 1]]", b"", 64),         # one output column is the model's shape
    ("aten::baddbmm", b"[[4, 6, 3], [4, 6, 7], [4, 7, 3]]", b"", 6),
    # 2 images of 3 x 8 x 8, 4 filters of 3 x 3, stride 2, padding 1: 2 * 4 * 4 = 32 rows, 27 inner, 4 columns
    ("aten::conv2d", b"[[2, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], []]",
     b'["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"]', 27),
])
def test_thin_is_read_from_the_rows_and_inner_size_of_the_matrix_product(name, dims, concrete, smallest):
    assert work.op_work(name, dims, concrete)[1] == smallest


@pytest.mark.parametrize("name, dims, concrete", [
    ("aten::mm", b"[[2, 3], [4, 5]]", b""),                    # inner sizes differ
    ("aten::bmm", b"[[2, 3], [3, 4]]", b""),                   # not batched
    ("aten::addmm", b"[[4], [2, 3]]", b""),                    # one operand missing
    ("aten::mm", b"not json", b""),
    ("aten::mm", b"[[1" + b"0" * 400 + b", 2], [2, 3]]", b""),  # a size past float range
    ("aten::mm", b"[[true, 2], [2, 3]]", b""),
    ("aten::conv2d", b"[[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], []]",
     b'["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "1e999"]'),     # groups not a size
    ("aten::conv2d", b"[[1, 3, 8, 8], [4, 3, 3, 3], []]", b""),  # no concrete inputs: stride unknown
    ("aten::conv2d", b"[[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], []]",
     b'["", "", "", "[0, 0]", "[0, 0]", "[1, 1]", "1"]'),     # stride 0
])
def test_shapes_that_do_not_fit_count_nothing(name, dims, concrete):
    assert work.op_work(name, dims, concrete) is None
