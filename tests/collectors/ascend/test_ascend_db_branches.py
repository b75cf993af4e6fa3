"""Database-layout reader branches a real profile takes.

Each case is a shape torch_npu / msprof really write (msprof "Profile Data
File Reference (DB)"; torch_npu ``profiler/analysis/prof_db_parse``):
a profiler database named without its rank (``ascend_pytorch_profiler.db``,
as torch_npu's own system tests glob it) whose RANK_DEVICE_MAP gives the
rank; ``parallel_group_info`` stored as a Python literal (msprof-analyze
parses it with ``ast.literal_eval`` as well as JSON); an ``analysis.db``
whose StepTraceTime holds only the all-zero row written when no step was
marked; tasks without an end time; a rank read without its kernels
(``kernel_sample``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from advisor.collectors.ascend import collector
from advisor.collectors.ascend import db as ascend_db
from advisor.collectors.parallel import arrow_frames
from bench.scenarios.ascend import OUT, sample_rank, write_db


def _db(root: Path) -> Path:
    return next((root / OUT).glob("ascend_pytorch_profiler*.db"))


def test_rank_from_rank_device_map_when_the_name_has_none(tmp_path: Path) -> None:
    spec = sample_rank(5)
    spec.folder = "worker_ascend_pt"
    root = write_db(tmp_path, spec, db_name="ascend_pytorch_profiler.db")
    (root / "profiler_info_5.json").unlink()
    assert ascend_db.rank_of(root / OUT) == 5
    assert collector.read(root).meta.ranks == [5]


def test_group_info_as_a_python_literal(tmp_path: Path) -> None:
    spec = sample_rank(1)
    spec.group_info = {"group_name_1": {"group_name": "dp", "global_ranks": [0, 1]}}
    root = write_db(tmp_path, spec)
    with sqlite3.connect(_db(root)) as con:  # the copy under tmp_path: rewritten as Python writes dicts
        con.execute("UPDATE META_DATA SET value = ? WHERE name = 'parallel_group_info'",
                    (repr({"group_name_1": {"group_name": "dp", "global_ranks": (0, 1)}}),))
    info = ascend_db.parallel_group_info(root / OUT)
    assert info == {"group_name_1": {"group_name": "dp", "global_ranks": (0, 1)}}


def test_group_info_that_is_not_a_dict_is_ignored(tmp_path: Path) -> None:
    spec = sample_rank(1)
    spec.group_info = {"x": 1}
    root = write_db(tmp_path, spec)
    with sqlite3.connect(_db(root)) as con:
        con.execute("UPDATE META_DATA SET value = 'not a literal {' WHERE name = 'parallel_group_info'")
    assert ascend_db.parallel_group_info(root / OUT) is None


def test_all_zero_step_trace_falls_back_to_step_windows(tmp_path: Path) -> None:
    spec = sample_rank(0)
    spec.breakdown = {1: (0.0,) * 8}
    profile = collector.read(write_db(tmp_path, spec))
    assert sorted(profile.steps["step"]) == [1, 2, 3, 4]
    assert any("STEP_TIME" in note for note in profile.meta.notes)


def test_tasks_without_an_end_are_left_out(tmp_path: Path) -> None:
    spec = sample_rank(0)
    root = write_db(tmp_path, spec, analysis=False)
    with sqlite3.connect(_db(root)) as con:
        con.execute("UPDATE COMMUNICATION_OP SET endNs = NULL WHERE opId = 1")
    comm = collector.read(root).comm
    assert comm["ops"].sum() == len(spec.comm_ops) - 1


def test_no_step_time_table_gives_no_steps_from_tasks(tmp_path: Path) -> None:
    root = write_db(tmp_path, sample_rank(0), analysis=False)
    with sqlite3.connect(_db(root)) as con:
        con.execute("DELETE FROM STEP_TIME")
    profile = collector.read(root)
    assert profile.steps is None and profile.ops is not None
    assert profile.comm["step"].isna().all()


def test_rank_without_kernels_keeps_its_communication(tmp_path: Path) -> None:
    root = write_db(tmp_path, sample_rank(2), comm_analysis=False)
    profile = arrow_frames.profile_to_pandas(collector.read_arrow(root, kernels=False))
    assert profile.ops is None
    assert set(profile.comm["kind"]) == {"allreduce"} and len(profile.steps) == 4


def test_dtype_names_from_the_enum_table(tmp_path: Path) -> None:
    """Real databases carry ENUM_HCCL_DATA_TYPE; its names win over the built-in enum."""
    spec = sample_rank(0)
    for name, *_ in spec.comm_ops:
        spec.comm_counts[name] = (3, 1_000_000)  # FP16 in the built-in enum
    root = write_db(tmp_path, spec, comm_analysis=False)
    with sqlite3.connect(_db(root)) as con:
        con.execute("CREATE TABLE ENUM_HCCL_DATA_TYPE (id INTEGER PRIMARY KEY, name TEXT)")
        con.execute("INSERT INTO ENUM_HCCL_DATA_TYPE VALUES (3, 'FP32')")
    assert set(collector.read(root).comm["size_mb"]) == {4.0}


def test_communication_op_of_older_cann_without_dtype_and_count(tmp_path: Path) -> None:
    root = write_db(tmp_path, sample_rank(0), comm_analysis=False)
    with sqlite3.connect(_db(root)) as con:
        con.execute("ALTER TABLE COMMUNICATION_OP DROP COLUMN count")
    comm = collector.read(root).comm
    assert "size_mb" not in comm.columns and set(comm["kind"]) == {"allreduce"}


def test_compute_task_without_an_end_is_left_out(tmp_path: Path) -> None:
    spec = sample_rank(0)
    root = write_db(tmp_path, spec)
    with sqlite3.connect(_db(root)) as con:
        con.execute("UPDATE TASK SET endNs = NULL WHERE globalTaskId = 1")
    ops = collector.read(root).ops.set_index("name")
    assert ops.loc["MatMul_1", "count"] == 3 and ops.loc["Add_2", "count"] == 4
