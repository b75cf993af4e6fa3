"""Repeated operator sequences bound by memory transfer (the ``mte_us`` /
``pipe_us`` of ``kernel_sequences``, ``sequences.mte_top_*`` and the rule
memory-bound-sequence) on torch_npu rank folders written to the documented
format: kernel_details.csv with its PipeUtilization columns, the rows of
tests/metrics/test_kernels.py (aiv_time(us), aiv_mte2_time(us),
aiv_mte3_time(us) ... as torch_npu writes them; the corpus's
mstt/test/ut/advisor/compute_advice/data/kernel_details.csv has the same
columns), and step_trace_time.csv. msprof-analyze's fusible-operator check
(advisor/analyzer/schedule/fusible_ops/fusible_operator_checker.py) weighs a
sequence the same way: MTE2 load plus MTE3 / FIXPIPE store over busy time."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.pipeline import analyze
from tests.metrics.test_kernels import HEADER, _train

STEPS = 4
#: a MatMul, then a Cast -> Mul -> Add chain repeated 12 times: 400 + 12 x 90 us of kernels a step
MATMUL = ("aclnnMatmul_MatMulV2", "MatMulV2", "AI_CORE", 400.0, "4096,4096;4096,4096", "DT_BF16;DT_BF16",
          {"cube": (0.8, 0.3, 0.1)})


def _chain(vec: tuple[float, float, float]) -> list[tuple]:
    return [(f"aclnn{t}_{t}", t, "AI_VECTOR_CORE", 30.0, "4096,1024;4096,1024", "DT_BF16;DT_BF16", {"vec": vec})
            for t in ("Cast", "Mul", "Add")]


def _rank_folder(tmp_path: Path, vec: tuple[float, float, float]) -> Path:
    root = tmp_path / "worker_1234_20250101000000000_ascend_pt"
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    rows = _train(STEPS, lambda s: [MATMUL] + _chain(vec) * 12)
    (out / "kernel_details.csv").write_text(HEADER + "\n" + "\n".join(rows) + "\n")
    # 400 + 1080 us of kernels, 37 gaps of 2 us, and 150 us of host time a step
    (out / "step_trace_time.csv").write_text(
        "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
        "Communication(Not Overlapped and Exclude Receive),Preparing\n"
        + "".join(f"{s},1554.0,0,0,0,150.0,1704.0,0,0,0\n" for s in range(1, STEPS + 1)))
    return root


def _rules(report) -> dict:
    return {f.rule: f for f in report.all_findings()}


def test_a_chain_bound_by_memory_transfer_fires(tmp_path):
    # the vector part's MTE2 load 60% and MTE3 store 30% of its time: 90% memory transfer
    report = analyze(_rank_folder(tmp_path, (0.1, 0.6, 0.3)), jobs=1)
    ratio = report.metrics["sequences.mte_top_ratio"]
    assert ratio.value == pytest.approx(0.9, rel=1e-3)
    assert report.metrics["sequences.mte_top_repeats"].value > 5  # msprof-analyze's sequence_count_threshold
    # the chain's kernels (0.97 of 30 us busy each) moved data 90% of it, each kernel counted once
    mte = report.metrics["sequences.mte_top_ms"].value
    assert mte == pytest.approx(report.metrics["sequences.mte_top_device_ms"].value * 0.97 * 0.9, rel=1e-3)
    assert {"Cast", "Mul", "Add"} & set(report.metrics["sequences.mte_top_sequence"].value.split(" -> "))
    finding = _rules(report)["memory-bound-sequence"]
    assert finding.estimated_gain_ms == pytest.approx(0.3 * mte, rel=1e-2)
    assert "fusable-sequence" not in _rules(report)  # 2 us gaps: not a launch-bound chain


def test_a_chain_bound_by_its_vector_pipe_is_quiet(tmp_path):
    report = analyze(_rank_folder(tmp_path, (0.7, 0.2, 0.1)), jobs=1)
    assert report.metrics["sequences.mte_top_ratio"].value == pytest.approx(0.3, rel=1e-3)
    assert "memory-bound-sequence" not in _rules(report)


def test_the_chain_and_its_memory_bound_operators_are_one_finding(tmp_path):
    # MTE2 busy 75% of the time: memory-bound-ops counts the same operators' time
    report = analyze(_rank_folder(tmp_path, (0.1, 0.75, 0.15)), jobs=1)
    rules = _rules(report)
    assert {"memory-bound-sequence", "memory-bound-ops"} <= set(rules)
    primaries = {f.rule for f in report.findings}
    assert len({"memory-bound-sequence", "memory-bound-ops"} & primaries) == 1


def test_a_chain_whose_mte_pipes_record_nothing_is_quiet(tmp_path):
    report = analyze(_rank_folder(tmp_path, (0.0, 0.0, 0.0)), jobs=1)
    assert report.metrics["sequences.mte_top_ratio"].value == 0.0
    assert "memory-bound-sequence" not in _rules(report)


def test_the_corpus_kernels_are_measured_and_stay_quiet(corpus):
    # real torch_npu kernel_details.csv with PipeUtilization columns: its top MTE sequence repeats only
    # 4 times a step (the peer reports no fusible sequence there either)
    report = analyze(corpus / "mstt/test/ut/advisor/compute_advice/data", jobs=1)
    assert report.metrics["sequences.mte_top_ratio"].value > 0
    assert report.metrics["sequences.mte_top_repeats"].value <= 5
    assert "memory-bound-sequence" not in _rules(report)
