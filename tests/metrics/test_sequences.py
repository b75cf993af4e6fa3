"""advisor.metrics.sequences and the rule fusable-sequence on real-format
inputs: Kineto traces built event by event in the PyTorch profiler's format
(bench/scenarios/kineto_trace.py, schema 1 with CUDA activities: kernels
named as ATen's CUDA kernels are), kernel_details.csv written to torch_npu's
documented column set (the fixtures of tests/metrics/test_kernels.py), and
the corpus's healthy traces.

A CPU-only trace has no device kernels: its operators run on the host, and
the time between them is Python and dispatch, not launch gaps the device
waits in; the collector writes no kernel_sequences for it and the rule
does not judge it (host-bound covers host time).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.metrics.sequences import pattern_of, short_name
from advisor.pipeline import analyze
from bench.scenarios import kineto_trace as kt
from bench.scenarios.ascend import STEP_TRACE_HEADER
from tests.metrics.test_kernels import _row, _write

RULE = "fusable-sequence"


def _rules(report) -> dict:
    return {f.rule: f for f in report.all_findings()}


def _findings_with_contributors(report) -> dict:
    out = {}
    for f in report.all_findings():
        out[f.rule] = f
        for c in getattr(f, "contributing", None) or []:
            out[c.rule] = c
    return out


def test_eager_rmsnorm_chain_fires_with_its_pattern_and_api(tmp_path):
    path = kt.rmsnorm_layers(steps=6, layers=16).write(tmp_path / "eager.pt.trace.json")
    report = analyze(path, jobs=1)
    m = report.metrics
    assert m["sequences.top_repeats"].value >= 15
    assert m["sequences.top_busy_ratio"].value < 0.4
    assert "MeanOps" in m["sequences.top_sequence"].value
    assert "rsqrt_kernel_cuda" in m["sequences.top_sequence"].value
    assert m["sequences.affinity_api"].evidence["pattern"] == "RMSNorm"
    # the gain bound: the gaps are part of the sequence's span, never more than the step
    assert 0 < m["sequences.top_gap_ms"].value < m["step.time_ms"].value
    found = _findings_with_contributors(report)
    assert RULE in found
    assert "rms_norm" in found[RULE].message
    assert found[RULE].estimated_gain_ms <= m["sequences.top_gap_ms"].value + 1e-9


def test_the_same_layers_compiled_stay_quiet(tmp_path):
    path = kt.rmsnorm_layers(steps=6, layers=16, fused=True).write(tmp_path / "compiled.pt.trace.json")
    report = analyze(path, jobs=1)
    assert RULE not in _findings_with_contributors(report)
    seq = report.metrics["sequences.top_sequence"]
    assert seq.value is None or "pow_tensor" not in seq.value


def test_long_kernels_queued_back_to_back_stay_quiet(tmp_path):
    # sync_every_step: 60 matmuls of 200 us a step, the host runs ahead: no launch gaps
    path = kt.sync_every_step(steps=6).write(tmp_path / "queued.pt.trace.json")
    report = analyze(path, jobs=1)
    assert RULE not in _findings_with_contributors(report)


# -------------------------------------------------------------- Ascend text

RMSNORM_NPU = [("aclnnPowTensorScalar_Pow", "Pow"), ("aclnnMean_ReduceMean", "ReduceMean"),
               ("aclnnAdds_Add", "Add"), ("aclnnRsqrt_Rsqrt", "Rsqrt"), ("aclnnMul_Mul", "Mul")]


def _npu_run(folder: Path, steps: int, layers: int, gap: float, fused: bool) -> Path:
    """kernel_details.csv and step_trace_time.csv (bench.scenarios.ascend's
    column set) of ``steps`` steps of ``layers`` layers: a matmul, then an
    RMSNorm as five small vector kernels each ``gap`` us after the last
    (``fused``: one RmsNorm kernel), then the step's allreduce."""
    rows, trace, t = [], [STEP_TRACE_HEADER], 1736413971558972.0
    for s in range(1, steps + 1):
        begin, busy = t, 0.0
        for _ in range(layers):
            rows.append(_row(s, t, "aclnnMatmul_MatMulV2", "MatMulV2", "AI_CORE", 80.0, "4096,4096;4096,4096",
                             "DT_BF16;DT_BF16"))
            t += 80.0 + 3.0
            busy += 80.0
            chain = [("aclnnRmsNorm_RmsNorm", "RmsNorm")] if fused else RMSNORM_NPU
            for name, op_type in chain:
                rows.append(_row(s, t, name, op_type, "AI_VECTOR_CORE", 5.0, "4096,4096", "DT_BF16"))
                t += 5.0 + gap
                busy += 5.0
        rows.append(_row(s, t, "hcom_allReduce__600_1_1", "hcom_allReduce_", "HCCL", 300.0, "", ""))
        t += 400.0
        free = t - begin - busy - 300.0
        trace.append(f"{s},{busy:.3f},300.000,0.000,300.000,{free:.3f},{t - begin:.3f},0.000,300.000\n")
    _write(folder, rows)
    (folder / "step_trace_time.csv").write_text("".join(trace))
    return folder


def test_ascend_chain_with_launch_gaps_fires_and_names_npu_rms_norm(tmp_path):
    report = analyze(_npu_run(tmp_path, steps=4, layers=12, gap=25.0, fused=False), jobs=1)
    m = report.metrics
    assert m["sequences.top_repeats"].value == pytest.approx(12, abs=1)
    assert m["sequences.top_sequence"].value == "Pow -> ReduceMean -> Add -> Rsqrt -> Mul"
    assert m["sequences.affinity_api"].value == "torch_npu.npu_rms_norm"
    found = _findings_with_contributors(report)
    assert RULE in found and "torch_npu.npu_rms_norm" in found[RULE].message


def test_ascend_fused_rmsnorm_stays_quiet(tmp_path):
    report = analyze(_npu_run(tmp_path, steps=4, layers=12, gap=3.0, fused=True), jobs=1)
    assert RULE not in _findings_with_contributors(report)
    assert report.metrics["sequences.affinity_api"].value == ""


# ------------------------------------------------------------------ names


@pytest.mark.parametrize("kernels, pattern", [
    (" -> ".join(k for _, k in kt.RMSNORM_CHAIN), "RMSNorm"),
    (kt.GEMM + " -> " + kt.RMSNORM_FUSED, None),
    ("Pow -> ReduceMean -> Add -> Rsqrt -> Mul", "RMSNorm"),
    ("Swish -> Mul", "SwiGLU"),
    ("BatchMatMul -> SoftmaxV2 -> BatchMatMul", "softmax attention"),
    ("Neg -> ConcatD -> Mul -> Add", "rotary embedding"),
    ("MatMulV2 -> Add -> Gelu", None),
])
def test_known_patterns(kernels, pattern):
    assert pattern_of(kernels) == pattern


def test_short_names_of_aten_kernels():
    assert short_name(kt.RMSNORM_CHAIN[4][1]) == "vectorized_elementwise_kernel<MulFunctor>"
    assert short_name(kt.RMSNORM_CHAIN[1][1]) == "reduce_kernel<MeanOps>"
    gelu = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
            "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, "
            "at::detail::Array<char*, 2> >")
    assert short_name(gelu) == "vectorized_elementwise_kernel<GeluCUDAKernelImpl>"
    assert short_name(kt.RMSNORM_CHAIN[0][1]) == "vectorized_elementwise_kernel<pow_tensor_scalar_kernel_impl>"
    assert short_name("MatMulV2") == "MatMulV2"


# ------------------------------------------------------------------ corpus


def test_zero_grad_fills_in_the_resnet50_corpus_fire_as_a_per_tensor_loop(corpus):
    # SGD.zero_grad with set_to_none=False: one aten::zero_ (a FillFunctor kernel) per parameter
    # tensor, 161 a step, each a few us with a launch gap after it
    report = analyze(corpus / "kineto-tb-plugin/resnet50_num_workers_4", jobs=1)
    m = report.metrics
    # eight fills in a row, shown once with their count
    assert m["sequences.top_sequence"].value == "vectorized_elementwise_kernel<FillFunctor> x8"
    assert m["sequences.top_distinct"].value == 1
    assert m["sequences.top_repeats"].value > 100
    assert m["sequences.top_gap_ms"].value < m["step.time_ms"].value
    found = _findings_with_contributors(report)
    assert RULE in found and "zero_grad" in found[RULE].message
    # the fix leads with the loop over tensors made one call; compiling is the second way
    code = found[RULE].fix.code.splitlines()
    assert code[1].startswith("optimizer.zero_grad(set_to_none=True)"), code
    assert not any(line.startswith("model = torch.compile") for line in code), code


@pytest.mark.parametrize("profile", ["hta/nccl_parser_config/nccl_data.json.gz", "hta/trace_filter",
                                     "mstt/test/ut/advisor/compute_advice/data/kernel_details.csv"])
def test_quiet_on_corpus_profiles_without_a_repeated_launch_bound_chain(corpus, profile):
    report = analyze(corpus / profile, jobs=1)
    assert "sequences.top_repeats" in report.metrics
    assert RULE not in _findings_with_contributors(report)


def test_a_trace_of_host_ops_only_is_not_judged(corpus):
    # host ops run on the CPU: the time between them is Python and dispatch, not launch gaps
    report = analyze(corpus / "hta/distributed_info_unavailable", jobs=1)
    assert "sequences.top_repeats" not in report.metrics
    assert any("kernel_sequences" in s.reason for s in report.skipped if "sequences." in s.what)
