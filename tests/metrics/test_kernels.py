"""Ascend kernel checks (advisor.metrics.kernels and the rules aicpu-ops,
dynamic-shape, unaligned-matmul, memory-bound-ops) on real kernel files and
on kernel_details.csv fixtures written to the documented format.

The fixtures use the column set of torch_npu's kernel_details.csv as the
corpus's newer file has it (mstt/test/ut/advisor/compute_advice/data/
kernel_details.csv: CANN 8.0, Level1 with aic_metrics=PipeUtilization):
Step Id ... OP State, Accelerator Core, Start Time(us) (TAB-suffixed, as
real output), Duration(us) ... Input Shapes, Input Data Types ..., then the
aic_* / aiv_* pipe times and ratios (a ratio is its time over aicore_time /
aiv_time). Field meanings: the Ascend profiler's kernel_details.csv
description (msprof / torch_npu "kernel_details.csv" data reference).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.metrics.kernels import unaligned_reason
from advisor.pipeline import analyze
from bench.scenarios import Spec, generate

NEW_KERNELS = Path("mstt/test/ut/advisor/compute_advice/data/kernel_details.csv")
OLD_KERNELS = Path("mstt/test/ut/advisor/advisor_backend/compute_advice/kernel_details.csv")

HEADER = ("Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
          "Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
          "Output Shapes,Output Data Types,Output Formats,Context ID,aicore_time(us),aic_total_cycles,"
          "aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,"
          "aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,"
          "aiv_time(us),aiv_total_cycles,aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,"
          "aiv_mte2_time(us),aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,"
          "cube_utilization(%)")


def _row(step: int, start: float, name: str, op_type: str, core: str, dur: float, shapes: str, dtypes: str,
         state: str = "dynamic", cube: tuple[float, float, float] | None = None,
         vec: tuple[float, float, float] | None = None, block: tuple[int, int] = (24, 0)) -> str:
    """One kernel row; ``cube`` = shares of (mac, mte2, fixpipe) of the
    aicore time, ``vec`` = shares of (vec, mte2, mte3) of the aiv time,
    ``block`` = (Block Dim, Mix Block Dim)."""
    aic = aiv = 0.0
    c = v = (0.0, 0.0, 0.0)
    if cube:
        aic, c = 0.98 * dur, cube
    if vec:
        aiv, v = 0.97 * dur, vec
    pipes_c = (f"{aic:.3f},{int(aic * 1800)},{aic * c[0]:.3f},{c[0]},0,0,0,0,{aic * c[1]:.3f},{c[1]},"
               f"{aic * c[2]:.3f},{c[2]},0.001")
    pipes_v = (f"{aiv:.3f},{int(aiv * 1800)},{aiv * v[0]:.3f},{v[0]},0,0,{aiv * v[1]:.3f},{v[1]},"
               f"{aiv * v[2]:.3f},{v[2]},0.01")
    return (f'{step},4294967295,{int(start) % 100000},2,{name},{op_type},{state},{core},"{start:.3f}\t",{dur},1.0,'
            f'{block[0]},{block[1]},NO,"""{shapes}""",{dtypes},ND;ND,"""1""",DT_BF16,ND,N/A,{pipes_c},{pipes_v},0')


def _write(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "kernel_details.csv"
    path.write_text(HEADER + "\n" + "\n".join(rows) + "\n")
    return path


def _train(steps: int, per_step) -> list[str]:
    """``per_step(step)`` -> [(name, type, core, dur, shapes, dtypes, kwargs)], laid out back to back."""
    rows, t = [], 1736413971558972.0
    for s in range(1, steps + 1):
        for name, op_type, core, dur, shapes, dtypes, kw in per_step(s):
            rows.append(_row(s, t, name, op_type, core, dur, shapes, dtypes, **kw))
            t += dur + 2.0
    return rows


def _rules(report) -> dict:
    return {f.rule: f for f in report.all_findings()}


ADAMW = ("aclnnApplyAdamW_ApplyAdamW", "ApplyAdamW", "AI_VECTOR_CORE", 120.0, "4096,4096;4096,4096",
         "FLOAT;FLOAT", {"vec": (0.5, 0.4, 0.3)})


# ------------------------------------------------------------------ aicpu-ops


def test_aicpu_ops_fire_on_float64_index_ops_on_the_ai_cpu(tmp_path):
    def step(s):
        return [("aclnnMatmul_MatMulV2", "MatMulV2", "AI_CORE", 400.0, "4096,4096;4096,4096", "DT_BF16;DT_BF16",
                 {"cube": (0.8, 0.6, 0.1)}),
                ("IndexPut", "IndexPutV2", "AI_CPU", 300.0, "4096;4096", "DOUBLE;INT64", {}), ADAMW]
    report = analyze(_write(tmp_path, _train(4, step)), jobs=1)
    found = _rules(report)
    assert "aicpu-ops" in found
    assert report.metrics["ops.aicpu_ratio"].value == pytest.approx(300 / 820, rel=1e-3)
    assert report.metrics["kernels.aicpu_max_us"].value == pytest.approx(300.0)
    assert report.metrics["kernels.aicpu_ops"].value == ["IndexPutV2(DOUBLE;INT64)"]
    assert report.metrics["kernels.aicpu_ms"].evidence["float64_types"] == ["IndexPutV2"]
    assert "IndexPutV2(DOUBLE;INT64)" in found["aicpu-ops"].message


def test_aicpu_ops_quiet_on_the_older_mstt_kernels(corpus):
    # a real 4-step kernel file: AI CPU Casts take 1.6% of compute time
    report = analyze(corpus / OLD_KERNELS, jobs=1)
    assert report.metrics["ops.aicpu_ratio"].value == pytest.approx(0.0156, abs=1e-3)
    assert report.metrics["kernels.aicpu_ops"].value == ["Cast(INT32)"]
    assert "aicpu-ops" not in _rules(report)
    # no OP State and no pipe times in that file: those checks are not evaluated, never guessed
    assert "kernels.dynamic_ratio" not in report.metrics and "kernels.memory_bound_ratio" not in report.metrics
    assert "kernels.varying_shape_ratio" not in report.metrics


# ------------------------------------------------------------------ dynamic-shape


def _varying(state: str):
    def step(s):  # the sequence length changes every step: 1000, 1100, ...
        seq = 1000 + 100 * s
        return [("aclnnMatmul_MatMulV3", "MatMulV3", "AI_CORE", 300.0 + s, f"{seq},4096;4096,4096",
                 "DT_BF16;DT_BF16", {"cube": (0.8, 0.6, 0.1), "state": state}),
                ("aclnnAdd_Add", "Add", "AI_VECTOR_CORE", 40.0, f"{seq},4096;{seq},4096", "DT_BF16;DT_BF16",
                 {"vec": (0.3, 0.8, 0.3), "state": state}),
                (*ADAMW[:6], {**ADAMW[6], "state": state})]
    return step


def test_dynamic_shape_fires_when_shapes_change_between_steps(tmp_path):
    report = analyze(_write(tmp_path, _train(5, _varying("static"))), jobs=1)
    found = _rules(report)
    assert "dynamic-shape" in found
    # MatMul and Add run with new shapes every step; the weight update (fixed shapes) does not
    assert report.metrics["kernels.varying_shape_ratio"].value == pytest.approx((300 + 3 + 40) / (463 + 3),
                                                                                  rel=0.02)
    assert report.metrics["kernels.dynamic_ratio"].value == 0.0
    assert "compiled online for each new shape" in found["dynamic-shape"].message


def test_dynamic_shape_on_binary_kernels_asks_for_fewer_shapes(tmp_path):
    report = analyze(_write(tmp_path, _train(5, _varying("dynamic"))), jobs=1)
    found = _rules(report)
    assert report.metrics["kernels.dynamic_ratio"].value == 1.0
    assert "padding to a few buckets" in found["dynamic-shape"].message


def test_dynamic_shape_quiet_on_a_fixed_shape_run_of_dynamic_kernels(tmp_path):
    # every kernel is OP State dynamic (binary mode) but the shapes never change:
    # msprof-analyze reports dynamic shape here, advisor does not
    data, _ = generate(Spec(ranks=1, steps=4, seed=1, kernels_per_step=6), tmp_path / "run", "ascend-text")
    report = analyze(data, jobs=1)
    assert report.metrics["kernels.dynamic_ratio"].value == 1.0
    assert report.metrics["kernels.varying_shape_ratio"].value == 0.0
    assert "dynamic-shape" not in _rules(report)


def test_dynamic_shape_needs_three_steps_of_kernels(corpus):
    # the newer mstt file is OP State dynamic throughout but holds one step
    report = analyze(corpus / NEW_KERNELS, jobs=1)
    assert report.metrics["kernels.dynamic_ratio"].value == 1.0
    assert "kernels.varying_shape_ratio" not in report.metrics
    assert "dynamic-shape" not in _rules(report)


# ------------------------------------------------------------------ unaligned-matmul


def test_unaligned_matmul_fires_on_the_newer_mstt_kernels(corpus):
    report = analyze(corpus / NEW_KERNELS, jobs=1)
    found = _rules(report)
    assert "unaligned-matmul" in found
    ops = report.metrics["kernels.unaligned_ops"].value
    assert ops[0].startswith("MatMulV3 [8192,15365;8192,4096]: inner axis 15365")
    assert "query last axis 511" in ops[1]
    # 4 x 521.31 us MatMul + 405.228 us attention of 10061.159 us
    assert report.metrics["kernels.unaligned_matrix_ratio"].value == pytest.approx(2490.468 / 10061.159, rel=1e-4)
    assert report.metrics["kernels.unaligned_matrix_ratio"].evidence["ops"][0]["mac_ratio"] == pytest.approx(
        0.714, abs=0.002)


def test_unaligned_matmul_quiet_on_aligned_shapes(tmp_path):
    def step(s):
        return [("aclnnMatmul_MatMulV3", "MatMulV3", "AI_CORE", 500.0, "8192,4096;4096,1536", "DT_BF16;DT_BF16",
                 {"cube": (0.8, 0.6, 0.1)}),
                ("aclnnFlashAttentionScore", "FlashAttentionScore", "MIX_AIC", 300.0, "4096,2,1024;4096,2,1024",
                 "DT_BF16;DT_BF16", {"cube": (0.5, 0.5, 0.2), "vec": (0.6, 0.3, 0.2)}), ADAMW]
    report = analyze(_write(tmp_path, _train(3, step)), jobs=1)
    assert report.metrics["kernels.unaligned_matrix_ratio"].value == 0.0
    assert "unaligned-matmul" not in _rules(report)


@pytest.mark.parametrize("op_type,shapes,why", [
    ("MatMulV2", "81920,4096;8192,512", None),
    ("MatMulV3", "8192,15365;8192,4096", "inner axis 15365"),
    ("BatchMatMul", "8,1000,64;8,64,1000", "inner axis 1000 "),  # 64 is no short pad from 256
    ("BatchMatMul", "16,512,64;16,64,512", None),  # attention scores, head dimension 64: a layout, not a pad
    ("FlashAttentionScore", "2,32,4096,64;2,32,4096,64", None),  # head dimension 64: +100% to pad
    ("MatMul", "4,64,16,16;4,64,16,16", None),  # FRACTAL_NZ tiles: aligned by construction
    ("FlashAttentionScore", "4096,2,511;4096,2,512", "query last axis 511"),
    ("FlashAttentionScore", "2,32,4096,128;2,32,4096,128", None),
    ("Conv2D", "8,3,224,225;64,3,7,7", None),  # not judged
    ("MatMul", "", None),
])
def test_unaligned_reason(op_type, shapes, why):
    got = unaligned_reason(op_type, shapes)
    assert (got is None) if why is None else (why in got)


# ------------------------------------------------------------------ memory-bound-ops


def test_memory_bound_ops_fire_when_elementwise_work_dominates(tmp_path):
    def step(s):
        return [("aclnnMatmul_MatMulV2", "MatMulV2", "AI_CORE", 200.0, "4096,4096;4096,4096", "DT_BF16;DT_BF16",
                 {"cube": (0.85, 0.7, 0.1)}),
                ("aclnnAdd_Add", "Add", "AI_VECTOR_CORE", 150.0, "4096,4096;4096,4096", "DT_BF16;DT_BF16",
                 {"vec": (0.25, 0.85, 0.15)}),
                ("aclnnMul_Mul", "Mul", "AI_VECTOR_CORE", 150.0, "4096,4096;4096,4096", "DT_BF16;DT_BF16",
                 {"vec": (0.2, 0.6, 0.75)}),
                ("aclnnGelu_Gelu", "Gelu", "AI_VECTOR_CORE", 100.0, "4096,4096", "DT_BF16",
                 {"vec": (0.8, 0.75, 0.3)})]  # vector pipe busy: compute bound, not counted
    report = analyze(_write(tmp_path, _train(3, step)), jobs=1)
    found = _rules(report)
    assert report.metrics["kernels.memory_bound_ratio"].value == pytest.approx(300 / 600)
    assert sorted(report.metrics["kernels.memory_bound_ops"].value) == ["Add", "Mul"]
    assert "memory-bound-ops" in found


def test_memory_bound_ops_quiet_on_the_newer_mstt_kernels(corpus):
    # large BF16 MatMuls and attention keep their compute pipes busy; only the Adds are memory bound
    report = analyze(corpus / NEW_KERNELS, jobs=1)
    assert report.metrics["kernels.memory_bound_ops"].value == ["Add"]
    assert report.metrics["kernels.memory_bound_ratio"].value == pytest.approx(110.082 / 10061.159, rel=1e-3)
    assert "memory-bound-ops" not in _rules(report)


# ------------------------------------------------------------------ freq-throttle


def _trace(tmp_path: Path, mhz: list[tuple[float, int]]) -> Path:
    """A trace_view.json as torch_npu writes it: process/thread metadata, the
    Overlap Analysis lanes (Computing, Free) and ProfilerStep#N markers, as in
    the corpus's mstt timeline_advice/trace_view.json; plus the AI Core clock
    as msprof's AicoreFreqAssembler writes it (a CounterEvent "AI Core Freq"
    with the series "MHz", one event each time the clock changes; the peer
    reads it the same way, advisor/dataset/ai_core_freq/ai_core_freq_dataset.py)."""
    t0 = 1736413971000000.0
    events = [{"ph": "M", "name": "process_name", "pid": 9, "args": {"name": "Overlap Analysis"}},
              {"ph": "M", "name": "thread_name", "pid": 9, "tid": 1, "args": {"name": "Computing"}},
              {"ph": "M", "name": "thread_name", "pid": 9, "tid": 2, "args": {"name": "Free"}},
              {"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "AI Core Freq"}}]
    for s in range(4):
        start = t0 + s * 10000.0
        events += [{"ph": "X", "name": f"ProfilerStep#{s + 1}", "pid": 1, "tid": 1, "ts": str(start), "dur": 10000},
                   {"ph": "X", "name": "Computing", "pid": 9, "tid": 1, "ts": str(start), "dur": 8000},
                   {"ph": "X", "name": "Free", "pid": 9, "tid": 2, "ts": str(start + 8000), "dur": 2000}]
    events += [{"ph": "C", "name": "AI Core Freq", "pid": 7, "tid": 0, "ts": str(t0 + at), "args": {"MHz": f}}
               for at, f in mhz]
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(events))
    return path


def test_freq_throttle_fires_when_the_clock_drops(tmp_path):
    # 1800 MHz for the first 10 ms, 1300 MHz for the next 30 ms (the last sample ends the window)
    report = analyze(_trace(tmp_path, [(0.0, 1800), (10000.0, 1300), (40000.0, 1300)]), jobs=1)
    drop = report.metrics["kernels.aicore_freq_drop"]
    assert drop.value == pytest.approx(0.75 * 500 / 1800, rel=1e-4)
    assert drop.evidence["min_mhz"] == 1300 and drop.evidence["max_mhz"] == 1800
    finding = next(f for f in report.all_findings() if f.rule == "freq-throttle")
    # 8 ms of compute a step at 79% of the clock: 8 x 0.208 / 0.792 ms longer than at full clock
    assert finding.estimated_gain_ms == pytest.approx(8.0 * drop.value / (1 - drop.value), rel=0.01)


def test_freq_throttle_quiet_on_a_steady_clock(tmp_path):
    report = analyze(_trace(tmp_path, [(0.0, 1800), (40000.0, 1800)]), jobs=1)
    assert report.metrics["kernels.aicore_freq_drop"].value == 0.0
    assert "freq-throttle" not in _rules(report)
