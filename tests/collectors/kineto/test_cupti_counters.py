"""The ``cupti_counters`` table of a Kineto trace recorded in CUPTI profiler
mode, and the counters.* metrics on it.

The fixture follows the events HolisticTraceAnalysis reads in its CUPTI
profiler test trace (tests/data/cupti_profiler, read by
hta/analyzers/cupti_counter_analysis.py and hta/common/trace_parser.py):
``cuda_profiler_range`` events named after their kernel whose ``args`` are the
counters ({CUPTI metric name: number}), with no correlation id, paired in
time order with the ``cudaLaunchKernel`` runtime calls, which run inside the
``cpu_op`` operators that launched them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.collectors.kineto import collector as kineto
from advisor.collectors.kineto import cupti_counters
from advisor.metrics import REGISTRY, NotEvaluated

PID = TID = 4242
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
FADD = "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"
SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"


def _x(cat: str, name: str, ts: float, dur: float, pid=PID, tid=TID, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _trace(path: Path, ranges: int = 3) -> Path:
    t0 = 1_000_000.0
    ev = [_x("user_annotation", "ProfilerStep#1", t0, 5_000),
          _x("cpu_op", "aten::mm", t0 + 100, 100),
          _x("cuda_runtime", "cudaLaunchKernel", t0 + 110, 10, correlation=1),
          _x("cpu_op", "aten::linear", t0 + 300, 200),
          _x("cpu_op", "aten::addmm", t0 + 310, 90),
          _x("cuda_runtime", "cudaLaunchKernel", t0 + 320, 10, correlation=2),
          _x("cuda_runtime", "cudaLaunchKernel", t0 + 410, 10, correlation=3)]
    counters = [{FFMA: 1e6, FADD: 2e5, SM: 40.0}, {FFMA: 3e6, FADD: 0, SM: 80.0}, {FFMA: 0, FADD: 5e5, SM: 10.0}]
    names = ["ampere_sgemm_64x32_nn", "ampere_sgemm_128x64_tn", "vectorized_elementwise_kernel"]
    for k in range(ranges):
        ev.append(_x("cuda_profiler_range", names[k], t0 + 1_000 + 500 * k, 400, pid=0, tid=7, **counters[k]))
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA A100"}],
                                "traceEvents": ev}))
    return path


def _metric(profile, metric_id: str):
    spec = REGISTRY[metric_id]
    reason = spec.missing(profile)
    if reason:
        return None, reason
    try:
        return spec.func(profile).value, None
    except NotEvaluated as exc:
        return None, str(exc)


def test_counters_are_given_to_the_operators_that_launched_the_kernels(tmp_path):
    profile = kineto.read(_trace(tmp_path / "a.pt.trace.json"))
    profile.check()
    df = profile.cupti_counters
    row = df[(df["kernel"] == "ampere_sgemm_128x64_tn") & (df["counter"] == FFMA)].iloc[0]
    assert (row["op"], row["bottom_op"], row["value"], row["kernels"]) == ("aten::linear", "aten::addmm", 3e6, 1)
    third = df[df["kernel"] == "vectorized_elementwise_kernel"]
    assert set(third["op"]) == {"aten::linear"} and set(third["bottom_op"]) == {"aten::linear"}
    by_op, _ = _metric(profile, "counters.by_op")
    assert by_op["aten::linear"][SM] == 90.0 and by_op["aten::mm"][FFMA] == 1e6
    gflop, _ = _metric(profile, "counters.gflop_by_op")
    # fused multiply-adds count two operations
    assert gflop["aten::mm"] == pytest.approx((2 * 1e6 + 2e5) / 1e9)
    assert gflop["aten::linear"] == pytest.approx((2 * 3e6 + 5e5) / 1e9)


def test_ranges_that_do_not_pair_with_launches_are_skipped_with_the_reason(tmp_path):
    profile = kineto.read(_trace(tmp_path / "a.pt.trace.json", ranges=2))
    assert profile.cupti_counters is None
    reasons = [s.reason for s in profile.skipped if "cupti_counters" in s.what]
    assert reasons == [cupti_counters.UNMATCHED.format(ranges=2, launches=3)]


def test_a_trace_without_counter_ranges_has_no_counters(tmp_path):
    profile = kineto.read(_trace(tmp_path / "a.pt.trace.json", ranges=0))
    assert profile.cupti_counters is None
    value, reason = _metric(profile, "counters.by_op")
    assert value is None and "cupti_counters" in reason
