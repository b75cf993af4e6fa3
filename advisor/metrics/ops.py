"""Operator metrics: hot operators, float32 matrix work, AI CPU time."""

from __future__ import annotations

import re

import pandas as pd

from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import US_PER_MS
from advisor.profile import Profile

#: Cores whose operators are communication, not compute.
COMM_CORES = {"HCCL", "COMMUNICATION", "NCCL"}
#: Operator types / kernel names doing matrix multiply or convolution (cube work).
MATRIX_OP = re.compile(
    r"matmul|batchmatmul|gemm|gemv|conv|dense|linear|addmm|baddbmm|\bbmm\b|\bmm\b|cutlass|xmma|cudnn",
    re.IGNORECASE,
)
FP32 = {"FLOAT", "FLOAT32", "FP32", "DT_FLOAT"}
TOP_N = 10


def _per_value(values: pd.Series, test) -> pd.Series:
    """``test`` (a vectorized string test) applied once per distinct value
    of ``values`` and mapped back: operator tables repeat a few names and
    types over every rank."""
    values = values.astype(str)
    codes, distinct = values.factorize(use_na_sentinel=False)
    found = test(pd.Series(distinct)).to_numpy()
    return pd.Series(found[codes], index=values.index)


def _compute_ops(p: Profile) -> pd.DataFrame:
    """Operators that are not communication (memoized per profile; callers
    never modify it)."""
    ops = p.memo("compute_ops", lambda: _non_comm_ops(p))
    if ops.empty or ops["total_us"].sum() <= 0:
        raise NotEvaluated("no compute operators with time")
    return ops


def _non_comm_ops(p: Profile) -> pd.DataFrame:
    ops = p.table("ops")
    if "core" in ops.columns:
        ops = ops[~_per_value(ops["core"], lambda v: v.str.upper().isin(COMM_CORES))]
    return ops[~_per_value(ops["name"], lambda v: v.str.contains(r"hcom|nccl|allreduce", case=False, regex=True))]


def _is_matrix(p: Profile, ops: pd.DataFrame) -> pd.Series:
    """Matrix operators among ``ops`` (the profile's ``_compute_ops``)."""
    return p.memo("compute_ops_matrix", lambda: _matrix(ops))


def _matrix(ops: pd.DataFrame) -> pd.Series:
    kind = ops["type"] if "type" in ops.columns else ops["name"]
    return _per_value(kind, lambda v: v.str.contains(MATRIX_OP)) | _per_value(
        ops["name"], lambda v: v.str.contains(MATRIX_OP)
    )


def _is_fp32(p: Profile, ops: pd.DataFrame) -> pd.Series:
    """Operators among ``ops`` (the profile's ``_compute_ops``) whose first input is float32."""
    return p.memo("compute_ops_fp32", lambda: _fp32(ops))


def _fp32(ops: pd.DataFrame) -> pd.Series:
    def first_is_fp32(dtypes: pd.Series) -> pd.Series:
        return dtypes.str.upper().str.split(";").str[0].str.strip().isin(FP32)

    return _per_value(ops["input_dtypes"].fillna(""), first_is_fp32)


def _steps_in_window(p: Profile) -> int:
    steps = p.table("steps")
    if steps is None:
        return 1
    return max(1, int(steps.groupby("rank").size().max()))


@metric("ops.top", unit="list", scope="op", needs=["ops.total_us"])
def top_ops(p: Profile) -> Value:
    """The 10 operators with the most total device time over the profiled
    window, summed over ranks, with type, core, input dtypes and their share
    of all operator time."""
    ops = p.table("ops")
    keys = [c for c in ("name", "type", "core", "input_dtypes") if c in ops.columns]
    grouped = ops.groupby(keys, dropna=False)[["total_us", "count"]].sum().reset_index()
    total = grouped["total_us"].sum()
    top = grouped.nlargest(TOP_N, "total_us")
    rows = []
    for _, r in top.iterrows():
        row = {k: (None if pd.isna(r[k]) else str(r[k])) for k in keys}
        row.update(
            total_ms=round(float(r["total_us"]) / US_PER_MS, 3),
            count=int(r["count"]),
            share=round(float(r["total_us"] / total), 4) if total > 0 else None,
        )
        rows.append(row)
    return Value(rows)


@metric("ops.matrix_ratio", unit="ratio", needs=["ops.total_us"])
def matrix_ratio(p: Profile) -> Value:
    """Share of compute-operator time in matrix multiply / convolution
    operators (MatMul, BatchMatMul, Conv*, GEMM kernels), any dtype."""
    ops = _compute_ops(p)
    return Value(float(ops.loc[_is_matrix(p, ops), "total_us"].sum() / ops["total_us"].sum()))


@metric("ops.fp32_matrix_ratio", unit="ratio", needs=["ops.total_us", "ops.input_dtypes"])
def fp32_matrix_ratio(p: Profile) -> Value:
    """Share of compute-operator time in matrix multiply / convolution
    operators whose first input is float32. Evaluated only when the profile
    records operator input dtypes."""
    ops = _compute_ops(p)
    mask = _is_matrix(p, ops) & _is_fp32(p, ops)
    names = (
        ops[mask].groupby("type" if "type" in ops.columns else "name")["total_us"].sum().nlargest(5)
    )
    return Value(
        float(ops.loc[mask, "total_us"].sum() / ops["total_us"].sum()),
        {"ops": [str(n) for n in names.index]},
    )


@metric("ops.fp32_matrix_ms", unit="ms", needs=["ops.total_us", "ops.input_dtypes"])
def fp32_matrix_ms(p: Profile) -> Value:
    """Float32 matrix-operator time per step: their total time over the
    window divided by the number of steps in it (per rank, mean over ranks)."""
    ops = _compute_ops(p)
    mask = _is_matrix(p, ops) & _is_fp32(p, ops)
    per_rank = ops[mask].groupby("rank")["total_us"].sum()
    if per_rank.empty:
        return Value(0.0)
    return Value(float(per_rank.mean()) / _steps_in_window(p) / US_PER_MS)


@metric("ops.aicpu_ratio", unit="ratio", needs=["ops.total_us", "ops.core"])
def aicpu_ratio(p: Profile) -> Value:
    """Share of compute-operator time on AI CPU (Ascend operators without an
    AI Core kernel for this dtype/shape; usually far slower)."""
    ops = _compute_ops(p)
    aicpu = ops["core"].astype(str).str.upper().str.replace(" ", "_") == "AI_CPU"
    return Value(float(ops.loc[aicpu, "total_us"].sum() / ops["total_us"].sum()))
