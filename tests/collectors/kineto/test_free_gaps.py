"""The ``free_gaps`` table of a CPU-only Kineto trace and
``step.recurring_free_ms`` / ``_ratio`` on it.

The traces are written in the PyTorch profiler's Chrome-trace format as
torch 2.13 writes it on CPU (tests/collectors/kineto/test_kineto_host_calls.py
describes it): ``ProfilerStep#N`` user annotations and ``cpu_op`` events on
the training thread, and a DDP bucket's ``gloo:all_reduce`` as a
``user_annotation`` on gloo's worker thread (as in
tests/collectors/kineto/test_kineto_comm.py) while the training thread
waits for it with nothing recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor.collectors.kineto import collector as kineto

PID, MAIN, GLOO = 4242, 4242, 4300
#: The loop's own free stretch after the optimizer in every step (a
#: checkpoint it saves), and a CPU wait that lands at another place in each.
SAVE_US, WAIT_US = 3000.0, 4000.0
#: The training thread resuming after the all-reduce, in every step.
WAKE_US = 1500.0


def _x(cat: str, name: str, ts: float, dur: float, tid: int = MAIN) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def _step(i: int, t0: float) -> tuple[list[dict], float]:
    """forward (linear, 200 us gap, relu), the all-reduce on gloo's thread,
    the optimizer's add_, then the loop's own ``SAVE_US``; step ``i`` waits
    ``WAIT_US`` for a CPU after op ``i % 3`` of its forward."""
    gaps = [200.0, 200.0, 200.0]
    gaps[i % 3] += WAIT_US
    ev, t = [], t0 + 100.0
    for name, gap in zip(("aten::linear", "aten::relu", "aten::mse_loss"), gaps):
        ev.append(_x("cpu_op", name, t, 1000.0))
        t += 1000.0 + gap
    ev.append(_x("user_annotation", "gloo:all_reduce", t, 2000.0, tid=GLOO))
    t += 2000.0 + WAKE_US
    ev.append(_x("cpu_op", "aten::add_", t, 500.0))
    t += 500.0 + SAVE_US
    length = t - t0
    return [_x("user_annotation", f"ProfilerStep#{i}", t0, length), *ev], length


def write_trace(path: Path, steps: int = 7) -> Path:
    events = [{"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python3"}}]
    t = 1_000_000.0
    for i in range(1, steps + 1):
        ev, length = _step(i, t)
        events += ev
        t += length
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_free_stretches_are_keyed_by_their_place_in_the_step(tmp_path):
    profile = kineto.read(write_trace(tmp_path / "a.pt.trace.json"))
    profile.check()
    gaps = profile.free_gaps
    by_step = gaps.groupby("step")
    # the rows of a step add up to it
    durations = profile.steps.set_index("step")["duration_us"]
    assert (by_step["gap_us"].sum() + by_step["busy_after_us"].sum()).to_numpy() == pytest.approx(
        durations.loc[list(by_step.groups)].to_numpy())
    step4 = gaps[gaps["step"] == 4].set_index("key")
    assert step4.loc["(step start) > aten::linear #0", "gap_us"] == pytest.approx(100.0)
    assert step4.loc["aten::relu > aten::mse_loss #0", "gap_us"] == pytest.approx(200.0 + WAIT_US)  # 4 % 3 == 1
    assert step4.loc["aten::linear > aten::relu #0", "gap_us"] == pytest.approx(200.0)
    assert step4.loc["aten::add_ > (step end) #0", "gap_us"] == pytest.approx(SAVE_US)
    wake = step4.loc["gloo:all_reduce > aten::add_ #0"]
    assert wake["gap_us"] == pytest.approx(WAKE_US) and wake["after_collective"]
    assert not step4.drop(index="gloo:all_reduce > aten::add_ #0")["after_collective"].any()
    # the same places in every step
    assert gaps.groupby("step")["key"].apply(frozenset).nunique() == 1


def test_the_recurring_free_time_leaves_out_waits_at_random_places(tmp_path):
    report = advisor.analyze(write_trace(tmp_path / "a.pt.trace.json"))
    values = {k: m.value for k, m in report.metrics.items()}
    # per place the median over steady steps 2-7: the CPU wait is at each forward gap in two of six steps
    # (median 200 us), the wake-up after the all-reduce is left out
    free_us = 100.0 + 3 * 200.0 + SAVE_US
    assert values["step.recurring_free_ms"] == pytest.approx(free_us / 1000)
    busy_us = 3 * 1000.0 + 2000.0 + WAKE_US + 500.0
    assert values["step.recurring_free_ratio"] == pytest.approx(free_us / (free_us + busy_us), rel=1e-4)
    # the mean step's free time holds the CPU wait and the wake-up
    assert values["step.free_ms"] == pytest.approx((free_us + WAIT_US + WAKE_US) / 1000)


def _late_close_trace(path: Path, steps: int = 7) -> Path:
    """Each step opens with the loop's own ``SAVE_US`` of host code (a
    checkpoint before the forward), then linear, the all-reduce on gloo's
    thread, the wake-up and the optimizer's add_; in every other step gloo
    closes the all-reduce's span 1 ms into the next step, while the
    training thread already runs that step's own code (torch 2.13's gloo
    worker closes its span after the work is marked done)."""
    late_us = 1000.0
    events = [{"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python3"}}]
    t0 = 1_000_000.0
    for i in range(1, steps + 1):
        t = t0 + SAVE_US
        ev = [_x("cpu_op", "aten::linear", t, 1000.0)]
        t += 1000.0
        length = (t - t0) + 2000.0 + WAKE_US + 500.0
        ev.append(_x("user_annotation", "gloo:all_reduce", t, 2000.0 + (WAKE_US + 500.0 + late_us) * (i % 2),
                     tid=GLOO))
        ev.append(_x("cpu_op", "aten::add_", t + 2000.0 + WAKE_US, 500.0))
        events += [_x("user_annotation", f"ProfilerStep#{i}", t0, length), *ev]
        t0 += length
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_a_collective_of_an_earlier_step_closing_late_is_no_wake_up(tmp_path):
    profile = kineto.read(_late_close_trace(tmp_path / "late.pt.trace.json"))
    gaps = profile.free_gaps
    opening = gaps[gaps["key"].str.endswith("> aten::linear #0")]
    # every step's own code keeps its place (after the previous step's add_,
    # which ends the step), whether or not the previous step's all-reduce
    # closed inside it, and is never taken for a wake-up
    assert set(opening["key"]) == {"aten::add_ > aten::linear #0"}
    assert set(opening["step"]) == set(range(2, 8))
    assert not opening["after_collective"].any()
    even = opening[opening["step"] % 2 == 0].set_index("step")["gap_us"]
    assert even.to_numpy() == pytest.approx(SAVE_US - 1000.0)  # after the late close
    # the wake-up after this step's own all-reduce still is one
    assert gaps[gaps["key"] == "gloo:all_reduce > aten::add_ #0"]["after_collective"].all()
