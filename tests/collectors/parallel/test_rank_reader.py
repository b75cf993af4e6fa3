"""Parallel per-rank reading: identical results for any jobs, skips, duplicates,
symlink loops and mixed formats."""

from __future__ import annotations

import json
import os
import shutil

import pandas as pd
import pytest

from advisor.collectors import load_profile
from advisor.errors import ConfigError, InputError
from advisor.pipeline import analyze
from advisor.profile import TABLES
from advisor.runtime import forking

from bench.scenarios.ascend import sample_rank, write_text
from .conftest import RANKS, SLOW_RANK


def assert_same_profile(a, b) -> None:
    assert a.meta == b.meta
    assert a.skipped == b.skipped
    for name in TABLES:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            pd.testing.assert_frame_equal(x, y)


def assert_same_report(a, b) -> None:
    assert [f.model_dump() for f in a.findings] == [f.model_dump() for f in b.findings]
    assert {k: m.model_dump() for k, m in a.metrics.items()} == {k: m.model_dump() for k, m in b.metrics.items()}
    assert a.skipped == b.skipped and a.tables == b.tables


def test_jobs_do_not_change_the_result(cluster_dir):
    one = load_profile(cluster_dir, jobs=1)
    two = load_profile(cluster_dir, jobs=2)
    assert one.meta.ranks == list(range(RANKS))
    assert list(one.steps["rank"].unique()) == list(range(RANKS))  # sorted by rank
    assert_same_profile(one, two)
    r1, r2 = analyze(cluster_dir, jobs=1), analyze(cluster_dir, jobs=2)
    assert_same_report(r1, r2)
    assert r1.metrics["cluster.slow_rank"].value == SLOW_RANK
    assert "slow-rank" in {f.rule for f in r1.findings}


def test_start_methods_other_than_fork_give_the_same_result(cluster_dir, monkeypatch):
    """Forking a process that runs another thread can deadlock the child,
    and macOS libraries may run threads of their own: there the pool starts
    its workers from a fork server or by spawning, with the same result."""
    import sys
    import threading

    from advisor.collectors.parallel import rank_reader

    expected = load_profile(cluster_dir, jobs=1)
    stop = threading.Event()
    waiter = threading.Thread(target=stop.wait)
    waiter.start()
    try:
        assert rank_reader._mp_context("advisor.collectors.ascend.collector").get_start_method() == "forkserver"
        assert_same_profile(load_profile(cluster_dir, jobs=2), expected)
    finally:
        stop.set()
        waiter.join()
    monkeypatch.setattr(sys, "platform", "darwin")
    assert not forking.can_fork()
    assert rank_reader._mp_context("advisor.collectors.ascend.collector").get_start_method() == "spawn"
    assert_same_profile(load_profile(cluster_dir, jobs=2), expected)


def test_cluster_tables_equal_the_per_rank_reads(cluster_dir):
    """The engine ships per-rank tables in Arrow, packed per worker chunk,
    and converts once; the result must be what reading each rank with the
    public ``read`` and concatenating gives, in the data model's dtypes."""
    from advisor.collectors.ascend import collector as ascend

    merged = load_profile(cluster_dir, jobs=2)
    ranks = [ascend.read(u) for u in ascend.discover(cluster_dir)]
    for name in ("steps", "ops", "comm", "bandwidth", "links"):
        expected = pd.concat([getattr(p, name) for p in ranks], ignore_index=True)
        pd.testing.assert_frame_equal(getattr(merged, name), expected)
    assert merged.steps["rank"].dtype == "int64" and merged.steps["step"].dtype == "Int64"
    assert merged.ops["count"].dtype == "int64" and merged.ops["name"].dtype == "string"
    assert merged.links["src"].dtype == "int64" and merged.comm["elapse_us"].dtype == "float64"
    assert merged.steps["device_busy_us"].notna().all()


def _copy(cluster_dir, tmp_path, ranks):
    for rank in ranks:
        src = next(cluster_dir.glob(f"node{rank}_*"))
        shutil.copytree(src, tmp_path / src.name)


def test_a_chunk_comes_back_as_row_ranges_merged_in_one_slice(cluster_dir):
    """A worker's chunk comes back as one packed table per table name; the
    main process keeps each rank's part as row ranges (no Arrow objects per
    rank), and the merge takes neighbouring ranks as one slice -- the same
    rows as slicing every rank."""
    import pickle

    import pyarrow as pa

    from advisor.collectors.ascend import collector as ascend
    from advisor.collectors.parallel import arrow_frames, rank_reader

    units = [str(u) for u in ascend.discover(cluster_dir)]
    packed = pickle.loads(pickle.dumps(rank_reader.read_many("advisor.collectors.ascend.collector", units)))
    profiles = [p for _, p in arrow_frames.unpack(packed)]
    for name in ("steps", "ops", "comm"):
        parts = [getattr(p, name) for p in profiles]
        assert all(isinstance(t, arrow_frames.Rows) for t in parts), name
        joined = arrow_frames._resolved(parts)
        assert len(joined) == 1 and joined[0].num_rows == sum(len(t) for t in parts)
        assert joined[0].equals(pa.concat_tables([t.resolve() for t in parts]))
    expected = [ascend.read(u) for u in units]
    for got, want in zip(profiles, expected):
        pd.testing.assert_frame_equal(arrow_frames.to_pandas("steps", got.steps), want.steps)


@pytest.mark.parametrize("bound", ["GROUP_KERNEL_ROWS", "BUILD_PENDING_ROWS"])
def test_a_batch_letting_go_of_its_rows_early_changes_nothing(cluster_dir, monkeypatch, bound):
    """A reader batch groups its kernels and builds its small tables every
    so many rows (real ranks hold 10^5 kernels and 10^4-10^5 communication
    rows); doing so after every rank gives the same tables as doing it once
    for the whole batch."""
    from advisor.collectors.ascend import collector as ascend

    whole = load_profile(cluster_dir, jobs=1)
    monkeypatch.setattr(ascend, bound, 1)
    assert_same_profile(load_profile(cluster_dir, jobs=1), whole)


def test_broken_unit_is_skipped_and_the_rest_analyzed(cluster_dir, tmp_path):
    _copy(cluster_dir, tmp_path, range(4))
    broken = next(tmp_path.glob("node2_*")) / "ASCEND_PROFILER_OUTPUT"
    for f in broken.iterdir():
        f.write_text("garbage\n")
    p = load_profile(tmp_path, jobs=2)
    assert p.meta.ranks == [0, 1, 3]
    assert any(str(broken) in s.what for s in p.skipped)
    for folder in tmp_path.iterdir():
        for f in (folder / "ASCEND_PROFILER_OUTPUT").iterdir():
            f.write_text("")
    with pytest.raises(InputError) as err:
        load_profile(tmp_path, jobs=2)
    assert "node0_" in str(err.value)  # the first unit's error, one line


def test_duplicate_rank_keeps_the_first(cluster_dir, tmp_path):
    _copy(cluster_dir, tmp_path, [0, 1])
    write_text(tmp_path / "again", sample_rank(1))  # another folder claiming rank 1
    dup = next((tmp_path / "again").iterdir())
    shutil.move(str(dup), tmp_path / ("z" + dup.name))
    p = load_profile(tmp_path, jobs=2)
    assert p.meta.ranks == [0, 1] and len(p.steps) == 8
    skip = next(s for s in p.skipped if "claims rank 1" in s.reason)
    assert skip.what.endswith("z" + dup.name) and "node1_1_20250101_ascend_pt" in skip.reason


def test_symlinks_and_loops_do_not_hang_or_double_count(cluster_dir, tmp_path):
    _copy(cluster_dir, tmp_path, [0, 1])
    os.symlink(tmp_path, tmp_path / "loop")  # a loop back to the root
    os.symlink("self", tmp_path / "self")  # a link to itself
    os.symlink(next(tmp_path.glob("node1_*")), tmp_path / "alias_ascend_pt")
    p = load_profile(tmp_path, jobs=1)
    assert p.meta.ranks == [0, 1] and len(p.steps) == 8
    assert any("same files as" in s.reason for s in p.skipped)


def test_other_formats_are_named_not_read(cluster_dir, tmp_path):
    _copy(cluster_dir, tmp_path, [0, 1])
    gpu = tmp_path / "gpu"
    gpu.mkdir()
    for k in range(3):
        (gpu / f"worker{k}.pt.trace.json").write_text(json.dumps({"schemaVersion": 1, "traceEvents": []}))
    p = load_profile(tmp_path, jobs=1)
    assert p.meta.source_format == "ascend_pt"
    assert any(s.reason == "also found 3 Kineto trace(s); not read: one format per run" for s in p.skipped)


def test_bad_jobs_and_bad_dask_address_are_one_line_errors(cluster_dir, tmp_path, capsys):
    from advisor.cli import main

    with pytest.raises(ConfigError):
        load_profile(cluster_dir, jobs=0)
    pytest.importorskip("distributed", reason="the 'dask' extra (distributed) is not installed")
    for address in ("tcp://127.0.0.1:9", "not an address::"):
        with pytest.raises(SystemExit) as code:
            main(["report", str(cluster_dir), "-o", str(tmp_path / "out"), "--dask", address])
        assert code.value.code == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"advisor: error: --dask {address}: "), lines


def test_a_bad_rule_fails_before_any_rank_is_read(cluster_dir, tmp_path, monkeypatch):
    """The rules are compiled before the read: a broken rule file is a
    ConfigError with no reader process started or left behind."""
    import multiprocessing

    from advisor.collectors.parallel import rank_reader

    bad = tmp_path / "bad.yaml"
    bad.write_text("id: ADV999\nname: broken-rule\ncondition: 'step.free_ratio >'\n")
    reads = []
    read_units = rank_reader.read_units
    monkeypatch.setattr(rank_reader, "read_units", lambda *a, **k: reads.append(a) or read_units(*a, **k))
    with pytest.raises(ConfigError, match="bad.yaml"):
        analyze(cluster_dir, rule_paths=[bad], jobs=2)
    assert reads == [] and multiprocessing.active_children() == []
    analyze(cluster_dir, jobs=2)  # the same read without the bad rule goes through the engine
    assert len(reads) == 1 and multiprocessing.active_children() == []


def test_the_callers_work_runs_while_the_readers_read_and_its_error_ends_the_read(cluster_dir):
    """``meanwhile`` runs once in this process while the reader processes
    are at work (the pipeline imports its later stages then); what it
    raises ends the read with no reader left behind."""
    import multiprocessing

    seen = []
    profile = load_profile(cluster_dir, jobs=2, meanwhile=lambda: seen.append(len(multiprocessing.active_children())))
    assert seen == [2] and profile.meta.ranks == list(range(RANKS))

    def broken():
        raise ConfigError("rules: broken meanwhile")

    with pytest.raises(ConfigError, match="broken meanwhile"):
        load_profile(cluster_dir, jobs=2, meanwhile=broken)
    assert multiprocessing.active_children() == []
    seen.clear()
    load_profile(cluster_dir, jobs=1, meanwhile=lambda: seen.append(len(multiprocessing.active_children())))
    assert seen == [0]  # read in this process: run before it


def test_ctrl_c_during_the_callers_work_waits_for_it(cluster_dir):
    """A Ctrl-C while ``meanwhile`` runs (imports, in the pipeline) is held
    until it returns -- an import cut half-way leaves a broken module --
    and then stops the read as any Ctrl-C does."""
    import multiprocessing
    import signal
    import time

    done = []

    def meanwhile():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the signal has arrived by now
        done.append(True)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            load_profile(cluster_dir, jobs=2, meanwhile=meanwhile)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert done == [True] and multiprocessing.active_children() == []


def test_an_unknown_override_fails_with_the_rule_named(cluster_dir):
    with pytest.raises(ConfigError, match="unknown rule.*nosuch"):
        analyze(cluster_dir, overrides={"nosuch": {"x": 1.0}}, jobs=2)
