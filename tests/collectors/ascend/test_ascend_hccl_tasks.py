"""HCCL transfer tasks from ``trace_view.json`` and the unaligned-transfer rule.

The fixtures follow the torch_npu Level1 timeline as msprof-analyze reads it
for its byte-alignment check (msprof_analyze/advisor/dataset/communication/
hccl_detail_dataset.py: the lanes of the process named ``HCCL`` or
``Communication``, task names split on ``_`` into ``hcom`` operators,
``Memcpy`` and ``Reduce`` (``Reduce_Inline``) tasks; dataset/profiling/
info_collection.py: ``HcclTask`` reads ``args["size(Byte)"]``,
``args["transport type"]``, ``args["link type"]``; alignment/
byte_alignment_checker.py skips link type ``ON_CHIP`` and sizes up to 512 B).
Steps come from the Overlap Analysis lanes per ``ProfilerStep#N``, as
trace_view.py reads them. At Level0 the HCCL lanes hold the operators only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor.collectors.ascend import hccl_tasks
from advisor.collectors.ascend.trace_view import decode_trace

PY, HCCL, OVERLAP = 1, 3, 9
STEP_US = 50_000.0
ALIGNED = 4 * 1024 * 1024  # a 4 MB bucket slice
UNALIGNED = 4 * 1024 * 1024 + 256


def _x(pid: int, name: str, ts: float, dur: float, tid: int = 1, args: dict | None = None) -> dict:
    return {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": f"{ts:.3f}", "dur": dur, "args": args or {}}


def _task(name: str, ts: float, dur: float, size: int, transport: str = "SDMA", link: str = "HCCS") -> dict:
    args = {"notify id": 0, "stream id": 7, "task id": 12, "task type": transport, "src rank": 0, "dst rank": 1,
            "transport type": transport, "size(Byte)": size, "data type": "FP32", "link type": link}
    return _x(HCCL, name, ts, dur, tid=2, args=args)


def _meta(pid: int, name: str, kind: str = "process_name", tid: int = 0) -> dict:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name}}


def trace(size: int | None, steps: int = 4) -> list[dict]:
    """``size`` None: a Level0 trace (operators on the HCCL lane, no tasks)."""
    events = [_meta(PY, "Python"), _meta(HCCL, "HCCL"), _meta(OVERLAP, "Overlap Analysis"),
              _meta(OVERLAP, "Computing", "thread_name", 0), _meta(OVERLAP, "Communication(Not Overlapped)",
                                                                  "thread_name", 2),
              _meta(OVERLAP, "Free", "thread_name", 3)]
    for i in range(steps):
        t0 = 1_700_000_000_000.0 + i * STEP_US
        events += [_x(PY, f"ProfilerStep#{i + 1}", t0, STEP_US),
                   _x(OVERLAP, "Computing", t0, 35_000.0, tid=0),
                   _x(OVERLAP, "Communication(Not Overlapped)", t0 + 35_000, 5_000.0, tid=2),
                   _x(OVERLAP, "Free", t0 + 40_000, 10_000.0, tid=3),
                   _x(HCCL, "hcom_allReduce__123_0_1", t0 + 30_000, 10_000.0, tid=1)]
        if size is None:
            continue
        for k in range(4):
            events.append(_task("Memcpy", t0 + 30_000 + 2000 * k, 1000.0, size))
            events.append(_task("Reduce_Inline", t0 + 31_000 + 2000 * k, 1000.0, size))
        events.append(_task("Memcpy", t0 + 39_000, 500.0, 100))                    # tiny: left out
        events.append(_task("Memcpy", t0 + 39_500, 400.0, UNALIGNED, link="ON_CHIP"))  # on the chip: left out
        events.append(_task("Memcpy", t0 + 39_000, 800.0, ALIGNED, transport="RDMA", link="ROCE"))
    return events


def rank_folder(tmp_path: Path, size: int | None) -> Path:
    root = tmp_path / str(size) / "node_1_20240101_ascend_pt"
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (root / "profiler_info_0.json").write_text(json.dumps({"rank_id": 0}))
    (out / "trace_view.json").write_text(json.dumps(trace(size)))
    return root


def test_tasks_are_summed_per_step_transport_link_and_size(tmp_path):
    table = hccl_tasks.read(decode_trace(rank_folder(tmp_path, UNALIGNED) / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"), 0)
    assert sorted(table["step"].unique()) == [1, 2, 3, 4]
    sdma = table[(table["transport"] == "SDMA") & (table["link"] == "HCCS") & (table["size_bytes"] == UNALIGNED)]
    assert sdma["count"].tolist() == [8, 8, 8, 8] and sdma["total_us"].tolist() == [8000.0] * 4
    assert set(table["link"]) == {"HCCS", "ON_CHIP", "ROCE"}
    assert "hcom_allReduce__123_0_1" not in set(table.columns)  # operators are not tasks


def test_unaligned_sdma_transfers_fire(tmp_path):
    report = advisor.analyze(rank_folder(tmp_path, UNALIGNED))
    m = report.metrics
    assert m["transfer.unaligned_sdma_share"].value == pytest.approx(1.0)  # tiny and on-chip tasks left out
    assert m["transfer.unaligned_sdma_ms"].value == pytest.approx(8.0)
    assert m["transfer.unaligned_sdma_share"].evidence["top_sizes_bytes"] == [UNALIGNED]
    found = {f.rule: f for f in report.all_findings()}
    assert "unaligned-transfer" in found, sorted(found)
    assert found["unaligned-transfer"].estimated_gain_ms == pytest.approx(5.0 * 0.3)  # bounded by the exposed 5 ms


def test_aligned_transfers_keep_it_quiet(tmp_path):
    report = advisor.analyze(rank_folder(tmp_path, ALIGNED))
    assert report.metrics["transfer.unaligned_sdma_share"].value == 0.0
    assert "unaligned-transfer" not in {f.rule for f in report.all_findings()}


def test_level0_has_no_task_records_and_never_fires(tmp_path):
    folder = rank_folder(tmp_path, None)
    assert hccl_tasks.read(decode_trace(folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"), 0) is None
    report = advisor.analyze(folder)
    assert "transfer.unaligned_sdma_share" not in report.metrics
    skipped = {s.what: s.reason for s in report.skipped}
    assert "hccl_tasks" in skipped["metric transfer.unaligned_sdma_share"]
    assert "unaligned-transfer" not in {f.rule for f in report.all_findings()}


def _task_db(path: Path, size: int) -> Path:
    """A profiler database holding the task records as msprof-analyze's
    HCCL_TASK_SQL joins them (advisor/common/profiling/msprof.py):
    COMMUNICATION_TASK_INFO(globalTaskId, taskType, transportType, linkType,
    size) -> TASK(globalTaskId, startNs, endNs), STRING_IDS, ENUM_HCCL_*;
    STEP_TIME(step, startNs, endNs)."""
    import sqlite3

    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE ENUM_HCCL_LINK_TYPE (id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE ENUM_HCCL_TRANSPORT_TYPE (id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER,
                           globalTaskId INTEGER PRIMARY KEY, globalPid INTEGER, taskType INTEGER,
                           contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER);
        CREATE TABLE COMMUNICATION_TASK_INFO (name INTEGER, globalTaskId INTEGER, taskType INTEGER,
                           planeId INTEGER, groupName INTEGER, notifyId INTEGER, rdmaType INTEGER,
                           srcRank INTEGER, dstRank INTEGER, transportType INTEGER, size INTEGER,
                           dataType INTEGER, linkType INTEGER, opId INTEGER);
        CREATE TABLE STEP_TIME (step INTEGER, startNs INTEGER, endNs INTEGER);
        INSERT INTO STRING_IDS VALUES (1, 'Memcpy'), (2, 'Reduce_Inline'), (3, 'Notify_Wait');
        INSERT INTO ENUM_HCCL_LINK_TYPE VALUES (0, 'ON_CHIP'), (1, 'HCCS'), (3, 'ROCE');
        INSERT INTO ENUM_HCCL_TRANSPORT_TYPE VALUES (0, 'SDMA'), (1, 'RDMA'), (2, 'LOCAL');
    """)
    gid = 0
    for step in (1, 2):
        t0 = step * 50_000_000
        con.execute("INSERT INTO STEP_TIME VALUES (?, ?, ?)", (step, t0, t0 + 50_000_000))
        for task_type, sz in ((1, size), (2, size), (3, 0)):
            gid += 1
            start = t0 + 30_000_000 + gid * 1_000_000
            con.execute("INSERT INTO TASK (startNs, endNs, globalTaskId) VALUES (?, ?, ?)",
                        (start, start + 1_000_000, gid))
            con.execute("INSERT INTO COMMUNICATION_TASK_INFO (globalTaskId, taskType, transportType, size, "
                        "linkType) VALUES (?, ?, 0, ?, 1)", (gid, task_type, sz))
    con.commit()
    con.close()
    return path


def test_the_database_layout_gives_the_same_task_table(tmp_path):
    table = hccl_tasks.read_db(_task_db(tmp_path / "ascend_pytorch_profiler_0.db", UNALIGNED), 0)
    assert table["step"].tolist() == [1, 2]
    assert table[["transport", "link", "size_bytes"]].drop_duplicates().values.tolist() == [["SDMA", "HCCS",
                                                                                              UNALIGNED]]
    assert table["count"].tolist() == [2, 2] and table["total_us"].tolist() == [2000.0, 2000.0]


def test_real_timelines_without_task_records_leave_the_rule_unevaluated(corpus):
    """A real cropped torch_npu timeline and a MindSpore CPU one: no HCCL
    task records, so no table and no finding."""
    for rel in ("mstt/test/ut/advisor/advisor_backend/timeline_advice/trace_view.json",
                "mindspore-cpu/vm_12077_20261122142131812_ascend_ms/ASCEND_PROFILER_OUTPUT/trace_view.json"):
        assert hccl_tasks.read(decode_trace(corpus / rel), 0) is None
    report = advisor.analyze(corpus / "mstt/test/ut/advisor/advisor_backend/timeline_advice/trace_view.json")
    assert "transfer.unaligned_sdma_share" not in report.metrics
    assert "unaligned-transfer" not in {f.rule for f in report.all_findings()}
