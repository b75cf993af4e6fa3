"""The ``host_calls`` table of a Kineto trace and the host.* metrics on it.

The traces are written in the PyTorch profiler's Chrome-trace format as
torch 2.13 writes it on CPU with ``with_stack=True`` and
``_ExperimentalConfig(record_python_gc_info=True)``: steps are
``ProfilerStep#N`` user annotations, each collection a ``python_function``
event named ``Python GC`` (args ``Ev Idx`` only), each Python frame a
``python_function`` event named ``file.py(line): function`` (the empty_cache
frame ``torch/cuda/memory.py(216): empty_cache``), the optimizer step the
``Optimizer.step#AdamW.step`` annotation that torch/optim/optimizer.py records
around ``step()``. The same events were read off real ``advisor run`` traces
of ``examples/train_habits.py`` (tests/e2e/test_host_habits.py runs them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor.collectors.kineto import collector as kineto

PID = TID = 4242
STEP_US = 10_000.0


def _x(cat: str, name: str, ts: float, dur: float, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": TID, "ts": ts, "dur": dur, "args": args}


def _step(i: int, t0: float, gc_us: float, optimizer: str, empty_cache: bool) -> list[dict]:
    """One 10 ms step: forward/backward ops, an optimizer step, a GC pause."""
    ev = [_x("user_annotation", f"ProfilerStep#{i}", t0, STEP_US),
          _x("python_function", "train.py(40): train_step", t0 + 1, STEP_US - 2),
          _x("cpu_op", "aten::linear", t0 + 10, 2000.0),
          _x("cpu_op", "aten::item", t0 + 2100, 30.0),
          _x("cpu_op", "aten::_local_scalar_dense", t0 + 2105, 20.0)]
    # clip_grad_norm_ uses _foreach_norm outside the optimizer: not the optimizer's
    ev.append(_x("cpu_op", "aten::_foreach_norm", t0 + 2200, 50.0))
    ev.append(_x("user_annotation", "Optimizer.step#AdamW.step", t0 + 3000, 4000.0))
    if optimizer == "plain":
        for k in range(150):
            ev.append(_x("cpu_op", ("aten::add_", "aten::mul_", "aten::addcdiv_")[k % 3], t0 + 3010 + 25 * k, 20.0))
    else:
        ev.append(_x("cpu_op", "aten::_fused_adamw_", t0 + 3010, 500.0))
    if empty_cache:
        ev.append(_x("python_function", "torch/cuda/memory.py(216): empty_cache", t0 + 7100, 40.0))
    if gc_us:
        ev.append(_x("python_function", "Python GC", t0 + 7200, gc_us, **{"Ev Idx": i}))
    return ev


def write_trace(path: Path, *, gc_us: float, optimizer: str, empty_cache: bool, steps: int = 5) -> Path:
    events = [{"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python3"}}]
    for i in range(steps):
        events += _step(i + 1, 1_000_000.0 + i * STEP_US, gc_us, optimizer, empty_cache)
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_host_calls_table_counts_each_class_per_step(tmp_path):
    profile = kineto.read(write_trace(tmp_path / "a.pt.trace.json", gc_us=2500.0, optimizer="plain",
                                      empty_cache=True))
    profile.check()
    hc = profile.host_calls
    assert sorted(hc["step"].unique()) == [1, 2, 3, 4, 5]
    per_class = hc.groupby("cls")["count"].sum().to_dict()
    assert per_class["gc"] == 5 and per_class["empty_cache"] == 5 and per_class["optimizer"] == 5
    assert per_class["optimizer_op"] == 5 * 150
    assert "optimizer_foreach" not in per_class  # the _foreach_norm outside the step is not the optimizer's
    sync = hc[hc["cls"] == "sync"]
    assert set(sync["name"]) == {"aten::item", "aten::_local_scalar_dense"}
    assert set(sync["frame"]) == {"train.py(40): train_step"}  # the program's frame around the call
    gc = hc[hc["cls"] == "gc"]
    assert gc["max_us"].tolist() == [2500.0] * 5


def test_calls_outside_every_program_frame_have_no_frame(tmp_path):
    # with_stack=True records frames on the threads that run Python; calls on
    # another thread (autograd's, a hook's) have none around them
    path = write_trace(tmp_path / "a.pt.trace.json", gc_us=2500.0, optimizer="plain", empty_cache=False)
    doc = json.loads(path.read_text())
    for e in doc["traceEvents"]:
        if e.get("cat") == "python_function" and e["name"].startswith("train.py"):
            e["tid"] = TID + 1
    path.write_text(json.dumps(doc))
    profile = kineto.read(path)
    profile.check()  # the frame column is text even when no call has one
    sync = profile.host_calls[profile.host_calls["cls"] == "sync"]
    assert len(sync) and sync["frame"].isna().all()


def test_habits_fire_their_rules(tmp_path):
    report = advisor.analyze(write_trace(tmp_path / "a.pt.trace.json", gc_us=2500.0, optimizer="plain",
                                         empty_cache=True))
    m = report.metrics
    assert m["host.gc_ms"].value == pytest.approx(2.5)
    assert m["host.gc_max_ms"].value == pytest.approx(2.5)
    assert m["host.optimizer_impl"].value == "per-parameter" and m["host.optimizer_ops"].value == 150
    assert m["host.empty_cache_calls"].value == 1.0
    assert m["host.empty_cache_sites"].value[0]["frame"] == "train.py(40): train_step"
    fired = {f.rule for f in report.all_findings()}
    assert {"gc-pause", "unfused-optimizer", "allocator-churn"} <= fired


def test_a_clean_loop_keeps_them_quiet(tmp_path):
    report = advisor.analyze(write_trace(tmp_path / "a.pt.trace.json", gc_us=60.0, optimizer="fused",
                                         empty_cache=False))
    m = report.metrics
    assert m["host.gc_max_ms"].value == pytest.approx(0.06)
    assert m["host.optimizer_impl"].value == "fused"
    fired = {f.rule for f in report.all_findings()}
    assert not fired & {"gc-pause", "unfused-optimizer", "allocator-churn"}, fired


def test_without_gc_events_the_gc_metrics_are_not_evaluated(tmp_path):
    report = advisor.analyze(write_trace(tmp_path / "a.pt.trace.json", gc_us=0.0, optimizer="fused",
                                         empty_cache=False))
    assert "host.gc_ms" not in report.metrics
    assert any(s.what == "metric host.gc_ms" and "record_python_gc_info" in s.reason for s in report.skipped)
