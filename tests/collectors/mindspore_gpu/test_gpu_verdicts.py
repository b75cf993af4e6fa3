"""The verdicts a MindSpore GPU profile supports: input-bound and the slow
dataset op from the step trace and MindData files, tensor-core use from the
CUDA kernel names; fp32-compute is not judged (no input dtypes recorded).
Folders written by ``gpu_folder`` (sources cited there)."""

from __future__ import annotations

from pathlib import Path

import gpu_folder as gf
import pytest
from test_mindspore_gpu import HEALTHY, INPUT_BOUND

import advisor


def _findings(path: Path) -> dict:
    report = advisor.analyze(path, jobs=1)
    return report, {f.rule: f for f in report.all_findings()}


def test_input_bound_folder_gets_the_input_and_compute_verdicts(tmp_path):
    report, found = _findings(gf.write(tmp_path / "profiler", INPUT_BOUND))
    assert report.verdict.status == "problems"
    assert found["input-bound"].estimated_gain_ms == pytest.approx(45.0)
    assert "empty in 100.0% of samples" in found["input-bound"].message
    assert found["input-bound"].fix.framework == "mindspore"
    assert "Map_1" in found["slow-dataset-op"].message
    # sgemm 9 ms + implicit_convolve_sgemm 21 ms per step, of 38 ms of kernels
    tc = found["no-tensor-cores"]
    assert report.metrics["ops.fp32_no_tensor_core_ms"].value == pytest.approx(30.0)
    assert report.metrics["ops.fp32_no_tensor_core_ratio"].value == pytest.approx(30.0 / 38.0)
    assert tc.fix.framework == "mindspore" and 'amp_level="O2"' in tc.fix.code
    assert "Mixed precision" in tc.message and "TF32" not in tc.message
    # the GPU files record no input dtypes: fp32-compute is not judged, and says why
    assert "ops.fp32_matrix_ratio" not in report.metrics
    assert any("input_dtypes" in s.reason for s in report.skipped if "fp32_matrix" in s.what)


def test_healthy_folder_is_quiet(tmp_path):
    report, found = _findings(gf.write(tmp_path / "profiler", HEALTHY))
    assert not {"input-bound", "slow-dataset-op", "no-tensor-cores"} & set(found)
    assert report.metrics["ops.fp32_no_tensor_core_ratio"].value == 0.0
    assert report.metrics["step.iteration_interval_ratio"].value == pytest.approx(1.5 / 46.5, abs=1e-5)
