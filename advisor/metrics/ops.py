"""Operator metrics: hot operators, matrix work in float32 (with and
without tensor cores), AI CPU time, host-to-device copies, short kernels,
thin matrix products on a CPU, and low-precision products on a CPU without
instructions for their type.

Which operator is matrix work, a kernel, communication or float32 is told
by :mod:`advisor.metrics.op_classes`. Ratios are per rank, mean over ranks
(every rank weighs the same); time per step is an operator class's total
over the profiled window divided by the rank's number of steps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.metrics.op_classes import (
    COMM_CORES,
    COMM_NAME,
    FP32_NAME,
    KERNEL_TYPES,
    MATRIX_KERNEL,
    TENSOR_CORE,
    first_input_fp32,
    gpu_kernel_rows,
    matrix_rows,
    per_value,
)
from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import (
    US_PER_MS,
    per_rank_mean,
    per_step_ms,
    rank_evidence,
    run_mean_ms,
    run_ratio,
    steady_steps,
    step_ms_value,
    step_ratio_value,
)
from advisor.metrics.window import require_device_record
from advisor.profile import Profile

#: Operators listed by ``ops.top``.
TOP_OPS = 10
#: Names listed in a metric's evidence.
TOP_NAMES = 5


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
        ops = ops[~per_value(ops["core"], lambda v: v.str.upper().isin(COMM_CORES))]
    return ops[~per_value(ops["name"], lambda v: v.str.contains(COMM_NAME, case=False, regex=True))]


def _is_matrix(p: Profile, ops: pd.DataFrame) -> pd.Series:
    """Matrix operators among ``ops`` (the profile's ``_compute_ops``)."""
    return p.memo("compute_ops_matrix", lambda: matrix_rows(ops))


def _is_gpu_kernel(p: Profile, ops: pd.DataFrame) -> pd.Series:
    """GPU kernels among ``ops`` (the profile's ``_compute_ops``): rows named by their kernel."""
    return p.memo("compute_ops_gpu_kernel", lambda: gpu_kernel_rows(ops))


def _is_fp32(p: Profile, ops: pd.DataFrame) -> pd.Series:
    """Operators among ``ops`` (the profile's ``_compute_ops``) whose first input is float32."""
    return p.memo("compute_ops_fp32", lambda: _fp32(ops))


def _fp32(ops: pd.DataFrame) -> pd.Series:
    return per_value(ops["input_dtypes"].fillna(""), first_input_fp32)


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
    top = grouped.nlargest(TOP_OPS, "total_us")
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
    kind = ops["type"].where(~_is_gpu_kernel(p, ops), ops["name"]) if "type" in ops.columns else ops["name"]
    names = ops[mask].groupby(kind[mask])["total_us"].sum().nlargest(TOP_NAMES)
    return Value(
        float(ops.loc[mask, "total_us"].sum() / ops["total_us"].sum()),
        {"ops": [str(n) for n in names.index]},
    )


@metric("ops.fp32_matrix_ms", unit="ms", needs=["ops.total_us", "ops.input_dtypes"])
def fp32_matrix_ms(p: Profile) -> Value:
    """Float32 matrix-operator time per step: their total time over the
    window divided by the number of steps in it (per rank, mean over ranks)."""
    ops = _compute_ops(p)
    return Value(_ms_per_step(p, ops[_is_matrix(p, ops) & _is_fp32(p, ops)]))


@metric("ops.fp32_tensor_core_ms", unit="ms", needs=["ops.total_us", "ops.input_dtypes"])
def fp32_tensor_core_ms(p: Profile) -> Value:
    """The part of ``ops.fp32_matrix_ms`` that already runs on tensor cores:
    GPU kernels of float32 matrix work whose name carries a ``TENSOR_CORE``
    marker (TF32 on NVIDIA since Ampere, ``cutlass_80_tensorop_s1688gemm``,
    ``sm80_xmma_..._tf32f32``; float32 MFMA on AMD). 0 where no such kernel
    ran, or where the operators are not GPU kernels (Ascend, CPU)."""
    ops = _compute_ops(p)
    fp32 = _is_matrix(p, ops) & _is_fp32(p, ops)
    tc = ops[fp32 & _is_gpu_kernel(p, ops) & per_value(ops["name"], lambda v: v.str.contains(TENSOR_CORE))]
    return Value(_ms_per_step(p, tc, ranks=ops.loc[fp32, "rank"].unique()), {"kernels": _top_names(tc)})


def _ms_per_step(p: Profile, ops: pd.DataFrame, ranks=None) -> float:
    """The total time of ``ops`` over the window divided by the number of
    steps in it, per rank, mean over ``ranks`` (default: the ranks that
    have any)."""
    per_rank = ops.groupby("rank")["total_us"].sum()
    if ranks is not None:
        per_rank = per_rank.reindex(ranks, fill_value=0.0)
    if per_rank.empty:
        return 0.0
    return float(per_rank.mean()) / _steps_in_window(p) / US_PER_MS


def _top_names(ops: pd.DataFrame) -> list[str]:
    """The ``TOP_NAMES`` names of ``ops`` with the most time."""
    return [str(n) for n in ops.groupby("name")["total_us"].sum().nlargest(TOP_NAMES).index]


@metric("ops.aicpu_ratio", unit="ratio", needs=["ops.total_us", "ops.core"])
def aicpu_ratio(p: Profile) -> Value:
    """Share of compute-operator time on AI CPU (Ascend operators without an
    AI Core kernel for this dtype/shape; usually far slower)."""
    ops = _compute_ops(p)
    aicpu = ops["core"].astype(str).str.upper().str.replace(" ", "_") == "AI_CPU"
    return Value(float(ops.loc[aicpu, "total_us"].sum() / ops["total_us"].sum()))


# ---------------------------------------------------------------- device kernels and copies


def _device_ops(p: Profile) -> pd.DataFrame:
    """Operators that run on the device (host-side CPU rows dropped)."""
    ops = p.table("ops")
    if "core" in ops.columns:
        ops = ops[ops["core"].astype(str).str.upper() != "CPU"]
    if ops.empty:
        raise NotEvaluated("no device operators")
    return ops


def _kernels(p: Profile) -> pd.DataFrame:
    ops = _device_ops(p)
    if "type" in ops.columns:
        ops = ops[ops["type"].isin(KERNEL_TYPES)]
    if ops.empty:
        raise NotEvaluated("no device kernels")
    return ops


def _h2d(p: Profile) -> tuple[pd.DataFrame, pd.Series]:
    """Device operators and the mask of host-to-device copies; NotEvaluated
    when the device record cannot support a per-step copy figure (start-up
    copies such as the first weight upload, a toy or a cut trace:
    ``window.device_record_gap``)."""
    require_device_record(p)
    ops = _device_ops(p)
    typ = ops["type"].astype(str)
    if not typ.str.startswith("memcpy").any():
        raise NotEvaluated("no memory copies with a known direction in this profile")
    return ops, typ == "memcpy_h2d"


@metric("ops.memcpy_h2d_ratio", unit="ratio", needs=["ops.type", "ops.total_us"])
def memcpy_h2d_ratio(p: Profile) -> Value:
    """Share of device-busy time spent copying host -> device: total time of
    host-to-device memcpy operations / total time of all device operations
    (kernels, copies, sets), per rank, mean over ranks. Evaluated when the
    profile types copies by direction (Kineto ``Memcpy HtoD ...`` ->
    ``memcpy_h2d``). The evidence gives the share of that copy time from
    pageable (not pinned) host memory, which cannot overlap compute."""
    ops, h2d = _h2d(p)
    total = ops.groupby("rank")["total_us"].sum()
    copy = ops[h2d].groupby("rank")["total_us"].sum().reindex(total.index, fill_value=0.0)
    ratio = (copy / total)[total > 0]
    if ratio.empty:
        raise NotEvaluated("no device operator time")
    h2d_time = float(ops.loc[h2d, "total_us"].sum())
    pageable = ops.loc[h2d, "name"].astype(str).str.contains("Pageable", case=False)
    evidence = {"pageable_share": float(ops.loc[h2d][pageable]["total_us"].sum() / h2d_time)
                if h2d_time > 0 else None}
    evidence.update(rank_evidence(ratio, scale=1.0))
    return Value(float(ratio.mean()), evidence)


@metric("ops.memcpy_h2d_ms", unit="ms", needs=["ops.type", "ops.total_us"])
def memcpy_h2d_ms(p: Profile) -> Value:
    """Host-to-device copy time per step: the H2D copies' total time over the
    profiled window divided by the rank's number of steps, mean over ranks."""
    ops, h2d = _h2d(p)
    ranks = ops["rank"].unique()
    per_rank = ops[h2d].groupby("rank")["total_us"].sum().reindex(ranks, fill_value=0.0)
    return Value(per_step_ms(p, per_rank))


@metric("ops.short_kernel_ratio", unit="ratio", needs=["ops.short_count", "ops.count"])
def short_kernel_ratio(p: Profile) -> Value:
    """Share of kernel launches that are short: launches shorter than the
    collector's bound (Kineto ``SHORT_KERNEL_US``, 10 us, about the host cost
    of one launch) / all kernel launches (compute and communication kernels;
    copies and sets excluded), per rank, mean over ranks. A high share means
    the device finishes kernels about as fast as the host can launch them."""
    k = _kernels(p)
    k = k[k["short_count"].notna()]
    if k.empty:
        raise NotEvaluated("no kernels with a short-launch count")
    count = k.groupby("rank")["count"].sum()
    short = k.groupby("rank")["short_count"].sum()
    ratio = (short / count)[count > 0]
    if ratio.empty:
        raise NotEvaluated("no kernel launches")
    top = k.groupby("name")["short_count"].sum().nlargest(TOP_NAMES)
    evidence = {"short_launches": int(short.sum()), "launches": int(count.sum()),
                "top_short": [str(n) for n, c in top.items() if c > 0]}
    evidence.update(rank_evidence(ratio, scale=1.0))
    return Value(float(ratio.mean()), evidence)


def _fp32_no_tc(p: Profile) -> tuple[pd.DataFrame, pd.Series]:
    """Compute kernels, and the mask of float32 matrix kernels without a
    tensor-core marker in their name; not evaluated on a GPU that has no
    tensor cores (compute capability below 7.0: nothing to move there)."""
    if p.meta.tensor_cores is False:
        raise NotEvaluated(f"the GPU (compute capability {p.meta.compute_capability}) has no tensor cores")
    k = _kernels(p)
    if "type" in k.columns:
        k = k[k["type"] == "compute"]
    if k.empty or k["total_us"].sum() <= 0:
        raise NotEvaluated("no compute kernels with time")
    names = k["name"].astype(str)
    distinct = pd.Series(names.unique())
    matrix = distinct.str.contains(MATRIX_KERNEL, regex=True)
    tensor_core = distinct.str.contains(TENSOR_CORE)
    fp32_name = distinct.str.contains(FP32_NAME)
    lookup = pd.DataFrame({"matrix": matrix.to_numpy(), "tc": tensor_core.to_numpy(),
                           "fp32": fp32_name.to_numpy()}, index=distinct.to_numpy())
    hit = lookup.reindex(names.to_numpy())
    if "input_dtypes" in k.columns:
        dt = k["input_dtypes"]
        fp32 = np.where(dt.notna().to_numpy(), first_input_fp32(dt).to_numpy(), hit["fp32"].to_numpy())
    else:
        fp32 = hit["fp32"].to_numpy()
    mask = pd.Series(hit["matrix"].to_numpy() & ~hit["tc"].to_numpy() & fp32.astype(bool), index=k.index)
    return k, mask


@metric("ops.fp32_no_tensor_core_ratio", unit="ratio", needs=["ops.name", "ops.total_us"])
def fp32_no_tensor_core_ratio(p: Profile) -> Value:
    """Share of compute-kernel time in float32 matrix kernels (GEMM,
    convolution) that do not use tensor cores, per rank, mean over ranks.

    Heuristic on kernel names (the profile has no instruction counts): a
    kernel is matrix work when its name matches ``MATRIX_KERNEL`` (gemm,
    conv, dgrad/wgrad/fprop, winograd, cutlass, xmma, cublas); it uses
    tensor cores when the name carries a ``TENSOR_CORE`` marker (tensorop,
    xmma, wmma, hmma, 884/1688/16816 MMA shapes, h*gemm, bf16, fp16, tf32,
    ...); it is float32 when the launching operator's first input dtype is
    float32, or, when dtypes were not recorded, when the name says so
    (sgemm, a ``float`` template argument). ``volta_sgemm_*``,
    ``implicit_convolve_sgemm`` and ``cudnn::detail::dgrad_engine<float...>``
    count; ``cutlass_80_tensorop_s1688gemm`` (TF32 on tensor cores) and
    ``volta_h884gemm`` do not."""
    k, mask = _fp32_no_tc(p)
    total = k.groupby("rank")["total_us"].sum()
    part = k[mask].groupby("rank")["total_us"].sum().reindex(total.index, fill_value=0.0)
    ratio = (part / total)[total > 0]
    top = k[mask].groupby("name")["total_us"].sum().nlargest(TOP_NAMES)
    evidence = {"kernels": [str(n) for n in top.index]}
    evidence.update(rank_evidence(ratio, scale=1.0))
    return Value(float(ratio.mean()), evidence)


@metric("ops.fp32_no_tensor_core_ms", unit="ms", needs=["ops.name", "ops.total_us"])
def fp32_no_tensor_core_ms(p: Profile) -> Value:
    """Time per step in float32 matrix kernels without tensor cores (see
    ``ops.fp32_no_tensor_core_ratio``): their total time over the window /
    the rank's number of steps, mean over ranks."""
    k, mask = _fp32_no_tc(p)
    per_rank = k[mask].groupby("rank")["total_us"].sum().reindex(k["rank"].unique(), fill_value=0.0)
    return Value(per_step_ms(p, per_rank))


# ---------------------------------------------------------------- host-to-device copies the step waits on


def _copy_ms(p: Profile, column: str) -> float:
    require_device_record(p)
    value = run_mean_ms(p, column)
    if value is None:
        raise NotEvaluated(f"no {column} values in steady-state steps")
    return value


@metric("ops.memcpy_h2d_exposed_ms", unit="ms", needs=["steps.copy_h2d_exposed_us"])
def memcpy_h2d_exposed_ms(p: Profile) -> Value:
    """Exposed host-to-device copy time per step: H2D copy time (union of
    ``Memcpy HtoD`` intervals) during which no kernel runs, so the step
    waits on the copy alone; copies overlapped by compute or communication
    kernels cost nothing here. Mean over ranks of each rank's mean over
    steady steps; the evidence gives all H2D copy time per step."""
    return Value(_copy_ms(p, "copy_h2d_exposed_us"), {"copy_h2d_ms": run_mean_ms(p, "copy_h2d_us")})


@metric("ops.memcpy_h2d_exposed_ratio", unit="ratio", needs=["steps.copy_h2d_exposed_us", "steps.duration_us"])
def memcpy_h2d_exposed_ratio(p: Profile) -> Value:
    """Share of the step spent in exposed host-to-device copies (see
    ``ops.memcpy_h2d_exposed_ms``)."""
    require_device_record(p)
    value = run_ratio(p, "copy_h2d_exposed_us")
    if value is None:
        raise NotEvaluated("no copy_h2d_exposed_us values with a positive step duration")
    return Value(value)


@metric("ops.memcpy_h2d_pageable_share", unit="ratio", needs=["steps.copy_h2d_us", "steps.copy_h2d_pageable_us"])
def memcpy_h2d_pageable_share(p: Profile) -> Value:
    """Share of the host-to-device copy time that copies from pageable (not
    pinned) host memory (Kineto ``Memcpy HtoD (Pageable -> Device)``): the
    driver stages such a copy through a pinned buffer, at a fraction of the
    link's bandwidth, and it cannot overlap compute. Steady steps, per rank
    (pageable / all H2D copy time), mean over ranks."""
    require_device_record(p)
    steps = steady_steps(p)
    sums = steps.groupby("rank")[["copy_h2d_us", "copy_h2d_pageable_us"]].sum()
    sums = sums[sums["copy_h2d_us"] > 0]
    if sums.empty:
        raise NotEvaluated("no host-to-device copies in steady-state steps")
    return Value(float((sums["copy_h2d_pageable_us"] / sums["copy_h2d_us"]).mean()))


@metric("ops.thin_matmul_ms", unit="ms", needs=["steps.thin_matmul_us"])
def thin_matmul_ms(p: Profile) -> Value:
    """Time per step in thin matrix products on a CPU run: matrix
    multiplies and convolutions whose rows or inner size are at most 8
    (``collectors/kineto/work.py`` ``THIN``), so that each number they read
    takes part in at most 8 multiply-adds and memory, not arithmetic, sets
    their pace -- a batch run row by row, a per-sample loop. Mean over ranks
    of each rank's mean over steady steps."""
    value = run_mean_ms(p, "thin_matmul_us")
    if value is None:
        raise NotEvaluated("no thin_matmul_us values")
    return Value(value, rank_evidence(per_rank_mean(p, "thin_matmul_us")))


@metric("ops.thin_matmul_ratio", unit="ratio", needs=["steps.thin_matmul_us", "steps.duration_us"])
def thin_matmul_ratio(p: Profile) -> Value:
    """Share of the step spent in thin matrix products (see
    ``ops.thin_matmul_ms``)."""
    return step_ratio_value(p, "thin_matmul_us")


@metric("ops.fp64_matmul_ms", unit="ms", needs=["steps.fp64_matmul_us"])
def fp64_matmul_ms(p: Profile) -> Value:
    """Time per step in float64 matrix products on a CPU run: matrix
    multiplies and convolutions whose operands are float64
    (``Input type`` double, ``collectors/kineto/work.py``) -- a model or its data
    left in double precision (``model.double()``,
    ``torch.set_default_dtype(torch.float64)``, a NumPy array's float64
    turned into a tensor). Mean over ranks of each rank's mean over steady
    steps, with its standard error over steps."""
    return step_ms_value(p, "fp64_matmul_us")


@metric("ops.fp64_matmul_ratio", unit="ratio", needs=["steps.fp64_matmul_us", "steps.duration_us"])
def fp64_matmul_ratio(p: Profile) -> Value:
    """Share of the step spent in float64 matrix products (see
    ``ops.fp64_matmul_ms``)."""
    return step_ratio_value(p, "fp64_matmul_us")


@metric("ops.frozen_grad_ms", unit="ms", needs=["steps.frozen_grad_us"])
def frozen_grad_ms(p: Profile) -> Value:
    """Time per step spent computing gradients no optimizer reads on a CPU
    run: the accumulations of gradients whose shape none of the step's
    optimizer operators takes, and the backward matrix products that make
    such 2-D gradients (``collectors/kineto/frozen_grads.py``) -- parameters
    left with ``requires_grad=True`` outside the optimizer, such as a frozen
    backbone. A lower bound: the products that carry the gradient to them
    are not counted. Mean over ranks of each rank's mean over steady steps
    with an optimizer step, with its standard error over steps."""
    return step_ms_value(p, "frozen_grad_us")


@metric("ops.frozen_grad_ratio", unit="ratio", needs=["steps.frozen_grad_us", "steps.duration_us"])
def frozen_grad_ratio(p: Profile) -> Value:
    """Share of the step spent computing gradients no optimizer reads (see
    ``ops.frozen_grad_ms``)."""
    return step_ratio_value(p, "frozen_grad_us")


@metric("ops.frozen_grads", unit="count", needs=["steps.frozen_grads"])
def frozen_grads(p: Profile) -> Value:
    """Gradients accumulated per step that no operator of the step's
    optimizer takes (``collectors/kineto/frozen_grads.py``): mean over
    ranks of each rank's mean over steady steps with an optimizer step."""
    ranks = per_rank_mean(p, "frozen_grads")
    if ranks.empty:
        raise NotEvaluated("no frozen_grads values (no optimizer step, no recorded gradient shapes, or a fused "
                           "optimizer, whose tensor lists the profiler records without shapes)")
    return Value(float(ranks.mean()), rank_evidence(ranks))


@metric("ops.param_copy_ms", unit="ms", needs=["steps.param_copy_us"])
def param_copy_ms(p: Profile) -> Value:
    """Time per step in clones of the model's parameters on a CPU run
    (``collectors/kineto/param_copies.py``): ``aten::clone`` calls shaped
    like a parameter, at most one per gradient the step accumulates of that
    shape, none made by autograd or an optimizer -- ``copy.deepcopy(model)``
    or ``p.clone()`` over the parameters in the loop. The Python around them
    is not counted. Mean over ranks of each rank's mean over steady steps,
    with its standard error over steps."""
    return step_ms_value(p, "param_copy_us")


@metric("ops.param_copy_ratio", unit="ratio", needs=["steps.param_copy_us", "steps.duration_us"])
def param_copy_ratio(p: Profile) -> Value:
    """Share of the step spent cloning the model's parameters (see
    ``ops.param_copy_ms``)."""
    return step_ratio_value(p, "param_copy_us")


@metric("ops.param_copy_share", unit="ratio", needs=["steps.param_copies", "steps.param_tensors"])
def param_copy_share(p: Profile) -> Value:
    """Of the parameter tensors that get a gradient in a step
    (``steps.param_tensors``), the share cloned in that step
    (``steps.param_copies``): 1 when the whole model is copied every step.
    The lowest over ranks of each rank's median over steady steps."""
    steps = steady_steps(p).dropna(subset=["param_copies", "param_tensors"])
    steps = steps[steps["param_tensors"] > 0]
    if steps.empty:
        raise NotEvaluated("no steady step with gradient accumulations whose shapes were recorded")
    share = (steps["param_copies"] / steps["param_tensors"]).groupby(steps["rank"]).median()
    return Value(float(share.min()), {"parameter_tensors": float(steps["param_tensors"].median()), **rank_evidence(share, 1)})


#: Steps columns of low-precision matrix work on a CPU, and the ``meta.cpu``
#: field that says whether the CPU has instructions for that type.
LOWP_COLUMNS = (("bf16_matmul_us", "bf16", "bfloat16"), ("fp16_matmul_us", "fp16", "float16"))


def _unsupported_lowp(p: Profile) -> list[str]:
    """The columns of ``LOWP_COLUMNS`` whose products ran on a CPU without
    instructions for their type; NotEvaluated when a type has products and
    the profile does not say whether the CPU has them."""
    cpu = p.meta.cpu
    chosen = []
    for column, flag, spelled in LOWP_COLUMNS:
        if not run_mean_ms(p, column):
            continue
        native = getattr(cpu, flag) if cpu is not None else None
        if native is None:
            raise NotEvaluated(f"the run has {spelled} matrix products, and the profile does not record whether its "
                               f"CPU has {spelled} instructions (advisor run records them: cpuProperties)")
        if not native:
            chosen.append(column)
    return chosen


@metric("ops.emulated_lowp_ms", unit="ms", needs=["steps.bf16_matmul_us", "steps.fp16_matmul_us"])
def emulated_lowp_ms(p: Profile) -> Value:
    """Time per step in bfloat16 / float16 matrix products and convolutions
    on a CPU without arithmetic instructions for that type (``meta.cpu``:
    x86 AVX512-BF16 / AMX-BF16 for bfloat16, AVX512-FP16 / AMX-FP16 for
    float16; Arm bf16 / fphp): PyTorch then widens every element to float32
    and back, and a product takes tens of times its float32 time (12-60x
    for bfloat16, 38-88x for float16, measured on an AVX2 core). 0 when the
    run has no such products. Mean over ranks of each rank's mean over
    steady steps."""
    columns = _unsupported_lowp(p)
    value = sum(run_mean_ms(p, c) or 0.0 for c in columns)
    per_rank = (pd.concat([per_rank_mean(p, c) for c in columns], axis=1).sum(axis=1) if columns
                else pd.Series(dtype=float))
    return Value(value, rank_evidence(per_rank))


@metric("ops.emulated_lowp_types", unit="list", needs=["steps.bf16_matmul_us", "steps.fp16_matmul_us"])
def emulated_lowp_types(p: Profile) -> Value:
    """The low-precision types (``bfloat16``, ``float16``) whose matrix
    products ran on a CPU without instructions for them (see
    ``ops.emulated_lowp_ms``); empty when none did."""
    spelled = {column: name for column, _, name in LOWP_COLUMNS}
    return Value([spelled[c] for c in _unsupported_lowp(p)])


@metric("ops.emulated_lowp_ratio", unit="ratio", needs=["steps.bf16_matmul_us", "steps.fp16_matmul_us",
                                                         "steps.duration_us"])
def emulated_lowp_ratio(p: Profile) -> Value:
    """Share of the step spent in low-precision products the CPU has no
    instructions for (see ``ops.emulated_lowp_ms``)."""
    return Value(sum(run_ratio(p, c) or 0.0 for c in _unsupported_lowp(p)))
