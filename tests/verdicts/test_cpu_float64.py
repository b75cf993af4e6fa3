"""float64-compute on real CPU training loops (``advisor run``, PyTorch's
profiler, OMP_NUM_THREADS=1).

A model left in double precision (``model.double()``) used to be called
clean: no rule read the operand types of the matrix products on a CPU.
Measured on a loaded 2-core host, a 5-layer MLP's step took 99 ms in
float64 against 35 ms in float32, and 90% of the profiled float64 step was
in float64 products; the float32 loop has none.
"""

from __future__ import annotations

import pytest

from tests._profiled import needs_torch, profiled, value
from advisor.collectors import vocab
from advisor.collectors.kineto import work

SCRIPT = """
import sys, torch
from torch import nn

torch.manual_seed(0)
if sys.argv[1] == "default-float64":  # the whole program in double precision
    torch.set_default_dtype(torch.float64)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
if sys.argv[1] == "double":
    model = model.double()
dtype = next(model.parameters()).dtype
x, y = torch.randn(128, 256, dtype=dtype), torch.randint(0, 10, (128,))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(10):
    opt.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
"""
SERIOUS = {"medium", "high", "critical"}
RULE = "float64-compute"


def test_float64_operands_read_from_the_recorded_input_types():
    # Kineto writes "Input type" as a JSON list of c10 scalar type names, one per argument
    # (torch/csrc/profiler/util.cpp, inputTypes); addmm's first argument is the bias
    double = work.OPERAND_TYPES.index(vocab.DOUBLE)

    def operand(name, types):
        dims = b"[[4], [2, 3], [3, 4]]" if name == "aten::addmm" else b"[[2, 3], [3, 4]]"
        return work.op_work(name, dims, b"", types)[2]

    assert operand("aten::addmm", b'["double", "double", "double", "Scalar", "Scalar"]') == double
    assert operand("aten::mm", b'["double", "double"]') == double
    assert operand("aten::addmm", b'["float", "float", "float", "Scalar", "Scalar"]') != double
    # a float64 bias beside float32 operands is not float64 work
    assert operand("aten::addmm", b'["double", "float", "float"]') != double
    assert operand("aten::mm", b"") != double
    assert operand("aten::mm", b"[not json") != double


@needs_torch
@pytest.mark.parametrize("kind", ["double", "default-float64"])
def test_a_model_trained_in_float64_is_named(tmp_path, kind):
    report = profiled(tmp_path, SCRIPT, kind, steps=5, warmup=3, name="train_dtype.py")[0]
    found = {f["rule"]: f for f in report["findings"]}
    assert RULE in found and found[RULE]["severity"] in SERIOUS, list(found)
    assert report["verdict"]["status"] == "problems"
    f = found[RULE]
    # most of the step is in the float64 products, and the gain is half their time at most
    assert value(report, "ops.fp64_matmul_ratio") >= 0.4
    assert f["estimated_gain_ms"] <= 0.5 * f["time_at_stake_ms"] + 0.001  # both rounded to 1 us
    assert f["time_at_stake_ms"] == pytest.approx(value(report, "ops.fp64_matmul_ms"), rel=1e-3)
    assert f["time_at_stake_ms"] <= value(report, "step.time_ms")
    assert ".float()" in f["fix"]["code"]


@needs_torch
def test_the_same_model_in_float32_keeps_it_quiet(tmp_path):
    report = profiled(tmp_path, SCRIPT, "float32", steps=5, warmup=3, name="train_dtype.py")[0]
    assert RULE not in {f["rule"] for f in report["findings"]}
    assert value(report, "ops.fp64_matmul_ratio") == 0.0
    assert value(report, "ops.matrix_ratio") > 0.4  # the products are there, in float32
