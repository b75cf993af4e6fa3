"""No crash looks like a regression.

Exit code 1 means "regression" to the gate's users. Each input below used
to end with a traceback and exit 1; now it is handled where it arises (a
note, a skipped rank, a one-line error naming the file, exit 2), and
whatever no check foresaw is exit 2 with one line from the top-level guard.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml

from advisor.regression.compare import load_report
from bench.scenarios import Spec, generate
from tests.regression.gate_helpers import advisor, one_line_error

REPO = Path(__file__).resolve().parents[2]
BOUND = REPO / "examples" / "resnet50_data_bound" / "profiler"
#: Nesting deeper than the interpreter's recursion limit (1000) and the
#: JSON decoders' own limits.
DEEP = 5_000


def _nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


@pytest.fixture(scope="module")
def kineto(tmp_path_factory) -> Path:
    """A generated two-rank PyTorch profiler run (Kineto traces)."""
    data, _ = generate(Spec(ranks=2, steps=6, fault="healthy", seed=1), tmp_path_factory.mktemp("k") / "run", "kineto")
    return data


@pytest.fixture(scope="module")
def ascend(tmp_path_factory) -> Path:
    """A generated two-rank Ascend cluster (text layout)."""
    data, _ = generate(Spec(ranks=2, steps=6, fault="healthy", seed=1),
                       tmp_path_factory.mktemp("a") / "run", "ascend-text")
    return data


# ---------------------------------------------------------------- user rules


def _user_rule(tmp_path: Path, message: str) -> Path:
    """A user rule that fires on every profile with a step time."""
    rule = {
        "id": "ADV901", "name": "always-on", "title": "Always on", "group": "host",
        "requires": ["step.time_ms"], "condition": "step.time_ms > 0.0",
        "message": message, "explanation": {"what": "w", "why": "y", "how": "h"},
        "fix": {"default": {"text": "none"}},
        "examples": [{"name": "busy", "metrics": {"step.time_ms": 10.0}, "expect": "fire"},
                     {"name": "idle", "metrics": {"step.time_ms": 0.0}, "expect": "pass"}],
    }
    path = tmp_path / "always_on.yaml"
    path.write_text(yaml.safe_dump(rule))
    return path


@pytest.mark.parametrize("message", ["{{ nosuch.x }}", "{{ 1/0 }}"])
def test_a_user_rule_whose_message_fails_on_the_profile_still_reports(tmp_path, message):
    code, _, stderr = advisor("report", BOUND, "--rules", _user_rule(tmp_path, message), "-o", tmp_path / "r")
    assert code == 0, stderr
    findings = json.loads((tmp_path / "r" / "report.json").read_text())["findings"]
    mine = next(f for f in findings if f["rule"] == "always-on")
    assert "message could not be rendered" in mine["message"]
    fired = {g["rule"] for f in findings for g in (f, *f.get("contributing", []))}
    assert fired >= {"input-bound", "slow-dataset-op"}   # the built-in rules still ran


@pytest.mark.parametrize("message", ["{{ step.__class__ }}", "{{ step['__class__'] }}",
                                     "{{ step|attr('__class__') }}"])
def test_a_user_rule_reaching_for_a_private_attribute_is_refused(tmp_path, message):
    path = _user_rule(tmp_path, message)
    code, _, stderr = advisor("rules", "validate", path)
    assert code == 2, stderr
    assert "Traceback" not in stderr and "__class__" in stderr and "unsafe" in stderr
    code, _, stderr = advisor("report", BOUND, "--rules", path, "-o", tmp_path / "r")
    one_line_error(code, stderr, "always-on", "unsafe")
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------- Kineto traces


def test_a_step_id_beyond_int64_is_not_a_step(kineto, tmp_path):
    cur = shutil.copytree(kineto, tmp_path / "cur")
    for path in cur.glob("*.pt.trace.json"):
        text = path.read_text()
        assert '"ProfilerStep#3"' in text
        path.write_text(text.replace('"ProfilerStep#3"', '"ProfilerStep#9223372036854775808"'))
    code, _, stderr = advisor("report", cur, "-o", tmp_path / "r")
    assert code == 0, stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["run"]["ranks"] == [0, 1]
    steps = {row["step"] for row in report["tables"]["step_breakdown"]}
    assert 3 not in steps and 9223372036854775808 not in steps and {4, 5} <= steps


def test_args_nested_past_the_recursion_limit_skip_that_rank(kineto, tmp_path):
    cur = shutil.copytree(kineto, tmp_path / "cur")
    bad = sorted(cur.glob("*.pt.trace.json"))[0]
    deep = '{"ph": "X", "cat": "cpu_op", "name": "deep", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": '
    text = bad.read_text()
    assert text.count('"traceEvents": [') == 1
    bad.write_text(text.replace('"traceEvents": [', '"traceEvents": [' + deep + _nested(100_000) + "}, "))
    code, _, stderr = advisor("report", cur, "-o", tmp_path / "r")
    assert code == 0, stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["run"]["ranks"] == [1]
    assert any(s["what"].endswith(bad.name) and "nested too deeply" in s["reason"] for s in report["skipped"])


def test_a_trace_that_is_only_deep_nesting_is_one_line(tmp_path):
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "w.pt.trace.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1, "args": '
                    + _nested(100_000) + "}]}")
    code, _, stderr = advisor("report", tmp_path / "in", "-o", tmp_path / "r")
    one_line_error(code, stderr, "w.pt.trace.json", "nested too deeply")


# ---------------------------------------------------------------- Ascend clusters


def test_one_ranks_deeply_nested_communication_file_skips_that_file_not_the_cluster(ascend, tmp_path):
    cur = shutil.copytree(ascend, tmp_path / "cur")
    bad = sorted(cur.glob("*/ASCEND_PROFILER_OUTPUT/communication.json"))[1]
    bad.write_text('{"step1": ' + _nested(DEEP) + "}")
    code, _, stderr = advisor("report", cur, "-o", tmp_path / "r")
    assert code == 0, stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["run"]["ranks"] == [0, 1]
    assert any(s["what"].endswith(str(bad.relative_to(cur))) and "nested too deeply" in s["reason"]
               for s in report["skipped"])
    assert len(report["tables"]["comm"]) > 0   # the other rank's collectives are there


# ---------------------------------------------------------------- history files


@pytest.fixture(scope="module")
def bound_report(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rep") / "report.json"
    path.write_text(load_report(BOUND).model_dump_json(), encoding="utf-8")
    return path


def _history(bound_report: Path, path: Path, runs: int = 3) -> Path:
    for i in range(runs):
        code, _, stderr = advisor("history", "add", bound_report, "--db", path, "--branch", "main",
                                  "--commit", f"c{i}")
        assert code == 0, stderr
    return path


def test_damaged_pages_are_one_line(bound_report, tmp_path):
    db = _history(bound_report, tmp_path / "h.db")
    page = sqlite3.connect(db).execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(db.read_bytes())
    assert len(data) > 3 * page
    data[page: 3 * page] = b"\xa5" * (2 * page)    # the first table pages after the header
    db.write_bytes(bytes(data))
    code, _, stderr = advisor("history", "show", "--db", db, "--chart", tmp_path / "c.svg")
    one_line_error(code, stderr, str(db))
    code, _, stderr = advisor("gate", bound_report, "--history", db, "-o", tmp_path / "g")
    one_line_error(code, stderr, str(db))
    before = db.read_bytes()
    code, _, stderr = advisor("history", "add", bound_report, "--db", db, "--branch", "main")
    one_line_error(code, stderr, str(db))
    assert db.read_bytes() == before   # nothing written into a damaged file


def test_a_stored_report_that_does_not_decompress_is_one_line(bound_report, tmp_path):
    db = _history(bound_report, tmp_path / "h.db")
    with sqlite3.connect(db) as con:
        con.execute("UPDATE runs SET report = ? WHERE id = 2", (b"\x78\x9c not zlib",))
    code, _, stderr = advisor("gate", bound_report, "--history", db, "-o", tmp_path / "g")
    one_line_error(code, stderr, str(db), "run 2", "damaged")


def test_a_runs_table_of_another_shape_is_one_line(bound_report, tmp_path):
    db = tmp_path / "h.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT, value REAL)")
        con.execute("INSERT INTO runs (name, value) VALUES ('x', 1.0)")
        con.execute("PRAGMA user_version = 1")
    for args in (("history", "show", "--db", db, "--chart", tmp_path / "c.svg"),
                 ("history", "add", bound_report, "--db", db),
                 ("gate", bound_report, "--history", db, "-o", tmp_path / "g")):
        code, _, stderr = advisor(*args)
        one_line_error(code, stderr, str(db), "not an advisor history file")


def _make_read_only(path: Path) -> None:
    """Read-only for this user; as root (which ignores modes) the file is
    made immutable, or the test is skipped where that is not allowed."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("running as root, and the file cannot be made immutable here")


def _make_writable(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run([shutil.which("chattr") or "chattr", "-i", str(path)], capture_output=True)
    path.chmod(0o644)


def test_adding_to_a_read_only_history_is_one_line(bound_report, tmp_path):
    db = _history(bound_report, tmp_path / "h.db", runs=1)
    _make_read_only(db)
    try:
        before = db.read_bytes()
        code, _, stderr = advisor("history", "add", bound_report, "--db", db, "--branch", "main")
        one_line_error(code, stderr, str(db), "cannot write the history")
        assert db.read_bytes() == before
        # reading it still works
        code, _, stderr = advisor("history", "show", "--db", db, "--chart", tmp_path / "c.svg")
        assert code == 0, stderr
    finally:
        _make_writable(db)


# ---------------------------------------------------------------- the top-level guard


def test_an_unexpected_exception_is_exit_2_with_one_line(tmp_path, monkeypatch):
    """A fault no check foresaw (injected into the analysis) is one line
    naming the input and the reason; ``--debug`` adds the traceback."""
    from advisor import pipeline

    def broken(*args, **kwargs):
        raise ValueError("cannot reshape array of size 7 into shape (2,4)\nsecond line")

    monkeypatch.setattr(pipeline, "analyze", broken)
    code, _, stderr = advisor("report", BOUND, "-o", tmp_path / "r")
    one_line_error(code, stderr, str(BOUND), "`advisor report` failed unexpectedly",
                    "ValueError: cannot reshape array of size 7 into shape (2,4) second line", "--debug")
    code, _, stderr = advisor("--debug", "report", BOUND, "-o", tmp_path / "r")
    assert code == 2
    assert "Traceback (most recent call last)" in stderr and re.search(r"advisor: error: .*ValueError", stderr)
