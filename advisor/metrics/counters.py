"""Hardware counters per operator (the ``cupti_counters`` table).

A Kineto trace recorded in CUPTI profiler mode carries the requested
counters per kernel; the collector gives them to the operators that
launched the kernels (HolisticTraceAnalysis'
``get_cupti_counter_data_with_operators``). Values cover the whole trace
(the counter ranges are not steps), summed over ranks and divided by their
number.
"""

from __future__ import annotations

from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.profile import Profile

#: Operators listed in a value (the ones with the most kernels, or FLOPs).
TOP_OPS = 10
#: Floating-point operations per executed SASS instruction of each counter
#: (a fused multiply-add counts 2), as HTA's
#: ``CUDA_SASS_INSTRUCTION_COUNTER_FLOPS`` weighs them.
SASS_FLOPS = {f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum": 2 if "fma" in op else 1
              for op in ("ffma", "fmul", "fadd", "hfma", "hmul", "hadd", "dfma", "dmul", "dadd")}
_NEEDS = ["cupti_counters.counter", "cupti_counters.value"]


@metric("counters.by_op", unit="map", needs=_NEEDS)
def by_op(p: Profile) -> Value:
    """Each counter per outermost operator, summed over the kernels it
    launched (per rank: summed over ranks, divided by their number); the
    ``TOP_OPS`` operators that launched the most counted kernels.
    Evidence: the counters recorded."""
    df = p.table("cupti_counters")
    ranks = max(df["rank"].nunique(), 1)
    kernels = df.groupby(["op", "kernel", "bottom_op"])["kernels"].max().groupby(level="op").sum()
    top = kernels.sort_values(ascending=False, kind="stable").index[:TOP_OPS]
    sums = df[df["op"].isin(top)].groupby(["op", "counter"])["value"].sum() / ranks
    value = {op or "(no operator)": {c: float(v) for c, v in sums[op].items()} for op in top}
    return Value(value, {"counters": sorted(df["counter"].unique().tolist())})


@metric("counters.gflop_by_op", unit="map", needs=_NEEDS)
def gflop_by_op(p: Profile) -> Value:
    """Floating-point work per outermost operator in GFLOP, from the SASS
    instruction counters (``SASS_FLOPS``: fused multiply-adds count 2),
    the ``TOP_OPS`` largest; not evaluated when the trace recorded none of
    those counters."""
    df = p.table("cupti_counters")
    flops = df[df["counter"].isin(SASS_FLOPS)]
    if flops.empty:
        raise NotEvaluated("no SASS floating-point instruction counters (smsp__sass_thread_inst_executed_op_*) "
                           "were recorded")
    ranks = max(df["rank"].nunique(), 1)
    work = (flops["value"] * flops["counter"].map(SASS_FLOPS)).groupby(flops["op"]).sum() / ranks / 1e9
    work = work.sort_values(ascending=False, kind="stable").iloc[:TOP_OPS]
    return Value({op or "(no operator)": round(float(v), 6) for op, v in work.items()},
                 {"total_gflop": round(float(work.sum()), 6)})
