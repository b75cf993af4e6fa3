"""Which operators are what: device kernels, communication, matrix work,
tensor-core paths and float32 inputs, told from an operator's name, type,
core and input dtypes (the ``ops`` table). The operator metrics
(:mod:`advisor.metrics.ops`) read these and nothing else.

Matrix work is named at two grains, and the two patterns differ on purpose:

* ``MATRIX_OPERATOR`` reads an operator's type or name as the profilers
  write them -- framework operators (MatMul, BatchMatMul, Conv2D, Dense,
  ``aten::linear``/``addmm``/``bmm``/``mm``) and, on GPUs, kernel names. Every
  cuDNN kernel counts (``cudnn``): cuDNN's convolution engines
  (``volta_scudnn_128x64_relu_*``) do not say "conv" in their names.
  ``ops.matrix_ratio`` and ``ops.fp32_matrix_*`` use it.
* ``MATRIX_KERNEL`` reads GPU kernel names only, for the tensor-core check
  (``ops.fp32_no_tensor_core_*``): GEMM, implicit GEMM, cuDNN's
  data/weight-gradient and forward engines, Winograd, cuBLAS; not FBGEMM's
  embedding kernels (``fbgemm_gpu::...``) nor ``updateGradInput``, and not
  every cuDNN kernel (batch-norm and layout kernels are no matrix work).

On the same kernels the two disagree: FBGEMM embedding kernels and cuDNN's
batch-norm and layout kernels are matrix operators but not matrix kernels;
cuBLAS split-K reductions (``cublasLt::splitKreduce_kernel``) are matrix
kernels but not matrix operators.

Other vendors and libraries count at both grains: ROCm's Tensile and
hipBLASLt GEMMs (named by their index order, ``Cijk_Ailk_Bljk_...``),
Composable Kernel (``ck::kernel_gemm_xdl_cshuffle_v3<...>``,
``device_gemm_...``: their names say gemm or conv), MIOpen's convolutions
(``igemm_fwd_gtc_...``, ``MIOpenConv...``), CUTLASS and xmma. On AMD the
matrix cores are MFMA: Tensile names their instruction shape
(``_MI32x32x8x1``), Composable Kernel its XDL path (``_xdl``) and MIOpen's
implicit GEMM its XDLOPS kernels (``igemm_fwd_gtcx_...``); these count as
a tensor-core path.
"""

from __future__ import annotations

import re

import pandas as pd

#: Operator types that are device kernels (launches), as opposed to copies and sets.
KERNEL_TYPES = ("compute", "communication")
#: Cores whose operators are communication, not compute.
COMM_CORES = {"HCCL", "COMMUNICATION", "NCCL"}
#: Operator names of communication (HCCL ``hcom_*``, NCCL kernels, all-reduce).
COMM_NAME = r"hcom|nccl|allreduce"
#: Operator types / names doing matrix multiply or convolution (see the module doc).
MATRIX_OPERATOR = re.compile(
    r"matmul|batchmatmul|gemm|gemv|conv|dense|linear|addmm|baddbmm|\bbmm\b|\bmm\b|cutlass|xmma|cudnn"
    r"|(?<![a-z])cijk_",
    re.IGNORECASE,
)
#: GPU kernel names doing matrix multiply or convolution (GEMM, implicit
#: GEMM, cuDNN data/weight-gradient and forward-propagation engines, Winograd,
#: ROCm Tensile / hipBLASLt ``Cijk_*``, Composable Kernel and MIOpen gemm and
#: conv kernels); not FBGEMM's embedding kernels (``fbgemm_gpu::...``) nor
#: ``updateGradInput``.
MATRIX_KERNEL = re.compile(
    r"(?i:(?<!fb)gemm|gemv|matmul|conv(?!ert)|fprop|winograd|cutlass|xmma|cublas)|(?<![A-Za-z])[dw]grad"
    r"|(?<![A-Za-z])Cijk_"
)
#: Markers of a tensor-core path in a kernel name: cuBLAS/cuDNN/CUTLASS name
#: the MMA instruction shape (884 = Volta HMMA, 1688/16816/16832 = Turing and
#: Ampere MMA, s1688gemm = TF32), the data type (h/hgemm, bf16, fp16, tf32),
#: or the family (tensorop, xmma, wmma, hmma, imma, gmma/wgmma on Hopper);
#: on AMD, MFMA: Tensile's matrix-instruction shape (``_MI16x16x1``),
#: Composable Kernel's XDL kernels (``_xdl``), MIOpen's XDLOPS iGEMM (``gtcx``).
TENSOR_CORE = re.compile(
    r"tensorop|xmma|wmma|hmma|imma|gmma|mma_|_mma|tf32|bf16|fp16|half|884|1688|16816|16832|"
    r"\bh\w*gemm|_h\d*gemm|hgemm|_MI\d+x\d+|_xdl|_gtcx_",
    re.IGNORECASE,
)
#: Kernel names that say float32 when the launching op's input dtypes are
#: unknown: ``sgemm``/``scudnn`` (single precision) or a ``float`` template argument.
FP32_NAME = re.compile(r"sgemm|scudnn|\bfloat\b|f32f32", re.IGNORECASE)
#: Input dtype names of float32 (``input_dtypes`` is upper-case, ";"-joined).
FP32_DTYPES = {"FLOAT", "FLOAT32", "FP32", "DT_FLOAT"}


def per_value(values: pd.Series, test) -> pd.Series:
    """``test`` (a vectorized string test) applied once per distinct value
    of ``values`` and mapped back: operator tables repeat a few names and
    types over every rank."""
    values = values.astype(str)
    codes, distinct = values.factorize(use_na_sentinel=False)
    found = test(pd.Series(distinct)).to_numpy()
    return pd.Series(found[codes], index=values.index)


def first_input_fp32(dtypes: pd.Series) -> pd.Series:
    """True where the first of the ";"-joined input dtypes is float32
    (False where none were recorded)."""
    first = dtypes.fillna("").astype(str).str.upper().str.split(";").str[0].str.strip()
    return first.isin(FP32_DTYPES)
