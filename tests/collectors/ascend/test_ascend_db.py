"""The Ascend database layout reads into the same tables as the text layout."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from advisor.collectors import load_profile
from advisor.errors import InputError
from advisor.metrics import evaluate

from bench.scenarios.ascend import sample_rank, write_db, write_text

TABLES = ("steps", "ops", "comm", "bandwidth", "links")


def _snapshot(folder):
    return {str(p): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


def _same(a: pd.DataFrame, b: pd.DataFrame, keys: list[str]) -> None:
    assert sorted(a.columns) == sorted(b.columns)
    a = a[sorted(a.columns)].sort_values(keys).reset_index(drop=True)
    b = b[sorted(b.columns)].sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False, rtol=1e-6)


def test_db_layout_gives_the_text_tables_and_metrics(tmp_path):
    specs = [sample_rank(0), sample_rank(1, slow=1.3)]
    for spec in specs:
        write_text(tmp_path / "text", spec)
        write_db(tmp_path / "db", spec)
    before = _snapshot(tmp_path / "db")
    text = load_profile(tmp_path / "text", jobs=1)
    db = load_profile(tmp_path / "db", jobs=1)
    assert _snapshot(tmp_path / "db") == before  # read-only: no journal, no lock file
    assert db.meta.ranks == [0, 1] and db.meta.framework == "torch_npu" and not db.skipped
    keys = {"steps": ["rank", "step"], "ops": ["rank", "name"], "comm": ["rank", "name"],
            "bandwidth": ["rank", "step", "kind", "transport"],
            "links": ["rank", "step", "src", "dst", "transport", "size_class"]}
    for name in TABLES:
        _same(getattr(text, name), getattr(db, name), keys[name])
    # the -top1/-middle/-bottom1 entries beside each -total repeat its transfer: read once
    assert set(db.links["ops"]) == {1} and set(text.links["ops"]) == {1}
    assert db.links["size_mb"].tolist() == [32.0] * len(db.links)
    # bandwidth: one row per rank, step, kind and transport (a record per packet
    # size is read once, not summed); RDMA unused
    assert set(db.bandwidth["transport"]) == {"HCCS"} and len(db.bandwidth) == 8
    mt, _ = evaluate(text)
    md, _ = evaluate(db)
    assert set(mt) == set(md)
    for mid in mt:
        if isinstance(mt[mid].value, float):
            assert md[mid].value == pytest.approx(mt[mid].value, rel=1e-6), mid
        else:
            assert md[mid].value == mt[mid].value, mid


def test_steps_from_step_time_and_tasks_without_analysis_db(tmp_path):
    spec = sample_rank(0, slow=1.0)
    spec.comm_ops.append(("hcom_receive__9_0_1", "hcom_receive_", "pp", 9_000_000, 9_400_000))
    write_db(tmp_path, spec, analysis=False)
    p = load_profile(tmp_path, jobs=1)
    steps = p.steps.set_index("step")
    # step 2: MatMul 4 ms + Add 0.5 ms; all-reduce 2 ms of which 0.2 ms under Add
    assert steps.loc[2, "computing_us"] == pytest.approx(4500.0)
    assert steps.loc[2, "communication_us"] == pytest.approx(2000.0)
    assert steps.loc[2, "exposed_comm_us"] == pytest.approx(1800.0)
    assert steps.loc[2, "overlapped_us"] == pytest.approx(200.0)
    assert steps.loc[2, "duration_us"] == pytest.approx(10_000.0)  # the STEP_TIME window
    assert steps.loc[1, "bubble_us"] == pytest.approx(400.0)  # the receive in step 1
    assert steps.loc[1, "receive_us"] == pytest.approx(400.0)
    assert steps.loc[2, "stage_us"] == pytest.approx(6400.0)  # first task to last task
    assert p.comm is not None and set(p.comm["kind"]) == {"allreduce", "receive"}
    assert any("STEP_TIME" in n for n in p.meta.notes)


def test_mindspore_db_rank_from_file_name(tmp_path):
    spec = sample_rank(3)
    root = write_db(tmp_path, spec, suffix="ascend_ms")
    (root / "profiler_info_3.json").unlink()  # the rank must come from the database name
    p = load_profile(root, jobs=1)
    assert p.meta.ranks == [3] and p.meta.framework == "mindspore"
    assert set(p.steps["rank"]) == {3}


def test_broken_database_is_a_skip_naming_the_file(tmp_path):
    spec = sample_rank(0)
    root = write_db(tmp_path, spec)
    bad = root / "ASCEND_PROFILER_OUTPUT" / "analysis.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    p = load_profile(root, jobs=1)
    assert p.ops is not None and p.steps is not None  # steps from STEP_TIME instead
    assert [s.what for s in p.skipped] == [str(bad)]
    assert "SQLite" in p.skipped[0].reason
    dbfile = root / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    dbfile.write_bytes(b"")
    bad.unlink()
    with pytest.raises(InputError) as err:
        load_profile(root, jobs=1)
    assert "ascend_pytorch_profiler_0.db" in str(err.value) and "\n" not in str(err.value)


def _damage(db: Path, *sql: str) -> None:
    con = sqlite3.connect(db)
    for statement in sql:
        con.execute(statement)
    con.commit()
    con.close()


def test_cells_that_are_not_numbers_and_missing_columns_leave_out_only_what_they_break(tmp_path):
    root = write_db(tmp_path / "clean", sample_rank(0))
    clean = load_profile(root, jobs=1)
    out = root / "ASCEND_PROFILER_OUTPUT"
    _damage(out / "ascend_pytorch_profiler_0.db",
            "UPDATE STEP_TIME SET startNs = 'abc' WHERE rowid = 1",  # no step window is trusted
            "UPDATE TASK SET endNs = 'n/a' WHERE rowid % 5 = 0")  # those tasks are left out
    _damage(out / "analysis.db",
            "ALTER TABLE CommAnalyzerMatrix RENAME COLUMN src_rank TO x",  # links without a source
            "ALTER TABLE CommAnalyzerBandwidth RENAME COLUMN transport_type TO y")
    damaged = load_profile(root, jobs=1)
    assert not damaged.skipped
    assert damaged.links is None and clean.links is not None
    assert damaged.comm is not None and len(damaged.comm) == len(clean.comm)
    assert damaged.bandwidth["transport"].isna().all() and len(damaged.bandwidth) == len(clean.bandwidth)
    assert 0 < damaged.ops["count"].sum() < clean.ops["count"].sum()
    assert "steps" not in damaged.ops.columns and clean.ops["steps"].notna().all()  # operators' steps unknown


def test_database_opened_read_only(tmp_path):
    root = write_db(tmp_path, sample_rank(0))
    out = root / "ASCEND_PROFILER_OUTPUT"
    con = sqlite3.connect(out / "analysis.db")  # leave a WAL-mode database behind
    con.execute("PRAGMA journal_mode=WAL")
    con.close()
    before = _snapshot(tmp_path)
    load_profile(root, jobs=1)
    assert _snapshot(tmp_path) == before


def test_matrix_samples_dropped_only_beside_their_own_groups_total():
    """A -top1 sample is a repeat only where its own group has a -total."""
    from advisor.collectors.ascend.db import _matrix_columns
    from advisor.collectors.parallel.batch_tables import build_one

    rows = {"hccl_op_name": ["allreduce-top1", "allreduce-total", "allreduce-top1"],
            "group_name": ["A", "B", "B"], "step": [1, 1, 1], "src_rank": [0, 0, 0],
            "dst_rank": [1, 1, 1], "transport_type": ["HCCS"] * 3, "transit_size": [8.0] * 3,
            "transit_time": [1.0] * 3, "bandwidth": [8.0] * 3}
    links = build_one(_matrix_columns(rows, 0))
    assert list(zip(links.column("name").to_pylist(), links.column("group").to_pylist())) == [
        ("allreduce-top1", "A"), ("allreduce-total", "B")]


def test_tasks_through_adbc_equal_the_sqlite3_rows(tmp_path, monkeypatch):
    """Compute tasks come as Arrow columns through the ADBC driver; without
    the driver the same join is fetched row by row through sqlite3. Both
    must give identical tables, and neither may touch the database (here in
    WAL mode, which a writable open would check-point or lock)."""
    pytest.importorskip("adbc_driver_sqlite", reason="adbc-driver-sqlite is a dependency; not installed here")
    import sys

    from advisor.profile import TABLES as ALL
    from bench.scenarios import Spec, generate

    data, _ = generate(Spec(ranks=4, steps=6, fault="slow-rank", seed=4, kernels_per_step=30), tmp_path, "ascend-db")
    for db in data.rglob("ascend_pytorch_profiler_*.db"):
        con = sqlite3.connect(db)
        con.execute("PRAGMA journal_mode=WAL")
        con.close()
    before = _snapshot(tmp_path)
    from advisor.collectors.ascend.db import _compute_arrow

    assert _compute_arrow(next(data.rglob("ascend_pytorch_profiler_*.db"))) is not None  # the fast path is taken
    fast = load_profile(data, jobs=1)
    monkeypatch.setitem(sys.modules, "adbc_driver_sqlite.dbapi", None)  # as if the driver were not installed
    rows = load_profile(data, jobs=1)
    assert _snapshot(tmp_path) == before
    assert fast.ops is not None and len(fast.ops) > 4
    assert fast.meta == rows.meta and fast.skipped == rows.skipped
    for name in ALL:
        a, b = getattr(fast, name), getattr(rows, name)
        assert (a is None) == (b is None), name
        if a is not None:
            pd.testing.assert_frame_equal(a, b)
