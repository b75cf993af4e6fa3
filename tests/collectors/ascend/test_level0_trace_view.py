"""Communication at profiler Level0 from ``trace_view.json`` alone.

Without ``communication.json`` (Level1 only) and without ``kernel_details.csv``,
the collectives come from the trace's HCCL lanes: a process named "HCCL"
(newer torch_npu: "Communication") whose threads named ``... Communication``
hold one X event per operator, the others ("Plane 0") its tasks -- the lanes
msprof-analyze's compare tools read (mstt
``profiler/compare_tools/compare_backend/profiling_parser/npu_profiling_parser.py``,
``TraceEventBean.is_hccl_process_name`` / ``is_communication_op_thread``).
Overlap Analysis lanes and ``ProfilerStep#N`` markers as torch_npu writes them
(the corpus trace below has the same process / thread metadata).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.collectors.ascend import collector, hccl_rows
from advisor.collectors.ascend.trace_view import decode_trace, hccl_operators
from advisor.pipeline import analyze_profile

STEP_TRACE = ("Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
              "Communication(Not Overlapped and Exclude Receive)\n"
              "5,700.0,260.0,10.0,270.0,40.0,1000.0,0,260.0\n"
              "6,700.0,260.0,10.0,270.0,40.0,1000.0,0,260.0\n")


def _meta(kind: str, pid: int, tid: int, value: str) -> dict:
    key = "labels" if kind == "process_labels" else "name"
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {key: value}}


def _trace(process: str = "HCCL", gather: bool = True) -> list[dict]:
    """Two steps; per step a 200 us all-reduce after compute and (``gather``) a 20 us all-gather."""
    events = [
        _meta("process_name", 1, 0, "Python"), _meta("process_labels", 1, 0, "CPU"),
        _meta("process_name", 800, 0, "Ascend Hardware"), _meta("thread_name", 800, 3, "Stream 3"),
        _meta("process_name", 900, 0, process), _meta("process_labels", 900, 0, "NPU"),
        _meta("thread_name", 900, 0, "Group hccl_world_group Communication"),
        _meta("thread_name", 900, 1, "Plane 0"),
    ]
    for i, step in enumerate((5, 6)):
        t0 = 10_000.0 + 1000.0 * i
        events += [
            {"ph": "X", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1, "ts": t0, "dur": 1000.0},
            {"ph": "X", "name": "aclnnMatmul", "pid": 800, "tid": 3, "ts": t0 + 10, "dur": 700.0},
            *([{"ph": "X", "name": f"hcom_allGather__607_{step}_1", "pid": 900, "tid": 0, "ts": t0 + 100,
                "dur": 20.0}] if gather else []),
            {"ph": "X", "name": f"hcom_allReduce__606_{step}_1", "pid": 900, "tid": 0, "ts": t0 + 720,
             "dur": 200.0},
            # a task of the all-reduce on a plane lane: not an operator
            {"ph": "X", "name": "Memcpy", "pid": 900, "tid": 1, "ts": str(t0 + 730), "dur": "50.0"},
        ]
    return events


def _rank(tmp_path: Path, trace: list | dict, step_trace: str | None = STEP_TRACE) -> Path:
    out = tmp_path / "node_1_20250101_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out.parent / "profiler_info_2.json").write_text('{"rank_id": 2}')
    (out / "trace_view.json").write_text(json.dumps(trace))
    if step_trace:
        (out / "step_trace_time.csv").write_text(step_trace)
    return out.parent


@pytest.mark.parametrize("process", ["HCCL", "Communication"])
def test_hccl_operator_lanes_become_comm_rows_per_step(tmp_path: Path, process: str) -> None:
    profile = collector.read(_rank(tmp_path, {"traceEvents": _trace(process)}))
    comm = profile.comm.sort_values(["step", "start_us"])
    assert list(comm["kind"]) == ["allgather", "allreduce"] * 2
    assert list(comm["step"]) == [5, 5, 6, 6]
    assert list(comm["elapse_us"]) == [20.0, 200.0] * 2
    assert set(comm["rank"]) == {2}
    assert "size_mb" not in comm or comm["size_mb"].isna().all()
    assert profile.meta.comm_source == {2: hccl_rows.LEVEL0_TRACE_VIEW}
    assert "trace_view.json" in hccl_rows.SOURCES[hccl_rows.LEVEL0_TRACE_VIEW]
    assert any("trace_view.json" in n and "Level0" in n for n in profile.meta.notes)


def test_without_step_markers_the_operators_have_no_step(tmp_path: Path) -> None:
    trace = [e for e in _trace() if not e["name"].startswith("ProfilerStep#")]
    ops = hccl_operators(decode_trace(_write(tmp_path, trace)))
    assert ops.num_rows == 4 and ops.column("step").null_count == 4


def test_task_lanes_and_other_processes_are_not_operators(tmp_path: Path) -> None:
    """Only threads named ``... Communication`` of the HCCL process count: the plane's tasks and an
    hcom-named event on another process do not."""
    trace = _trace() + [{"ph": "X", "name": "hcom_allReduce__1_5_1", "pid": 800, "tid": 3, "ts": 10_500.0,
                         "dur": 5.0}]
    ops = hccl_operators(decode_trace(_write(tmp_path, trace)))
    assert sorted(set(ops.column("name").to_pylist())) == sorted(
        {"hcom_allGather__607_5_1", "hcom_allReduce__606_5_1", "hcom_allGather__607_6_1",
         "hcom_allReduce__606_6_1"})


def test_kernel_rows_win_over_the_trace(tmp_path: Path) -> None:
    root = _rank(tmp_path, _trace())
    (root / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").write_text(
        "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"
        "5,hcom_allReduce__606_5_1,hcom_allReduce_,HCCL,10720.0,150.0\n")
    profile = collector.read(root)
    assert profile.meta.comm_source == {2: hccl_rows.LEVEL0}
    assert list(profile.comm["elapse_us"]) == [150.0]


def test_trace_without_hccl_lanes_gives_no_comm(tmp_path: Path) -> None:
    trace = [e for e in _trace() if e["pid"] != 900]
    profile = collector.read(_rank(tmp_path, trace))
    assert profile.comm is None and profile.meta.comm_source == {}


def test_corpus_single_device_trace_has_no_hccl_lanes(corpus: Path) -> None:
    """A real torch_npu trace_view.json of one device (no HCCL process): no collectives are invented."""
    path = corpus / "mstt/test/ut/advisor/advisor_backend/timeline_advice/trace_view.json"
    assert hccl_operators(decode_trace(path)) is None


def _write(tmp_path: Path, trace: list) -> Path:
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(trace))
    return path


def _exposed_allreduce(root: Path, lang: str):
    report = analyze_profile(collector.read(root), lang=lang)
    return next((f for f in report.all_findings() if f.rule == "exposed-allreduce"), None)


def test_exposed_allreduce_fires_from_the_trace_and_names_it(tmp_path: Path) -> None:
    """26% of each step is communication nothing overlaps, all of it the all-reduce after compute."""
    finding = _exposed_allreduce(_rank(tmp_path, _trace(gather=False)), "en")
    assert finding is not None
    assert finding.evidence["comm.source"] == hccl_rows.SOURCES[hccl_rows.LEVEL0_TRACE_VIEW]
    assert "trace_view.json" in finding.message and "Level0" in finding.message


def test_zh_message_words_the_source_in_chinese(tmp_path: Path) -> None:
    """``--lang zh``: the source is worded by the zh overlay from its key, no English words of it."""
    finding = _exposed_allreduce(_rank(tmp_path, _trace(gather=False)), "zh")
    assert finding is not None
    assert "通信数据来源：profiler Level0 的迭代轨迹 + trace_view.json 的 HCCL 算子泳道" in finding.message
    english = hccl_rows.SOURCES[hccl_rows.LEVEL0_TRACE_VIEW]
    assert english not in finding.message and "no communication analysis" not in finding.message


def test_zh_overlay_words_every_source_key() -> None:
    """Each key a collector sets has its Chinese wording in the zh overlay (else the key itself would show)."""
    overlay = (Path(__file__).resolve().parents[3] / "rules" / "zh" / "exposed_allreduce.yaml").read_text("utf-8")
    assert all(f"'{key}':" in overlay for key in hccl_rows.SOURCES)
