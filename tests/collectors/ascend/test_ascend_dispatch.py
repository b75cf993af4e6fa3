"""Operator dispatch on Ascend: launch rate against kernel length from
``trace_view.json`` (collectors/ascend/dispatch.py) and launch-bound on it.

The fixture follows the torch_npu timeline as the corpus's real cropped
``trace_view.json`` (mstt advisor timeline_advice) writes it: framework ops
(``aclnnAdd``, ``cpu_op``) on the Python process, each starting an
``async_npu`` flow (``"ph": "s"``, ``name`` ``torch_to_npu``) whose finish
(``"ph": "f"``, ``"bp": "e"``) sits at its task's start on the "Ascend
Hardware" process; the runtime's launch inside the CANN process starts a
``HostToDevice`` flow to the same task; ``ProfilerStep#N`` spans on the
Python process; the Overlap Analysis lanes (Computing, Free) that
trace_view.py reads for steps; the recorded environment in
``profiler_metadata.json``'s ``ENV_VARIABLES``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor.collectors.ascend import dispatch
from advisor.collectors.ascend.trace_view import decode_trace

PY, CANN, NPU, OVERLAP = 1, 5, 800, 9
STEP_US, LAUNCH_US, KERNEL_US, QUEUE_US = 12_000.0, 25.0, 6.0, 40.0
TIMELINE = "mstt/test/ut/advisor/advisor_backend/timeline_advice/trace_view.json"


def _meta(pid: int, name: str) -> dict:
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}


def _x(pid: int, name: str, ts: float, dur: float, tid: int = 1, cat: str | None = None) -> dict:
    ev = {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": f"{ts:.3f}", "dur": dur, "args": {}}
    if cat:
        ev["cat"] = cat
    return ev


def _flow(cat: str, fid: int, host: tuple[int, int, float], task_ts: float) -> list[dict]:
    pid, tid, ts = host
    return [{"ph": "s", "bp": "e", "name": cat, "id": fid, "pid": pid, "tid": tid, "ts": f"{ts:.3f}", "cat": cat},
            {"ph": "f", "bp": "e", "name": cat, "id": fid, "pid": NPU, "tid": 3, "ts": f"{task_ts:.3f}", "cat": cat}]


def trace(steps: int = 4) -> list[dict]:
    """An eager loop: a 6 us kernel launched every 25 us, 40 us after its op."""
    events = [_meta(PY, "Python"), _meta(CANN, "CANN"), _meta(NPU, "Ascend Hardware"),
              _meta(OVERLAP, "Overlap Analysis"),
              {"ph": "M", "name": "thread_name", "pid": OVERLAP, "tid": 0, "args": {"name": "Computing"}},
              {"ph": "M", "name": "thread_name", "pid": OVERLAP, "tid": 3, "args": {"name": "Free"}}]
    fid = 0
    for i in range(steps):
        t0 = 1_700_000_000_000.0 + i * STEP_US
        events += [_x(PY, f"ProfilerStep#{i + 1}", t0, STEP_US, cat="cpu_op"),
                   _x(OVERLAP, "Computing", t0, 3000.0, tid=0), _x(OVERLAP, "Free", t0 + 3000, 9000.0, tid=3)]
        for k in range(int((STEP_US - 200) / LAUNCH_US)):
            t = t0 + 50 + k * LAUNCH_US
            task = t + QUEUE_US
            events += [_x(PY, "aclnnAdd", t, 8.0, cat="cpu_op"),
                       _x(CANN, "AscendCL@aclnnAdd", t + 9, 6.0, tid=2),
                       _x(NPU, "aclnnAdd_AddAiCore_Add", task, KERNEL_US, tid=3)]
            events += _flow("async_npu", fid, (PY, 1, t), task) + _flow("HostToDevice", fid, (CANN, 2, t + 10), task)
            fid += 1
    return events


def rank_folder(tmp_path: Path, task_queue: str) -> Path:
    root = tmp_path / task_queue / "node_1_20240101_ascend_pt"
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (root / "profiler_metadata.json").write_text(json.dumps({"ENV_VARIABLES": {"TASK_QUEUE_ENABLE": task_queue}}))
    (root / "profiler_info_0.json").write_text(json.dumps({"rank_id": 0}))
    (out / "trace_view.json").write_text(json.dumps(trace()))
    return root


def test_launch_rate_gaps_and_queue_per_step(tmp_path):
    root = rank_folder(tmp_path, "1")
    per_step = dispatch.read(decode_trace(root / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"), 0)
    assert per_step["step"].tolist() == [1, 2, 3, 4]
    assert per_step["launch_interval_us"].tolist() == pytest.approx([LAUNCH_US] * 4)
    assert per_step["kernel_median_us"].tolist() == pytest.approx([KERNEL_US] * 4)
    assert per_step["launch_queue_us"].tolist() == pytest.approx([QUEUE_US] * 4)  # from the framework op
    launches = int((STEP_US - 200) / LAUNCH_US)
    # the device idles 19 us between consecutive kernels (launch gaps, all under 50 us)
    assert per_step["kernel_gap_us"].tolist() == pytest.approx([(launches - 1) * (LAUNCH_US - KERNEL_US)] * 4)


def test_launch_bound_fires_on_ascend_and_names_task_queue_level_2(tmp_path):
    report = advisor.analyze(rank_folder(tmp_path, "1"))
    assert report.metrics["host.task_queue_enable"].value == "1"
    assert report.metrics["step.launch_interval_ms"].value == pytest.approx(LAUNCH_US / 1000)
    finding = next(f for f in report.findings if f.rule == "launch-bound")
    assert "every 25 us" in finding.message and "6 us" in finding.message
    assert finding.fix.framework == "torch_npu"
    assert "TASK_QUEUE_ENABLE=1: set it to 2" in finding.fix.text
    assert finding.estimated_gain_ms <= finding.time_at_stake_ms == pytest.approx(
        report.metrics["step.kernel_gap_ms"].value)


def test_with_the_queue_at_level_2_the_fix_keeps_it(tmp_path):
    report = advisor.analyze(rank_folder(tmp_path, "2"))
    finding = next(f for f in report.findings if f.rule == "launch-bound")
    assert "set it to 2" not in finding.fix.text and "Keep" in finding.fix.text


def test_corpus_timeline_host_far_ahead_is_not_launch_bound(corpus):
    per_step = dispatch.read(decode_trace(corpus / TIMELINE), 0)
    assert per_step["launch_queue_us"].iloc[0] > 1000  # the Python thread runs milliseconds ahead
    report = advisor.analyze(corpus / TIMELINE)
    assert "step.launch_interval_ms" in report.metrics
    assert "launch-bound" not in {f.rule for f in report.all_findings()}
