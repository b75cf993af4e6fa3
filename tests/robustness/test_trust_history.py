"""A run history is input: a CI cache or artifact that whoever can write the
cache can change. Its stored reports are decompressed under the bounds on
decompressed input, and its text (commits, times, units) reaches the
terminal and the SVG chart as inert text.

The history is made by the real command line (``advisor history add``) from
real MindSpore profiles (``examples/resnet50_data_*``), then changed
with SQLite as a tampered cache would be (schema: ``advisor.regression.history``).
"""

from __future__ import annotations

import os
import sqlite3
import unicodedata
import zlib
from pathlib import Path
from xml.dom import minidom

from advisor.collectors.io.limits import RATIO_FLOOR

from advisor.regression.compare import load_report
from tests._pty import advisor_on_pty
from tests.regression.gate_helpers import advisor, one_line_error
from tests.robustness import test_crashes_are_exit_2 as crashes

REPO = Path(__file__).resolve().parents[2]
#: The data-bound run's report.json, and a history of it made by `advisor history add`.
bound_report, _history = crashes.bound_report, crashes._history
FIXED = REPO / "examples" / "resnet50_data_fixed"
#: Rich console markup (a hyperlink, blinking) and terminal escapes (OSC 8
#: link, OSC 52 clipboard write, screen clear) in the history's text.
MARKUP_UNIT = "[link=https://evil.example/x]ms"
MARKUP_COMMIT = "[blink]ab"
ESCAPES = "\x1b]8;;https://evil.example\x1b\\x\x1b]52;c;cHduZWQ=\x07\x1b[2J"


def _controls(text: str, allowed: str = "\n") -> list[str]:
    return sorted({repr(c) for c in text if unicodedata.category(c) == "Cc" and c not in allowed})


def test_a_stored_report_that_inflates_past_the_bound_is_refused(bound_report, tmp_path):
    """64 MB of padding in 64 KB of zlib: refused once the expansion bound
    is crossed, naming the file and the run, before the rest is inflated."""
    db = _history(bound_report, tmp_path / "h.db")
    text = bound_report.read_bytes()
    packer = zlib.compressobj(9)
    blob = packer.compress(text[:-1]) + packer.compress(b" " * (16 * RATIO_FLOOR)) + packer.compress(text[-1:])
    blob += packer.flush()
    assert len(blob) * 100 < 16 * RATIO_FLOOR        # beyond the default bound of 100x
    with sqlite3.connect(db) as con:
        con.execute("UPDATE runs SET report = ? WHERE id = 2", (blob,))
    code, _, stderr = advisor("gate", bound_report, "--history", db, "-o", tmp_path / "g")
    one_line_error(code, stderr, str(db), "run 2", "expands")
    assert not (tmp_path / "g").exists()


def test_a_stored_report_within_the_bound_is_read(bound_report, tmp_path):
    """The data-bound run against a history of the fixed one: a regression."""
    (tmp_path / "in").mkdir()
    fixed = tmp_path / "in" / "fixed.json"
    fixed.write_text(load_report(FIXED).model_dump_json(), encoding="utf-8")
    db = _history(fixed, tmp_path / "h.db")
    code, stdout, stderr = advisor("gate", bound_report, "--history", db, "-o", tmp_path / "g", "--no-color")
    assert code == 1, stderr
    assert "advisor gate: regression" in stdout


def _tampered(bound_report: Path, tmp_path: Path) -> Path:
    db = _history(bound_report, tmp_path / "h.db")
    with sqlite3.connect(db) as con:
        con.execute("UPDATE runs SET commit_sha = ?, recorded_at = ? WHERE id = 1",
                    (MARKUP_COMMIT, "[link=http://e/]" + ESCAPES))
        con.execute("UPDATE runs SET commit_sha = ? WHERE id = 2", (ESCAPES,))
        con.execute("UPDATE metrics SET unit = ? WHERE metric = 'step.time_ms'", (MARKUP_UNIT + ESCAPES,))
    return db


def test_a_metric_value_that_is_not_a_number_is_a_damaged_history(bound_report, tmp_path):
    """The value column is REAL, but SQLite keeps text written into it."""
    db = _history(bound_report, tmp_path / "h.db")
    with sqlite3.connect(db) as con:
        con.execute("UPDATE metrics SET value = '{' WHERE metric = 'step.time_ms' AND run_id = 2")
    code, _, stderr = advisor("history", "show", "--db", db, "--no-color")
    one_line_error(code, stderr, str(db), "run 2", "step.time_ms", "not a number")


def test_history_show_prints_the_files_text_as_text(bound_report, tmp_path):
    """On a terminal: rich's own colours only -- no hyperlink, no blinking,
    no escape of the file -- and the markup shown as written."""
    db = _tampered(bound_report, tmp_path)
    code, out, err = advisor_on_pty(["history", "show", "--db", str(db)], tmp_path,
                                    {**os.environ, "COLUMNS": "200", "TERM": "xterm-256color"})
    assert code == 0, err
    assert "\x1b]" not in out                     # no OSC (hyperlink, clipboard, title)
    assert "\x1b[5m" not in out and "\x1b[2J" not in out
    assert "[link=https://evil.example/x]ms" in out and "[blink]ab" in out


def test_history_chart_is_well_formed_whatever_the_file_holds(bound_report, tmp_path):
    db = _tampered(bound_report, tmp_path)
    code, stdout, stderr = advisor("history", "show", "--db", db, "-o", tmp_path / "t.svg", "--no-color")
    assert code == 0, stderr
    assert _controls(stdout) == []
    svg = (tmp_path / "t.svg").read_text()
    minidom.parseString(svg)                      # XML 1.0 forbids the escape character
    assert "[link=https://evil.example/x]ms" in svg and "\\x1b" in svg


def test_the_gate_writes_nothing_beside_the_history_it_reads(bound_report, tmp_path):
    db = _history(bound_report, tmp_path / "cache" / "history.db")
    before = sorted(p.name for p in db.parent.iterdir())
    code, _, stderr = advisor("gate", bound_report, "--history", db, "-o", db.parent)
    one_line_error(code, stderr, "folder of the input", str(db))
    assert sorted(p.name for p in db.parent.iterdir()) == before
