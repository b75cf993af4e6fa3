"""Silent stretches of torch_npu's host record (``silent_gap`` rows of
``collectors/ascend/host_calls.py``) and conjectured-gc-pause on them.

The fixture follows the torch_npu timeline as the corpus's real cropped
``trace_view.json`` writes it (tests/collectors/ascend/test_ascend_host_calls.py
describes the lanes): framework ops on the Python process holding the
``ProfilerStep#N`` spans, ``AscendCL@`` calls on the CANN process, the device
split into Computing / Free on the Overlap Analysis process. A collection
recorded without GC detection leaves the host lanes empty while the device
is free: what msprof-analyze's conjectured-GC checker looks for (free time
with almost no ``AscendCL@`` calls in it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor.collectors.ascend import host_calls
from advisor.collectors.ascend.trace_view import decode_trace
from tests.collectors.ascend.test_ascend_host_calls import _meta, _x

PY, CANN, OVERLAP = 1, 5, 9
STEP_US, PAUSE_US = 20_000.0, 60_000.0
TIMELINE = "mstt/test/ut/advisor/advisor_backend/timeline_advice/trace_view.json"


def rank_folder(tmp_path: Path, pause_every: int, steps: int = 7) -> Path:
    """Steps of 20 ms of ops and ACL calls; every ``pause_every``-th one
    (0: none) then pauses 60 ms with nothing on the host lanes."""
    events = [_meta(PY, "Python"), _meta(CANN, "CANN"), _meta(OVERLAP, "Overlap Analysis"),
              {"ph": "M", "name": "thread_name", "pid": OVERLAP, "tid": 0, "args": {"name": "Computing"}},
              {"ph": "M", "name": "thread_name", "pid": OVERLAP, "tid": 3, "args": {"name": "Free"}}]
    t = 1_700_000_000_000.0
    for i in range(1, steps + 1):
        pause = PAUSE_US if pause_every and i % pause_every == 0 else 0.0
        length = STEP_US + pause
        events += [_x(PY, f"ProfilerStep#{i}", t, length, "cpu_op"),
                   _x(OVERLAP, "Computing", t, 15_000.0, tid=0), _x(OVERLAP, "Free", t + 15_000, length - 15_000, tid=3)]
        for k in range(39):  # an op every 500 us with its ACL launch
            events += [_x(PY, "aten::add", t + 10 + 500 * k, 480.0, "cpu_op"),
                       _x(CANN, "AscendCL@aclnnAdd", t + 20 + 500 * k, 30.0, tid=2)]
        events.append(_x(CANN, "AscendCL@aclrtSynchronizeStream", t + 19_400, 50.0))  # the loss read back
        t += length
    root = tmp_path / str(pause_every) / "node_1_20240101_ascend_pt"
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (root / "profiler_info_0.json").write_text(json.dumps({"rank_id": 0}))
    (out / "trace_view.json").write_text(json.dumps(events))
    return root


def test_pauses_on_the_host_lanes_are_silent_gaps(tmp_path):
    table = host_calls.read(decode_trace(rank_folder(tmp_path, 3) / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"), 0)
    gaps = table[table["cls"] == "silent_gap"]
    assert sorted(gaps["step"]) == [3, 6]
    # from the last op's end (39 ops, 500 us apart, 480 us each) to the step's end
    assert gaps["max_us"].tolist() == pytest.approx([STEP_US + PAUSE_US - (10 + 500 * 38 + 480)] * 2)


def test_conjectured_gc_fires_on_a_torch_npu_timeline(tmp_path):
    report = advisor.analyze(rank_folder(tmp_path, 3))
    assert "host.gc_ms" not in report.metrics
    assert report.metrics["host.silent_gap_max_ms"].value >= 60.0
    assert "conjectured-gc-pause" in {f.rule for f in report.findings}


def test_a_steady_torch_npu_timeline_keeps_it_quiet(tmp_path):
    report = advisor.analyze(rank_folder(tmp_path, 0))
    assert report.metrics["host.silent_gap_max_ms"].value < 1.0
    assert "conjectured-gc-pause" not in {f.rule for f in report.findings}


def test_the_corpus_timeline_of_one_step_cannot_tell_a_slow_step(corpus):
    report = advisor.analyze(corpus / TIMELINE)
    assert "host.silent_gap_stall_ms" not in report.metrics
    assert "conjectured-gc-pause" not in {f.rule for f in report.all_findings()}
