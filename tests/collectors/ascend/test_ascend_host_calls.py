"""torch_npu host habits from ``trace_view.json`` and ``profiler_metadata.json``.

The fixtures follow the documented torch_npu layout as msprof-analyze reads
it (msprof_analyze/advisor/dataset/timeline_op_collector/timeline_op_collector.py
and its unit test test_gc_advice.py): GC records are ``X`` events of
category ``GC`` named ``GC`` on a ``Python GC`` process (``GcCollector``:
``cat.lower() == "gc"``); CANN calls are named ``AscendCL@<function>``
(``Constant.SYNC_STREAM = "AscendCL@aclrtSynchronizeStream"``); a
SyncBatchNorm layer is a framework op named ``SyncBatchNorm``
(``SyncBNCollector``); the optimizer step is ``Optimizer.step#AdamW.step``
(``OptimizerCollector``); the recorded environment is the ``ENV_VARIABLES``
object of ``profiler_metadata.json`` (environment_variable_checker.py).
Steps come from the Overlap Analysis lanes (Computing, Free) per
``ProfilerStep#N``, as trace_view.py reads them. The corpus trace is a real
cropped torch_npu timeline.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor.collectors.ascend import host_calls
from advisor.collectors.ascend.trace_view import DEVICE_PROCESS, decode_trace, process_pids
from advisor.collectors.kineto.op_chains import FRAMEWORK_OP
from advisor.collectors.kineto.shaped_events import CLOSURE_NOTE

PY, GC, CANN, OVERLAP = 1, 2, 5, 9
STEP_US = 50_000.0
TIMELINE = "mstt/test/ut/advisor/advisor_backend/timeline_advice/trace_view.json"
HABITS = {"gc-pause", "sync-stall", "syncbn-overhead", "slow-env-setting", "unfused-optimizer"}


def _x(pid: int, name: str, ts: float, dur: float, cat: str | None = None, tid: int = 1) -> dict:
    ev = {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": f"{ts:.3f}", "dur": dur, "args": {}}
    if cat:
        ev["cat"] = cat
    return ev


def _meta(pid: int, name: str) -> dict:
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}


def trace(bad: bool, steps: int = 4, optimizers: tuple[str, ...] = ("AdamW",)) -> list[dict]:
    events = [_meta(PY, "Python"), _meta(GC, "Python GC"), _meta(CANN, "CANN"), _meta(OVERLAP, "Overlap Analysis"),
              {"ph": "M", "name": "thread_name", "pid": OVERLAP, "tid": 0, "args": {"name": "Computing"}},
              {"ph": "M", "name": "thread_name", "pid": OVERLAP, "tid": 3, "args": {"name": "Free"}}]
    for i in range(steps):
        t0 = 1_700_000_000_000.0 + i * STEP_US
        events += [_x(PY, f"ProfilerStep#{i + 1}", t0, STEP_US, "cpu_op"),
                   _x(OVERLAP, "Computing", t0, 30_000.0, tid=0), _x(OVERLAP, "Free", t0 + 30_000, 20_000.0, tid=3)]
        if bad:
            events.append(_x(GC, "GC", t0 + 100, 4000.0, "GC"))
            events += [_x(PY, "SyncBatchNorm", t0 + 5000 + 400 * k, 300.0, "cpu_op") for k in range(24)]
            events.append(_x(PY, "aten::item", t0 + 15_000, 12_000.0, "cpu_op"))
            events.append(_x(CANN, "AscendCL@aclrtSynchronizeStream", t0 + 15_010, 11_900.0))
            for j, name in enumerate(optimizers):  # each a single-tensor loop of 8 ms, the later ones longer
                at = t0 + 30_000 + j * 9000
                events.append(_x(PY, f"Optimizer.step#{name}.step", at, 8000.0 + j * 500, "cpu_op"))
                events += [_x(PY, ("aten::add_", "aten::mul_", "aten::addcdiv_")[k % 3], at + 10 + 50 * k, 40.0,
                              "cpu_op") for k in range(120)]
        else:
            events.append(_x(GC, "GC", t0 + 100, 50.0, "GC"))
            events.append(_x(CANN, "AscendCL@aclrtSynchronizeStream", t0 + 15_010, 30.0))
            events.append(_x(PY, "Optimizer.step#NpuFusedAdamW.step", t0 + 30_000, 900.0, "cpu_op"))
    return events


def rank_folder(tmp_path: Path, bad: bool, optimizers: tuple[str, ...] = ("AdamW",)) -> Path:
    root = tmp_path / ("bad" if bad else "good") / "node_1_20240101_ascend_pt"
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    env = ({"ASCEND_LAUNCH_BLOCKING": "1", "ASCEND_GLOBAL_LOG_LEVEL": "1", "HCCL_RDMA_TC": "132"} if bad
           else {"ASCEND_GLOBAL_LOG_LEVEL": "3", "TASK_QUEUE_ENABLE": "2"})
    (root / "profiler_metadata.json").write_text(json.dumps({"ENV_VARIABLES": env}))
    (root / "profiler_info_0.json").write_text(json.dumps({"rank_id": 0}))
    (out / "trace_view.json").write_text(json.dumps(trace(bad, optimizers=optimizers)))
    return root


def test_host_calls_are_counted_per_profiler_step(tmp_path):
    trace = rank_folder(tmp_path, bad=True) / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    table = host_calls.read(decode_trace(trace), 0)
    calls = table[table["cls"] != "silent_gap"]  # the stretches between them: tests/ascend/test_ascend_gaps.py
    counts = calls.groupby("cls")["count"].sum().to_dict()
    assert counts == {"gc": 4, "syncbn": 96, "sync": 8, "optimizer": 4, "optimizer_op": 480}
    assert sorted(table["step"].unique()) == [1, 2, 3, 4]


def test_torch_npu_habits_fire(tmp_path):
    report = advisor.analyze(rank_folder(tmp_path, bad=True))
    m = report.metrics
    assert m["host.gc_max_ms"].value == pytest.approx(4.0)
    assert m["host.syncbn_calls"].value == 24
    assert m["host.sync_stall_ms"].value == pytest.approx(12.0)  # the blocked time, within the 20 ms free
    assert [e["name"] for e in m["host.slow_env"].value] == ["ASCEND_LAUNCH_BLOCKING", "ASCEND_GLOBAL_LOG_LEVEL"]
    found = {f.rule: f for f in report.all_findings()}
    assert HABITS <= set(found), sorted(found)
    assert "AscendCL@aclrtSynchronizeStream" in found["sync-stall"].message
    assert "unset (or 0)" in found["slow-env-setting"].message


def test_the_fused_optimizer_named_is_one_torch_npu_has_for_a_class_it_counted(tmp_path):
    """Adagrad has a fused torch.optim implementation but no NpuFused one;
    RMSprop has an NpuFused one (and none in torch.optim): on torch_npu the
    optimizer time that counts is RMSprop's, and the fix names its fused
    class, not one for Adagrad."""
    report = advisor.analyze(rank_folder(tmp_path, bad=True, optimizers=("Adagrad", "RMSprop")))
    m = report.metrics
    assert m["host.optimizer_classes"].value == ["Adagrad", "RMSprop"]
    assert m["host.fusable_optimizer_classes"].value == ["RMSprop"]
    assert m["host.fusable_optimizer_ms"].value == pytest.approx(8.5)
    assert m["host.optimizer_ms"].value == pytest.approx(16.5)
    found = next(f for f in report.all_findings() if f.rule == "unfused-optimizer")
    assert found.fix.framework == "torch_npu"
    assert "NpuFusedRMSprop(" in found.fix.code and "Adagrad" not in found.fix.code
    assert "8.50 ms of the optimizer's time is in classes that have a fused one: RMSprop)" in found.message


def test_a_clean_torch_npu_run_keeps_them_quiet(tmp_path):
    report = advisor.analyze(rank_folder(tmp_path, bad=False))
    m = report.metrics
    assert m["host.optimizer_impl"].value == "fused" and m["host.slow_env"].value == []
    assert m["host.gc_max_ms"].value == pytest.approx(0.05)
    fired = {f.rule for f in report.all_findings()}
    assert not fired & HABITS, fired


def test_real_cropped_timeline(corpus):
    """One real torch_npu step: 45 aten::item calls (one waits 2.4 ms), the
    CANN syncs behind them, an Adam step with 80 elementwise ops. One step
    cannot show a per-step sync habit; the single-tensor Adam, a fifth of the
    step, is what msprof-analyze's affinity-API check reports there too."""
    table = host_calls.read(decode_trace(corpus / TIMELINE), 0)
    names = set(table.loc[table["cls"] == "sync", "name"])
    assert {"aten::item", "AscendCL@aclrtSynchronizeStream", "AscendCL@aclrtSynchronizeDevice"} <= names
    report = advisor.analyze(corpus / TIMELINE)
    assert report.metrics["host.optimizer_classes"].value == ["Adam"]
    assert report.metrics["host.sync_stall_ms"].value > 2.0
    fired = {f.rule: f for f in report.all_findings()}
    assert "sync-stall" not in fired, fired
    assert "unfused-optimizer" in fired and "Adam" in fired["unfused-optimizer"].message, fired


def test_real_timeline_ops_get_the_device_time_they_launched(corpus):
    """Each framework op's device time is the tasks its launches started
    (async_npu flows from inside it to the "Ascend Hardware" tasks), the
    outermost op around the launch taking it: on the real timeline nearly
    all task time lands on an op, the forward's convolution and linear
    layers among them, and a CNN has no fusable chain of the op-chain
    patterns."""
    import numpy as np

    trace = decode_trace(corpus / TIMELINE)
    ops = [e for e in trace.events if e.ph == "X" and e.cat == "cpu_op" and FRAMEWORK_OP in e.name]
    thread = np.unique([f"{e.pid}/{e.tid}" for e in ops], return_inverse=True)[1]
    start = np.array([float(e.ts) for e in ops])
    end = start + np.array([float(e.dur) for e in ops])
    device = host_calls.op_device_time(trace, ops, thread, start, end)
    hardware = process_pids(trace.events, (DEVICE_PROCESS,))
    tasks = sum(float(e.dur) for e in trace.events if e.ph == "X" and e.pid in hardware)
    assert tasks > 0
    assert np.nansum(device) == pytest.approx(tasks, rel=0.01)
    by_name = {}
    for e, d in zip(ops, device):
        by_name[e.name] = by_name.get(e.name, 0.0) + d
    assert by_name["aten::conv2d"] > 0 and by_name["aten::linear"] > 0
    assert by_name["aten::relu"] + by_name["aten::conv2d"] <= tasks
    assert host_calls.op_chain_rows(trace, ops, 0) is None


def test_a_rank_trace_is_decoded_once_for_all_its_readers(tmp_path, monkeypatch):
    """The rank has no step_trace_time.csv and no communication files, so its
    steps (Overlap Analysis lanes), its Level0 collectives (HCCL lanes), its
    host calls and its HCCL tasks all come from trace_view.json: one decode."""
    from advisor.collectors.ascend import collector

    decoded = []

    def counting(path):
        decoded.append(path)
        return decode_trace(path)

    monkeypatch.setattr(collector, "decode_trace", counting)
    profile = collector.read(rank_folder(tmp_path, bad=True))
    assert [p.name for p in decoded] == ["trace_view.json"]
    assert profile.steps is not None and len(profile.steps) == 4
    assert profile.host_calls is not None and "gc" in set(profile.host_calls["cls"])


def test_an_optimizer_step_running_a_closure_counts_only_its_update(tmp_path):
    """optimizer.step(closure) (PyTorch Lightning on torch_npu): the closure's
    backward nodes run inside Optimizer.step; the optimizer's time starts
    where the last of them ends, and its ops before that are the model's."""
    events = [_meta(PY, "Python")]
    for i in range(4):
        t0 = 1_700_000_000_000.0 + i * STEP_US
        events += [_x(PY, f"ProfilerStep#{i + 1}", t0, STEP_US, "cpu_op"),
                   _x(PY, "Optimizer.step#AdamW.step", t0 + 1000, 40_000.0, "cpu_op"),
                   _x(PY, "aten::mul_", t0 + 2000, 500.0, "cpu_op"),  # the closure's forward
                   _x(PY, "autograd::engine::evaluate_function: MulBackward0", t0 + 10_000, 20_000.0, "cpu_op"),
                   *(_x(PY, "aten::add_", t0 + 31_000 + 100 * k, 50.0, "cpu_op") for k in range(30))]
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(events))
    notes = []
    table = host_calls.read(decode_trace(path), 0, notes)
    assert notes == [CLOSURE_NOTE]
    opt = table[table["cls"] == "optimizer"]
    assert opt["count"].sum() == 4 and opt["total_us"].sum() == pytest.approx(4 * 11_000.0)
    ops = table[table["cls"] == "optimizer_op"]
    assert set(ops["name"]) == {"aten::add_"} and ops["count"].sum() == 4 * 30
