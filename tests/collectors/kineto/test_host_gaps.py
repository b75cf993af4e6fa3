"""Silent gaps (``host_calls`` class ``silent_gap``) and the conjectured
garbage-collection rule on them.

The traces are written in the PyTorch profiler's Chrome-trace format as
torch 2.13 writes it on CPU (tests/collectors/kineto/test_kineto_host_calls.py
describes it): ``ProfilerStep#N`` user annotations on the training thread,
``cpu_op`` events for the operators, and -- as a GPU run's backward pass --
ops on autograd's own thread while the training thread waits in
``backward()`` with nothing recorded. A collection without
``record_python_gc_info`` leaves no event at all: the training thread is
simply silent. ``tests/e2e/test_host_habits.py`` makes the same pauses with
real ``gc.collect()`` calls under the real profiler.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor.collectors.kineto import collector as kineto
from advisor.collectors.kineto.host_gaps import CLS

PID, MAIN, AUTOGRAD = 4242, 4242, 4300
STEP_US = 20_000.0
PAUSE_US = 60_000.0


def _x(cat: str, name: str, ts: float, dur: float, tid: int = MAIN, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _step(i: int, t0: float, pause_us: float, gc_event: bool) -> tuple[list[dict], float]:
    """One step: forward ops on the training thread, the backward pass on
    autograd's thread (the training thread silent meanwhile), the optimizer,
    then a pause of ``pause_us`` with nothing recorded (or a ``Python GC``
    event over it). Returns the events and the step's length."""
    length = STEP_US + pause_us
    ev = [_x("user_annotation", f"ProfilerStep#{i}", t0, length),
          _x("cpu_op", "aten::linear", t0 + 10, 5000.0),
          _x("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", t0 + 5100, 9000.0, tid=AUTOGRAD),
          _x("user_annotation", "Optimizer.step#AdamW.step", t0 + 14200, 5500.0),
          _x("cpu_op", "aten::_fused_adamw_", t0 + 14210, 5000.0)]
    if gc_event and pause_us:
        ev.append(_x("python_function", "Python GC", t0 + 19800, pause_us, **{"Ev Idx": i}))
    return ev, length


def write_trace(path: Path, *, pause_every: int, gc_event: bool = False, steps: int = 7,
                tail_us: float = 0.0) -> Path:
    """Steps of 20 ms; every ``pause_every``-th one (0: none) pauses for
    60 ms at its end. The last step ends ``tail_us`` after its last op (the
    profiler stopping)."""
    events = [{"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python3"}}]
    t = 1_000_000.0
    for i in range(1, steps + 1):
        pause = PAUSE_US if pause_every and i % pause_every == 0 else 0.0
        ev, length = _step(i, t, pause, gc_event)
        if i == steps:
            ev[0]["dur"] = length + tail_us
        events += ev
        t += length
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _gaps(profile):
    hc = profile.host_calls
    return hc[hc["cls"] == CLS] if hc is not None else hc


def test_a_silent_pause_is_a_gap_and_the_backward_pass_on_autograd_thread_is_not(tmp_path):
    profile = kineto.read(write_trace(tmp_path / "a.pt.trace.json", pause_every=3, tail_us=200_000.0))
    profile.check()
    gaps = _gaps(profile)
    # steps 3 and 6 pause (60 ms from the optimizer's end to the step's end, plus the 300 us before it);
    # the training thread's silence during backward() is covered by the autograd thread's op, and the
    # 200 ms after the last step's last op is the profiler stopping
    assert sorted(gaps["step"]) == [3, 6]
    assert gaps["max_us"].tolist() == pytest.approx([PAUSE_US + 300.0] * 2)
    assert (gaps["count"] == 1).all()


def test_conjectured_gc_fires_on_pauses_that_slow_their_steps(tmp_path):
    report = advisor.analyze(write_trace(tmp_path / "a.pt.trace.json", pause_every=3))
    values = {k: m.value for k, m in report.metrics.items()}
    assert values["host.silent_gap_max_ms"] == pytest.approx(60.3)
    # steady steps 2-7 (the first is dropped): two of six pause, each lengthening its step by 60 ms (the
    # 0.3 ms before the pause is in every step)
    assert values["host.silent_gap_stall_ms"] == pytest.approx(2 * 60.0 / 6)
    assert "host.gc_ms" not in values  # no collection is recorded
    finding = {f.rule: f for f in report.findings}["conjectured-gc-pause"]
    assert "conjectured" in finding.message and "no garbage collections" in finding.message
    assert 0 < finding.estimated_gain_ms <= finding.time_at_stake_ms == pytest.approx(20.0)
    assert finding.direct_evidence is False


def test_recorded_collections_leave_the_finding_to_gc_pause(tmp_path):
    report = advisor.analyze(write_trace(tmp_path / "a.pt.trace.json", pause_every=3, gc_event=True))
    rules = {f.rule for f in report.findings}
    assert "gc-pause" in rules and "conjectured-gc-pause" not in rules


def test_steady_steps_without_pauses_keep_it_quiet(tmp_path):
    report = advisor.analyze(write_trace(tmp_path / "a.pt.trace.json", pause_every=0, tail_us=200_000.0))
    assert report.metrics["host.silent_gap_max_ms"].value == 0.0
    assert "conjectured-gc-pause" not in {f.rule for f in report.findings}


def test_two_steps_cannot_show_a_slow_one(tmp_path):
    report = advisor.analyze(write_trace(tmp_path / "a.pt.trace.json", pause_every=1, steps=2))
    assert "host.silent_gap_stall_ms" not in report.metrics
    assert any(s.what == "metric host.silent_gap_stall_ms" and "steady steps" in s.reason for s in report.skipped)
