"""Hostile strings in a profile reach neither the terminal nor a pull-request
comment alive.

An operator name, or the name of a file in the profile folder, is chosen by
whoever produced the profile. Named here: an OSC 52 clipboard write, a title
change, a screen clear and a cursor movement, raw line breaks that forge a
line of output, and GitHub/GitLab mentions, references and bare links. The
traces are written in the real Kineto format (``bench.scenarios``); the
commands are the real command line, through a pipe and on a pty.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from pathlib import Path

import pytest

from bench.scenarios import Spec, generate
from tests._pty import advisor_on_pty
from tests.robustness.rb_util import run_cli

#: What an attacker puts in an operator name (the renamed kernel of the current run).
EVIL_OP = ("flash\x1b]52;c;cHduZWQ=\x07\x1b]0;owned\x07\x1b[2J\x1b[1A\r\n"
           "@octocat @org/team #123 !45 https://evil.example/x www.evil.example\nforged: line")
#: ... and in the name of a file of the profile (a FIFO: skipped, and named).
EVIL_FILE = "@octocat #7 https:\x1b]0;t\x07\x1b[2Jx.pt.trace.json"
ZWJ = "\u200d"
#: Markdown that GitHub/GitLab would turn into a notification or a link.
LIVE = ["@octocat", "@org", "#123", "#7", "!45", "https://", "www.evil"]
#: SGR colour sequences: rich's own styling on a terminal, nothing else.
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def _controls(text: str, allowed: str = "\n") -> list[str]:
    """The control characters in ``text`` (Unicode category Cc), except ``allowed``."""
    return sorted({repr(c) for c in text if unicodedata.category(c) == "Cc" and c not in allowed})


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """``base/``: a generated single-rank Kineto trace; ``cur/``: the same
    trace with its flash-attention kernel renamed to ``EVIL_OP`` and three
    times as long, beside a FIFO named ``EVIL_FILE``."""
    root = tmp_path_factory.mktemp("hostile")
    data, _ = generate(Spec(ranks=1, steps=6, seed=1), root / "gen", "kineto")
    trace = next(data.glob("*.pt.trace.json"))
    (root / "base").mkdir()
    (root / "base" / trace.name).write_bytes(trace.read_bytes())
    doc = json.loads(trace.read_text())
    renamed = 0
    for event in doc["traceEvents"]:
        if str(event.get("name", "")).startswith("flash_fwd_kernel"):
            event["name"], event["dur"] = EVIL_OP, event["dur"] * 3
            renamed += 1
    assert renamed
    (root / "cur").mkdir()
    (root / "cur" / trace.name).write_text(json.dumps(doc))
    os.mkfifo(root / "cur" / EVIL_FILE)
    return root


def test_compare_prints_operator_names_without_control_characters(runs):
    result = run_cli("compare", "base", "cur", "-o", "cmp", "--no-color", cwd=runs)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "grew: operator flash" in out          # the operator is still named
    assert _controls(out) == []
    assert not [line for line in out.splitlines() if line.startswith(("forged", "@octocat"))]


def test_compare_on_a_terminal_prints_no_escape_of_the_profile(runs):
    """On a pty (colour on): only rich's own colour sequences."""
    code, out, err = advisor_on_pty(["compare", "base", "cur", "-o", "cmp_tty"], runs,
                                    {**os.environ, "COLUMNS": "200", "TERM": "xterm-256color"})
    assert code == 0, err
    assert "grew: operator flash" in out                          # the operator is named ...
    assert _controls(_SGR.sub("", out), allowed="\r\n") == []   # ... with nothing that drives the terminal
    assert not [line for line in out.splitlines() if line.startswith(("forged", "@octocat"))]


def test_an_error_naming_a_file_of_the_profile_prints_no_control_characters(runs):
    """The one-line error names the file: without its escapes."""
    (runs / "only").mkdir()
    os.mkfifo(runs / "only" / EVIL_FILE)
    result = run_cli("report", "only", "-o", "rep_err", "--no-color", cwd=runs)
    assert result.returncode == 2
    assert "octocat" in result.stderr and result.stderr.count("\n") == 1
    assert _controls(result.stderr) == []


def _assert_inert(markdown: str) -> None:
    assert _controls(markdown) == []
    for live in LIVE:
        assert live not in markdown, live
    assert f"@{ZWJ}octocat" in markdown           # still readable, not a mention


def test_markdown_for_pull_requests_mentions_and_links_nothing(runs):
    assert run_cli("report", "cur", "-o", "rep_md", "--no-color", cwd=runs).returncode == 0
    report_md = (runs / "rep_md" / "report.md").read_text()
    _assert_inert(report_md)
    assert run_cli("compare", "base", "cur", "-o", "cmp_md", "--no-color", cwd=runs).returncode == 0
    compare_md = (runs / "cmp_md" / "compare.md").read_text()
    _assert_inert(compare_md)
    assert "flash" in compare_md
    gate = run_cli("gate", "cur", "--baseline", "base", "-o", "gate", "--no-color", cwd=runs)
    assert gate.returncode in (0, 1), gate.stderr
    assert _controls(gate.stdout) == []
    gate_md = (runs / "gate" / "gate.md").read_text()
    _assert_inert(gate_md)
    assert "flash" in gate_md
