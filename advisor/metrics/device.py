"""Device-side metrics: where device idle time goes, copies, short kernels,
float32 matrix work without tensor cores, and the collective straggler.

Run values are the mean over ranks of each rank's value (every rank weighs
the same); step-table values use steady-state steps (see ``steps_view``).
The collectors measure; the definitions below say what each number means.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import US_PER_MS, per_rank_mean, rank_evidence, run_mean_ms, run_ratio
from advisor.profile import Profile

#: Operator types that are device kernels (launches), as opposed to copies and sets.
KERNEL_TYPES = ("compute", "communication")
#: Kernel names doing matrix multiply or convolution (GEMM, implicit GEMM,
#: cuDNN data/weight-gradient and forward-propagation engines, Winograd);
#: not FBGEMM's embedding kernels (``fbgemm_gpu::...``) nor ``updateGradInput``.
MATRIX_KERNEL = re.compile(
    r"(?i:(?<!fb)gemm|gemv|matmul|conv(?!ert)|fprop|winograd|cutlass|xmma|cublas)|(?<![A-Za-z])[dw]grad"
)
#: Markers of a tensor-core path in a kernel name: cuBLAS/cuDNN/CUTLASS name
#: the MMA instruction shape (884 = Volta HMMA, 1688/16816/16832 = Turing and
#: Ampere MMA, s1688gemm = TF32), the data type (h/hgemm, bf16, fp16, tf32),
#: or the family (tensorop, xmma, wmma, hmma, imma, gmma/wgmma on Hopper).
TENSOR_CORE = re.compile(
    r"tensorop|xmma|wmma|hmma|imma|gmma|mma_|_mma|tf32|bf16|fp16|half|884|1688|16816|16832|"
    r"\bh\w*gemm|_h\d*gemm|hgemm",
    re.IGNORECASE,
)
#: Kernel names that say float32 when the launching op's input dtypes are
#: unknown: ``sgemm``/``scudnn`` (single precision) or a ``float`` template argument.
FP32_NAME = re.compile(r"sgemm|scudnn|\bfloat\b|f32f32", re.IGNORECASE)
FP32_DTYPES = {"FLOAT", "FLOAT32", "FP32", "DT_FLOAT"}
#: Below this many ranks there is no straggler to find.
MIN_RANKS = 2
TOP_N = 5


# ---------------------------------------------------------------- idle split


@metric("step.host_wait_ratio", unit="ratio", needs=["steps.host_wait_us", "steps.duration_us"])
def host_wait_ratio(p: Profile) -> Value:
    """Share of the step the device idles waiting for the host: device-idle
    time (no kernel, copy or set running) in stretches longer than a launch
    gap, i.e. the host had not issued the next device work (data loading,
    Python and CPU operators, synchronizations such as ``.item()``).
    Kineto: idle gaps longer than ``KERNEL_GAP_US`` (50 us); the time the
    host was blocked in synchronizing calls is in the evidence
    (``sync_wait_ratio``). ``step.host_wait_ratio + step.kernel_gap_ratio``
    equals ``step.device_idle_ratio``."""
    value = run_ratio(p, "host_wait_us")
    if value is None:
        raise NotEvaluated("no host_wait_us values with a positive step duration")
    evidence = {}
    if p.has("steps", "sync_wait_us"):
        evidence["sync_wait_ratio"] = run_ratio(p, "sync_wait_us")
    return Value(value, evidence)


@metric("step.host_wait_ms", unit="ms", needs=["steps.host_wait_us"])
def host_wait_ms(p: Profile) -> Value:
    """Device idle time per step spent waiting for the host (see
    ``step.host_wait_ratio``)."""
    value = run_mean_ms(p, "host_wait_us")
    if value is None:
        raise NotEvaluated("no host_wait_us values in steady-state steps")
    return Value(value, rank_evidence(per_rank_mean(p, "host_wait_us")))


@metric("step.kernel_gap_ratio", unit="ratio", needs=["steps.kernel_gap_us", "steps.duration_us"])
def kernel_gap_ratio(p: Profile) -> Value:
    """Share of the step lost in launch gaps between kernels: the rest of
    device idle time, in gaps between two consecutive device operations no
    longer than the collector's launch-gap bound (Kineto ``KERNEL_GAP_US``,
    50 us: eager dispatch plus launch latency). Many short kernels with
    such gaps make a step launch-bound."""
    value = run_ratio(p, "kernel_gap_us")
    if value is None:
        raise NotEvaluated("no kernel_gap_us values with a positive step duration")
    return Value(value)


@metric("step.kernel_gap_ms", unit="ms", needs=["steps.kernel_gap_us"])
def kernel_gap_ms(p: Profile) -> Value:
    """Launch-gap idle time per step (see ``step.kernel_gap_ratio``)."""
    value = run_mean_ms(p, "kernel_gap_us")
    if value is None:
        raise NotEvaluated("no kernel_gap_us values in steady-state steps")
    return Value(value, rank_evidence(per_rank_mean(p, "kernel_gap_us")))


# ---------------------------------------------------------------- ops helpers


def _steps_per_rank(p: Profile) -> pd.Series:
    """Number of step rows of each rank (1 when the profile has no steps)."""
    steps = p.table("steps")
    if steps is None:
        return pd.Series(dtype=float)
    return steps.groupby("rank").size().clip(lower=1)


def _per_step_ms(p: Profile, per_rank_us: pd.Series) -> float:
    """Per-rank totals over the window -> ms per step, mean over ranks."""
    counts = _steps_per_rank(p).reindex(per_rank_us.index).fillna(1)
    return float((per_rank_us / counts).mean()) / US_PER_MS


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


# ---------------------------------------------------------------- copies


def _h2d(p: Profile) -> tuple[pd.DataFrame, pd.Series]:
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
    return Value(_per_step_ms(p, per_rank))


# ---------------------------------------------------------------- short kernels


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
    top = k.groupby("name")["short_count"].sum().nlargest(TOP_N)
    evidence = {"short_launches": int(short.sum()), "launches": int(count.sum()),
                "top_short": [str(n) for n, c in top.items() if c > 0]}
    evidence.update(rank_evidence(ratio, scale=1.0))
    return Value(float(ratio.mean()), evidence)


# ---------------------------------------------------------------- tensor cores


def _fp32_no_tc(p: Profile) -> tuple[pd.DataFrame, pd.Series]:
    """Compute kernels, and the mask of float32 matrix kernels without a
    tensor-core marker in their name."""
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
        first = dt.fillna("").astype(str).str.upper().str.split(";").str[0].str.strip()
        fp32 = np.where(dt.notna().to_numpy(), first.isin(FP32_DTYPES).to_numpy(), hit["fp32"].to_numpy())
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
    top = k[mask].groupby("name")["total_us"].sum().nlargest(TOP_N)
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
    return Value(_per_step_ms(p, per_rank))


# ---------------------------------------------------------------- straggler


@metric("cluster.collective_straggler", unit="rank", scope="rank", needs=["comm.elapse_us"])
def collective_straggler(p: Profile) -> Value:
    """The rank the others wait for in collectives: in synchronous training
    a collective completes only when the last rank joins, so the straggler
    spends the *least* time in collectives and every other rank's collective
    time grows by its delay. Per rank, collective time per step is the sum
    of its collectives' elapsed time in each step (the whole window when
    steps are unknown), summarized by the median over steps; the straggler
    is the rank with the lowest value. Evidence: ``wait_ms``, how much longer
    the median rank spends in collectives per step (what the others lose
    waiting), the robust z-score 0.6745 * (median - min) / MAD (meaningful
    from 3 ranks on; above 3.5 one rank stands out), and per-rank ms.
    Not evaluated for a single rank, or when ranks were inferred from file
    order (they may be captures of one worker)."""
    if p.meta.ranks_inferred:
        raise NotEvaluated("ranks were assigned to trace files without rank information; "
                           "they may be captures of one worker, so they are not compared")
    comm = p.table("comm")
    comm = comm[comm["elapse_us"].notna()]
    if comm["rank"].nunique() < MIN_RANKS:
        raise NotEvaluated("collectives of a single rank: nothing to compare")
    if "step" in comm.columns and comm["step"].notna().any():
        comm = comm[comm["step"].notna()]
        per_step = comm.groupby(["rank", "step"])["elapse_us"].sum()
        per_rank = per_step.groupby(level="rank").median()
    else:
        per_rank = comm.groupby("rank")["elapse_us"].sum() / _steps_per_rank(p).reindex(
            comm["rank"].unique()).fillna(1)
    median = float(per_rank.median())
    low = float(per_rank.min())
    mad = float((per_rank - median).abs().median())
    z = 0.6745 * (median - low) / mad if mad > 0 else (1e6 if median > low else 0.0)
    evidence = {
        "wait_ms": (median - low) / US_PER_MS,
        "zscore": min(z, 1e6),
        "ranks": int(len(per_rank)),
    }
    if len(per_rank) <= 64:
        evidence["per_rank_ms"] = {int(r): round(float(v) / US_PER_MS, 3) for r, v in per_rank.items()}
    return Value(int(per_rank.idxmin()), evidence)
