"""Which operators are what: device kernels, communication, matrix work,
tensor-core paths and float32 inputs, told from an operator's name, type,
core and input dtypes (the ``ops`` table). The operator metrics
(:mod:`advisor.metrics.ops`) read these and nothing else.

Matrix work is told at two grains, one pattern each, and an ``ops`` row
is read with the one that fits what it names (``matrix_rows``):

* ``MATRIX_KERNEL`` reads the names of GPU kernels (rows of core ``GPU``
  and a kernel type): GEMM, implicit GEMM, cuDNN's data/weight-gradient and
  forward engines (``volta_scudnn_128x64_relu_*``, ``turing_fp16_s1688cudnn_*``:
  they do not say "conv"), Winograd, cuBLAS and its split-K reductions. Not
  every cuDNN kernel (``cudnn::bn_*`` batch norm and ``cudnn::ops::*`` layout
  kernels are no matrix work), nor FBGEMM's embedding kernels
  (``split_embedding_*``, whose template arguments say ``fbgemm_gpu``).
* ``MATRIX_OPERATOR`` reads framework operators' types and names (MatMul,
  BatchMatMul, Conv2D, Dense, ``aten::linear``/``addmm``/``bmm``/``mm``):
  Ascend kernel types, MindSpore operators, PyTorch CPU operators; not
  ``fbgemm::*``, ``*convert*``, ``upsample_bilinear2d`` nor ``to_dense``.

``ops.matrix_ratio``, ``ops.fp32_matrix_*``, ``ops.fp32_tensor_core_ms``
and ``ops.fp32_no_tensor_core_*`` all count matrix work this way.

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
    r"matmul|(?<!fb)gemm|gemv|conv(?!ert)|(?<![a-z_])dense|(?<!bi)linear(?!ize)|addmm|baddbmm|\bbmm\b|\bmm\b",
    re.IGNORECASE,
)
#: GPU kernel names doing matrix multiply or convolution (GEMM, implicit
#: GEMM, cuDNN data/weight-gradient and forward-propagation engines and its
#: convolution engines named ``{arch}_{type}cudnn_{tile}``, Winograd,
#: ROCm Tensile / hipBLASLt ``Cijk_*``, Composable Kernel and MIOpen gemm and
#: conv kernels); not FBGEMM's embedding kernels (``fbgemm_gpu::...``) nor
#: ``updateGradInput``.
MATRIX_KERNEL = re.compile(
    r"(?i:(?<!fb)gemm|gemv|matmul|conv(?!ert)|fprop|winograd|cutlass|xmma|cublas|[a-z0-9]cudnn_)|(?<![A-Za-z])[dw]grad"
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


def matrix_rows(ops: pd.DataFrame) -> pd.Series:
    """Rows of an ``ops`` table that are matrix work: GPU kernels by
    ``MATRIX_KERNEL`` on their name, other operators by ``MATRIX_OPERATOR``
    on their type or name (see the module doc)."""
    names = per_value(ops["name"], lambda v: v.str.contains(MATRIX_KERNEL))
    operator = per_value(ops["name"], lambda v: v.str.contains(MATRIX_OPERATOR))
    if "type" in ops.columns:
        operator |= per_value(ops["type"], lambda v: v.str.contains(MATRIX_OPERATOR))
    return names.where(gpu_kernel_rows(ops), operator)


def gpu_kernel_rows(ops: pd.DataFrame) -> pd.Series:
    """Rows of an ``ops`` table that are GPU kernels (core ``GPU``, a
    ``KERNEL_TYPES`` type): their names are kernel names."""
    if "core" not in ops.columns or "type" not in ops.columns:
        return pd.Series(False, index=ops.index)
    return (ops["core"].astype(str).str.upper() == "GPU") & ops["type"].isin(KERNEL_TYPES)


def first_input_fp32(dtypes: pd.Series) -> pd.Series:
    """True where the first of the ";"-joined input dtypes is float32
    (False where none were recorded)."""
    first = dtypes.fillna("").astype(str).str.upper().str.split(";").str[0].str.strip()
    return first.isin(FP32_DTYPES)
