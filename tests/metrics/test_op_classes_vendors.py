"""Which kernels and operators are matrix work (``advisor.metrics.op_classes``):
real kernel names from ROCm traces (Tensile and hipBLASLt GEMMs, Composable
Kernel, MIOpen), from NVIDIA's CUTLASS, xmma and cuDNN, and AMD's matrix
cores (MFMA) as a tensor-core path; the batch-norm, layout and embedding
kernels of the corpus's GPU traces are not, nor operators whose names only
contain a matrix word."""

from __future__ import annotations

import pandas as pd
import pytest

from advisor.metrics import evaluate
from advisor.metrics.op_classes import MATRIX_KERNEL, MATRIX_OPERATOR, TENSOR_CORE, matrix_rows
from advisor.profile import Profile, RunMeta

#: name -> uses a tensor-core (MFMA / MMA) path; names as real traces and
#: profiler summaries print them (long ones cut where their sources cut them)
MATRIX_KERNELS = {
    # Tensile (rocBLAS) on MI100/MI200: the MFMA shape is in the name
    "Cijk_Alik_Bljk_HBH_MT128x128x64_MI32x32x8x1_SE_K1": True,
    "Cijk_Ailk_Bljk_HSS_MT96x96x32_MI16x16x1": True,
    # Tensile float32 without MFMA (no MI shape)
    "Cijk_Alik_Bljk_SB_MT64x128x16_SN_1LDSB0_": False,
    # hipBLASLt (TensileLite), bf16 and float32 inputs on the matrix cores
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x208x64_MI16x16x1_SN_LDSB1_AFC0_AFEM1_AFEM1_ASEM1_CLR1": True,
    "Cijk_Alik_Bljk_S_B_Bias_HA_S_SAV_UserArgs_MT16x16x256_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1": True,
    # Composable Kernel: XDL (MFMA) GEMMs
    "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemmMultiD_ABScale_xdl_cshuffle_v3<": True,
    "void ck::kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale_b_preshuffle<int>()": True,
    # MIOpen implicit-GEMM convolutions (gtcx: XDLOPS)
    "igemm_fwd_gtcx_cnhwc_fp16_ex0_bt256x128x32_wt32x32x8_ws2x1_wr2x2": True,
    "igemm_fwd_gtcx_nhwc_fp32_bx0_bt64x64x16": True,
    # NVIDIA libraries (the CUTLASS kernel is the corpus's hta/call_stack one)
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>": True,
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
    "__5x_cublas": True,
    "ampere_sgemm_128x64_nn": False,
    # cuDNN's convolution engines: {arch}_{type}cudnn_{tile} (the corpus's V100 ResNet50, a Turing fp16 engine)
    "volta_scudnn_128x128_stridedB_splitK_small_nn_v1": False,
    "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1": False,
    "turing_fp16_s1688cudnn_fp16_128x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1": True,
}
#: kernels of the corpus's hta traces that are no matrix work
NOT_MATRIX = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
    "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
    "void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int const*, int*)",
    "void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, false, long, 2ul, 32ul>"
    "(at::GenericPackedTensorAccessor<c10::Half, 1ul, at::RestrictPtrTraits, long>)",
    "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1<c10::Half, float, "
    "c10::Half, 2ul, 32>(fbgemm_gpu::FixedDivisor)",
    "void linearize_index_kernel<long>(at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>)",
    # cuDNN's batch-norm and layout kernels (the corpus's V100 ResNet50)
    "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float, float, float, float, "
    "cudnnTensorStruct, float const*)",
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct, float const*)",
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>"
    "(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)",
]
#: framework operator names and types (Ascend, MindSpore, PyTorch CPU) -> matrix work
OPERATORS = {
    "aten::linear": True, "aten::addmm": True, "aten::mm": True, "aten::bmm": True, "aten::convolution": True,
    "MatMulV2": True, "BatchMatMul": True, "Conv2D": True, "Default/network/Dense-op12": True,
    "LinearBackward0": True,
    "aten::upsample_bilinear2d": False, "aten::to_dense": False, "aten::_convert_indices_from_coo_to_csr": False,
    "fbgemm::asynchronous_complete_cumsum": False, "aten::add_": False, "TransData": False,
}


def _gpu_rows(names: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"name": names, "type": ["compute"] * len(names), "core": ["GPU"] * len(names)})


@pytest.mark.parametrize("name", list(MATRIX_KERNELS))
def test_matrix_kernels_of_every_vendor(name):
    assert MATRIX_KERNEL.search(name)
    assert matrix_rows(_gpu_rows([name])).all()
    assert bool(TENSOR_CORE.search(name)) is MATRIX_KERNELS[name]


@pytest.mark.parametrize("name", NOT_MATRIX)
def test_other_kernels_are_not_matrix_kernels(name):
    assert not MATRIX_KERNEL.search(name)
    assert not matrix_rows(_gpu_rows([name])).any()


@pytest.mark.parametrize("name", list(OPERATORS))
def test_framework_operators_are_matrix_work_by_their_name(name):
    ops = pd.DataFrame({"name": [name], "type": [name.split("/")[-1]], "core": ["AI_CORE"]})
    assert bool(matrix_rows(ops).iloc[0]) is OPERATORS[name]
    assert bool(MATRIX_OPERATOR.search(name)) is OPERATORS[name]


def test_rocm_float32_gemms_without_mfma_are_the_no_tensor_core_share():
    ops = pd.DataFrame({
        "rank": [0, 0, 0],
        "name": ["Cijk_Alik_Bljk_SB_MT64x128x16_SN_1LDSB0_", "Cijk_Ailk_Bljk_SB_MT64x64x16_MI32x32x2x1_SN",
                 "void at::native::vectorized_elementwise_kernel<4>"],
        "type": ["compute"] * 3, "core": ["GPU"] * 3, "count": [10, 10, 10],
        "total_us": [600.0, 300.0, 100.0], "input_dtypes": ["FLOAT;FLOAT", "FLOAT;FLOAT", "FLOAT"],
    })
    metrics, _ = evaluate(Profile(meta=RunMeta(ranks=[0]), ops=ops))
    # the Tensile GEMM without an MFMA shape; the one with MI32x32x2 runs on the matrix cores
    assert metrics["ops.fp32_no_tensor_core_ratio"].value == pytest.approx(0.6)
    assert metrics["ops.matrix_ratio"].value == pytest.approx(0.9)
