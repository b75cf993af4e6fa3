"""Where ``history add`` and ``report`` write, and two processes creating
one history at once.

Nothing is written into an input folder: ``history add P --db P/h.db``
and ``report dir/x.pt.trace.json -o dir`` are refused as ``-o P`` is. The
history schema is created in one transaction, so of two processes that
create the same file at the same moment neither fails.
"""

from __future__ import annotations

import multiprocessing
import shutil
import sqlite3
from pathlib import Path

import pytest
from gate_helpers import advisor, one_line_error

from advisor.regression.compare import load_report
from advisor.regression.history import History
from bench.scenarios import Spec, generate

REPO = Path(__file__).resolve().parents[2]
BOUND = REPO / "examples" / "resnet50_data_bound" / "profiler"
#: Synchronised pairs of creators; before the schema was one transaction,
#: many pairs had a loser ("table runs already exists").
PAIRS = 20


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("where", ["h.db", "sub/h.db"])
def test_history_add_refuses_a_database_inside_the_profile(tmp_path, where):
    profile = shutil.copytree(BOUND, tmp_path / "P")
    before = _snapshot(profile)
    code, _, stderr = advisor("history", "add", profile, "--db", profile / where, "--branch", "main")
    one_line_error(code, stderr, str(profile), "inside the input", "--db")
    assert _snapshot(profile) == before


def test_history_add_refuses_the_folder_of_an_input_report(tmp_path):
    folder = tmp_path / "dir"
    folder.mkdir()
    report = folder / "report.json"
    report.write_text(load_report(BOUND).model_dump_json())
    before = _snapshot(folder)
    code, _, stderr = advisor("history", "add", report, "--db", folder / "h.db")
    one_line_error(code, stderr, "folder of the input", "--db")
    assert _snapshot(folder) == before
    code, _, stderr = advisor("history", "add", report, "--db", tmp_path / "elsewhere" / "h.db")
    assert code == 0, stderr


def test_report_refuses_the_folder_of_an_input_trace(tmp_path):
    data, _ = generate(Spec(ranks=1, steps=4, fault="healthy", seed=2), tmp_path / "run", "kineto")
    trace = next(data.glob("*.pt.trace.json"))
    before = _snapshot(data)
    code, _, stderr = advisor("report", trace, "-o", data)
    one_line_error(code, stderr, str(trace), "folder of the input", "-o")
    assert _snapshot(data) == before
    code, _, stderr = advisor("report", trace, "-o", tmp_path / "out")
    assert code == 0, stderr


def _create_and_add(path: str, report_json: str, barrier, results) -> None:
    """One creator: wait for the other, then open (creating) and add a run."""
    from advisor.errors import AdvisorError
    from advisor.model import Report

    report = Report.model_validate_json(report_json)
    barrier.wait()
    try:
        with History(path, create=True) as hist:
            hist.add(report, branch="main")
        results.put("ok")
    except (AdvisorError, sqlite3.Error) as exc:
        results.put(f"{type(exc).__name__}: {exc}")


def test_two_processes_creating_one_history_both_succeed(tmp_path):
    report_json = load_report(BOUND).model_dump_json()
    ctx = multiprocessing.get_context("fork")
    failures = []
    for i in range(PAIRS):
        path = str(tmp_path / f"h{i}.db")
        barrier, results = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_create_and_add, args=(path, report_json, barrier, results)) for _ in range(2)]
        for p in procs:
            p.start()
        outcomes = [results.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        failures += [o for o in outcomes if o != "ok"]
        with History(path) as hist:
            assert len(hist.runs("main")) == outcomes.count("ok")
    assert failures == []
    # the file is an ordinary history afterwards
    code, _, stderr = advisor("history", "show", "--db", tmp_path / "h0.db", "--chart", tmp_path / "c.svg")
    assert code == 0, stderr
    assert "2 run(s)" in (tmp_path / "c.svg").read_text()
