"""Peak device memory against the device's capacity (``memory_summary`` of
Kineto traces and torch_npu folders; memory.device_peak_share and the
memory-near-capacity rule).

Kineto: with ``profile_memory=True`` the PyTorch profiler writes each
allocation and free as an instant event ``{"ph": "i", "cat":
"cpu_instant_event", "name": "[memory]", "args": {"Total Reserved",
"Total Allocated", "Bytes", "Device Id", "Device Type", "Addr", ...}}``
(read off a real torch 2.13 CPU trace, where ``Device Type`` is 0; CUDA's
is 1, c10::DeviceType), and lists the GPUs in ``deviceProperties`` with
``totalGlobalMem`` in bytes (the corpus's V100 and A100 traces carry it).

torch_npu: ``ASCEND_PROFILER_OUTPUT/memory_record.csv`` with the columns of
the Ascend PyTorch Profiler's file reference (reference document
ascend-pytorch-profiler-files-zh.txt, table 2: Component, Timestamp(us),
Total Allocated(MB), Total Reserved(MB), Total Active(MB), Stream Ptr,
Device Type); no file of that output records the device's capacity.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor.collectors.kineto import decode

GIB = 1 << 30
A100_BYTES = 42297524224  # deviceProperties totalGlobalMem of the corpus's A100 traces
PID = TID = 77


def _kineto(path: Path, reserved_gib: float, device_type: int = 1, capacity: int | None = A100_BYTES) -> Path:
    """Five steps of one op each; every step allocates 1 GiB more than it
    frees until ``reserved_gib`` is reserved."""
    events = []
    for i in range(5):
        t0 = 1_000_000.0 + i * 10_000
        events += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i + 1}", "pid": PID, "tid": TID,
                    "ts": t0, "dur": 10_000.0, "args": {}},
                   {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": PID, "tid": TID, "ts": t0 + 10,
                    "dur": 9_000.0, "args": {}}]
        reserved = reserved_gib * GIB * (i + 1) / 5
        events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": PID, "tid": TID,
                       "ts": t0 + 20, "args": {"Total Reserved": int(reserved), "Total Allocated": int(reserved * 0.8),
                                               "Bytes": GIB, "Device Id": 0 if device_type else -1,
                                               "Device Type": device_type, "Addr": 140000000 + i}})
    doc = {"schemaVersion": 1, "traceEvents": events,
           "deviceProperties": ([{"id": 0, "name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": capacity,
                                  "computeMajor": 8, "computeMinor": 0}] if capacity else [])}
    path.write_text(json.dumps(doc))
    return path


def _rules(report) -> set[str]:
    return {f.rule for f in report.findings}


def test_kineto_memory_events_give_the_peak_against_total_global_mem(tmp_path):
    trace = decode.load_trace(_kineto(tmp_path / "a.pt.trace.json", reserved_gib=37.0))
    assert trace.device_memory_peak == (pytest.approx(37.0 * GIB, rel=1e-6), pytest.approx(0.8 * 37.0 * GIB, rel=1e-6))
    report = advisor.analyze(tmp_path / "a.pt.trace.json")
    share = report.metrics["memory.device_peak_share"]
    assert share.value == pytest.approx(37.0 * GIB / A100_BYTES, rel=1e-4)
    assert "memory-near-capacity" in _rules(report)
    finding = next(f for f in report.findings if f.rule == "memory-near-capacity")
    assert finding.estimated_gain_ms is None  # a risk, not time lost
    assert "expandable segments" in finding.message


def test_kineto_peak_well_below_capacity_keeps_quiet(tmp_path):
    report = advisor.analyze(_kineto(tmp_path / "a.pt.trace.json", reserved_gib=20.0))
    assert report.metrics["memory.device_peak_share"].value == pytest.approx(20.0 * GIB / A100_BYTES, rel=1e-4)
    assert "memory-near-capacity" not in _rules(report)


def test_cpu_memory_events_are_not_the_device_s(tmp_path):
    trace = decode.load_trace(_kineto(tmp_path / "a.pt.trace.json", reserved_gib=37.0, device_type=0, capacity=None))
    assert trace.device_memory_peak is None
    report = advisor.analyze(tmp_path / "a.pt.trace.json")
    assert "memory.device_peak_share" not in report.metrics


def test_a_trace_without_total_global_mem_names_what_is_missing(tmp_path):
    report = advisor.analyze(_kineto(tmp_path / "a.pt.trace.json", reserved_gib=37.0, capacity=None))
    assert report.metrics["memory.device_peak_gib"].value == pytest.approx(37.0)
    reason = next(s.reason for s in report.skipped if s.what == "metric memory.device_peak_share")
    assert "capacity" in reason


def _npu_rank(tmp_path: Path) -> Path:
    """A torch_npu rank folder: steps from trace_view.json (as the host-habits
    fixture writes them), memory_record.csv with APP and operator-level records."""
    from tests.collectors.ascend.test_ascend_host_calls import rank_folder

    root = rank_folder(tmp_path, bad=False)
    rows = ["Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type",
            "PTA+GE,1700000000100.0,20480.0,30720.0,20480.0,187650000,NPU:0",
            "PTA+GE,1700000000200.0,40960.0,51200.0,40960.0,187650000,NPU:0",
            "APP,1700000000200.0,,58368.0,,,NPU:0",
            "PTA,1700000000300.0,10240.0,30720.0,10240.0,187650000,NPU:0"]
    (root / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv").write_text("\n".join(rows) + "\n")
    return root


def test_torch_npu_memory_record_gives_the_peak_but_no_capacity(tmp_path):
    report = advisor.analyze(_npu_rank(tmp_path))
    assert report.metrics["memory.device_peak_gib"].value == pytest.approx(58368.0 / 1024)  # the APP record
    assert "memory.device_peak_share" not in report.metrics
    reason = next(s.reason for s in report.skipped if s.what == "metric memory.device_peak_share")
    assert "torch_npu" in reason and "capacity" in reason
    assert "memory-near-capacity" not in _rules(report)
