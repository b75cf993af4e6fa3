"""bfloat16 on a CPU: ``advisor run`` records the CPU's low-precision
instructions in the trace (``cpuProperties``), and emulated-low-precision
names bfloat16 products that run without them.

A bfloat16 product on a CPU without AVX512-BF16 / AMX converts every
element to float32 and back (12-60x its float32 time on an AVX2 core), so
an MLP under CPU bfloat16 autocast spends nearly all of its step there. The
same loop in float32, and any run on a CPU that has the instructions, keep
the rule quiet. What the CPU has is asked of the machine the test runs on,
the same way the profiled process asks it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from advisor.collectors.kineto.collector import read
from advisor.collectors.live.bootstrap._advisor_live import cpu_properties
from tests._profiled import profiled, value

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

SCRIPT = """
import sys, torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))
for step in range(9):
    opt.zero_grad(set_to_none=True)
    dtype = torch.float16 if sys.argv[1] == "fp16" else torch.bfloat16
    with torch.autocast("cpu", dtype=dtype, enabled=sys.argv[1] != "fp32"):
        loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
"""
RULE = "emulated-low-precision"
SERIOUS = {"medium", "high", "critical"}


def _run(tmp_path, precision: str) -> tuple[dict, object]:
    report, out = profiled(tmp_path, SCRIPT, precision, steps=4, warmup=2)
    (trace,) = (out / "trace").glob("*.json")
    return report, trace


@pytest.fixture(scope="module")
def bf16_run(tmp_path_factory):
    """(report, trace) of the loop under bfloat16 autocast."""
    return _run(tmp_path_factory.mktemp("bf16"), "bf16")


def test_a_bfloat16_run_is_judged_by_what_the_cpu_computes_it_with(bf16_run):
    report, trace = bf16_run
    machine = cpu_properties(torch)
    assert json.loads(trace.read_text())["cpuProperties"] == machine
    assert read(trace).meta.cpu.bf16 == machine["bf16"]
    found = {f["rule"]: f for f in report["findings"]}
    if machine["bf16"] is False:
        assert found.get(RULE, {}).get("severity") in SERIOUS, list(found)
        assert value(report, "ops.emulated_lowp_ratio") >= 0.5
        f = found[RULE]
        assert 0 < f["estimated_gain_ms"] <= f["time_at_stake_ms"] <= value(report, "step.time_ms")
    else:  # bfloat16 instructions (or an unknown CPU): nothing is emulated, or nothing is claimed
        assert RULE not in found


def test_the_same_loop_in_float32_keeps_it_quiet(tmp_path):
    report, _ = _run(tmp_path, "fp32")
    assert value(report, "ops.emulated_lowp_ms") == 0.0
    assert RULE not in {f["rule"] for f in report["findings"]}


def test_a_float16_run_is_judged_by_the_float16_instructions_and_offered_bfloat16(tmp_path):
    """A float16 autocast loop on a CPU without float16 instructions is
    emulated whatever the CPU has for bfloat16; where it has bfloat16 the
    finding says to autocast to that instead (it said the CPU had "neither
    AVX512-BF16/AMX nor their float16 counterparts" on one with AVX512-BF16,
    and proposed float32)."""
    report, _ = _run(tmp_path, "fp16")
    machine = cpu_properties(torch)
    found = {f["rule"]: f for f in report["findings"]}
    if machine["fp16"] is not False:
        assert RULE not in found
        return
    assert value(report, "ops.emulated_lowp_types") == ["float16"]
    f = found[RULE]
    assert f["severity"] in SERIOUS and "float16 matrix products" in f["message"]
    assert "bfloat16 matrix products" not in f["message"] and "AVX512-BF16" not in f["message"]
    if machine["bf16"]:
        assert "autocast to bfloat16 instead of float16" in f["message"]
        assert 'dtype=torch.bfloat16' in f["fix"]["code"] and "enabled=cpu_bf16" not in f["fix"]["code"]
    else:
        assert "model.float()" in f["fix"]["code"]


def test_a_trace_that_does_not_record_the_cpu_leaves_it_unjudged(tmp_path, bf16_run):
    _, trace = bf16_run
    doc = json.loads(trace.read_text())
    del doc["cpuProperties"]
    bare = tmp_path / "elsewhere" / "rank0.pt.trace.json"
    bare.parent.mkdir()
    bare.write_text(json.dumps(doc))
    profile = read(bare)
    assert profile.meta.cpu is None
    out = tmp_path / "again"
    proc = subprocess.run([sys.executable, "-m", "advisor", "report", str(bare), "-o", str(out), "--no-color"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    again = json.loads((out / "report.json").read_text())
    reasons = {s["what"]: s["reason"] for s in again["skipped"]}
    assert "cpuProperties" in reasons["metric ops.emulated_lowp_ms"]
    assert RULE not in {f["rule"] for f in again["findings"]}


@pytest.mark.parametrize("machine, words, bf16, fp16", [
    # /proc/cpuinfo flags of an AVX2-only x86 core, a Sapphire Rapids core, and Arm Neoverse V1 features
    ("x86_64", "fpu vme sse sse2 avx fma avx2", False, False),
    ("x86_64", "avx2 avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8", True, True),
    ("aarch64", "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp bf16 i8mm sve", True, True),
    ("aarch64", "fp asimd evtstrm aes pmull sha1 sha2 crc32", False, False),
    ("riscv64", "", None, None),
])
def test_cpu_properties_read_the_instruction_flags(machine, words, bf16, fp16):
    got = cpu_properties(torch, words=set(words.split()), machine=machine)
    assert (got["arch"], got["bf16"], got["fp16"]) == (machine, bf16, fp16)
