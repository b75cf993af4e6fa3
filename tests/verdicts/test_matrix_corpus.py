"""Float32 matrix work on the real GPU traces of the corpus: what counts as
matrix work (``advisor.metrics.op_classes``), the part already on tensor
cores as TF32, and the fp32-compute finding sized from both."""

from __future__ import annotations

import pytest

from advisor.metrics.op_classes import matrix_rows
from advisor.pipeline import analyze_profile, load_profile

DLRM = "hta/trace_filter"
RESNET_V100 = "kineto-tb-plugin/resnet50_num_workers_0"


@pytest.fixture(scope="module")
def dlrm(corpus):
    return load_profile(corpus / DLRM, jobs=1)


def test_embedding_kernels_are_no_matrix_work(dlrm):
    """The DLRM trace's FBGEMM embedding kernels (``split_embedding_*``, 40%
    of its compute time, their template arguments saying ``fbgemm_gpu``
    and ``c10::Half``) are neither matrix work nor a tensor-core path: its
    float32 matrix work is its CUTLASS/cuBLAS GEMMs, under a third of it."""
    report = analyze_profile(dlrm)
    m = report.metrics
    assert 0.2 <= m["ops.fp32_matrix_ratio"].value <= 0.35
    named = m["ops.fp32_matrix_ratio"].evidence["ops"] + m["ops.fp32_tensor_core_ms"].evidence["kernels"]
    assert named and all("gemm" in n for n in named)
    assert not [f for f in report.findings if f.rule == "fp32-compute"]


def test_tf32_gemms_are_sized_at_the_tensor_cores_bfloat16_gain(dlrm):
    """Most of those GEMMs already run on the A100's tensor cores as TF32
    (``cutlass_80_tensorop_s1688gemm``): with the rule's threshold lowered to
    make it fire, the finding says so and counts that part at 1.5x, the
    SIMT rest (``ampere_sgemm``) at 2x."""
    report = analyze_profile(dlrm, overrides={"fp32-compute": {"min_fp32_matrix_ratio": 0.2}})
    m = report.metrics
    tf32, fp32 = m["ops.fp32_tensor_core_ms"].value, m["ops.fp32_matrix_ms"].value
    assert 0.5 * fp32 < tf32 < fp32
    [f] = [f for f in report.findings if f.rule == "fp32-compute"]
    assert "already runs on the tensor cores as TF32" in f.message
    assert f.estimated_gain_ms == pytest.approx((fp32 - tf32) / 2 + tf32 / 3, rel=1e-3)
    assert f.estimated_gain_ms < fp32 / 2  # less than the 2x the rule gives float32 off the tensor cores


def test_cudnn_convolution_engines_count_and_batch_norm_does_not(corpus):
    """The V100 ResNet50 trace: cuDNN's ``volta_scudnn_*`` convolution
    engines are float32 matrix work off the tensor cores; its ``cudnn::bn_*``
    batch-norm kernels (about a fifth of its kernel time) are not matrix work."""
    profile = load_profile(corpus / RESNET_V100, jobs=1)
    ops = profile.table("ops")
    matrix = matrix_rows(ops)
    engines, batch_norm = ops["name"].str.contains("scudnn_"), ops["name"].str.contains("cudnn::bn_")
    assert engines.any() and matrix[engines].all()
    assert batch_norm.any() and not matrix[batch_norm].any()
    m = analyze_profile(profile).metrics
    assert m["ops.fp32_tensor_core_ms"].value == 0.0
    assert m["ops.fp32_no_tensor_core_ms"].value == pytest.approx(m["ops.fp32_matrix_ms"].value, rel=0.02)
