"""The terminal summary of ``advisor report`` as a user on a headless server
reads it: whole messages wrapped to the width, the top finding's fix (every
fix with ``--verbose``), and the report's path on one line, through a pipe
and on a pty with ``COLUMNS`` set."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len

from tests._pty import advisor_on_pty

_ESC = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _piped(args: list[str], cwd: Path, columns: int | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns:
        env["COLUMNS"] = str(columns)
    proc = subprocess.run([sys.executable, "-m", "advisor", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _on_pty(args: list[str], cwd: Path, columns: int) -> str:
    """stdout as a terminal shows it, escape sequences removed."""
    code, out, err = advisor_on_pty(args, cwd, {**os.environ, "COLUMNS": str(columns), "TERM": "xterm-256color"})
    assert code == 0, err
    return _ESC.sub("", out).replace("\r\n", "\n")


def _joined(out: str) -> str:
    return " ".join(out.split())


def _report(out_dir: Path) -> dict:
    return json.loads((out_dir / "report.json").read_text())


def _prose(out: str, report: dict) -> list[str]:
    """The lines of ``out`` that are not a fix's code: code prints whole,
    one line of output per line of code, however wide (the terminal folds
    it for display), and each of those lines is checked to be there."""
    code = {line.strip() for f in report["findings"] for fix in [f["fix"], *(c["fix"] for c in f["contributing"])]
            if fix and fix.get("code") for line in fix["code"].splitlines() if line.strip()}
    lines = out.splitlines()
    shown = [line for line in lines if line.strip() in code]
    assert all(any(line.strip() == c for line in shown) for c in
               [x.strip() for x in (report["findings"][0]["fix"]["code"] or "").splitlines()[:8] if x.strip()])
    return [line for line in lines if line.strip() not in code]


@pytest.mark.parametrize("columns", [80, 200])
def test_on_a_terminal_each_message_is_whole_and_wrapped_to_the_width(examples, tmp_path, columns):
    out = _on_pty(["report", str(examples / "vgg16_fp32"), "-o", "out"], tmp_path, columns)
    report = _report(tmp_path / "out")
    text = _joined(out)
    for f in report["findings"]:
        assert _joined(f["message"]) in text  # nothing cut, at any width
    top = report["findings"][0]
    assert _joined(top["fix"]["text"]) in text
    assert top["fix"]["code"].splitlines()[0].strip() in out
    second = report["findings"][1]
    assert _joined(second["fix"]["text"]) not in text  # only the top finding's fix by default
    lines = [x for x in _prose(out, report) if "reading" not in x]
    assert max(cell_len(x) for x in lines) <= columns
    if columns == 200:  # the width is used, not a fixed cap
        assert max(cell_len(x) for x in lines) > 120


def test_verbose_prints_every_fix(examples, tmp_path):
    out = _on_pty(["report", "--verbose", str(examples / "resnet50_data_bound"), "-o", "out"], tmp_path, 100)
    report = _report(tmp_path / "out")
    fixes = [f["fix"] for f in report["findings"]] + [c["fix"] for f in report["findings"] for c in f["contributing"]]
    assert len(fixes) >= 2
    for fix in fixes:
        assert _joined(fix["text"]) in _joined(out)
    assert "--verbose" not in out  # no hint about fixes left out


def test_through_a_pipe_lines_are_plain_wrapped_and_the_path_is_one_line(examples, tmp_path):
    deep = tmp_path / ("a-rather-long-folder-name-for-reports" * 3) / "out"
    out = _piped(["report", str(examples / "resnet50_data_bound"), "-o", str(deep)], tmp_path, columns=60)
    assert "\x1b" not in out
    report = _report(deep)
    top = report["findings"][0]
    assert _joined(top["message"]) in _joined(out)
    assert _joined(top["fix"]["text"]) in _joined(out)
    assert "--verbose" in out  # the contributing cause's fix is one flag away
    path_line = out.splitlines()[-1]
    assert path_line == f"report: {deep / 'report.html'}"  # whole, for a script to take
    assert all(cell_len(x) <= 60 for x in _prose(out, report)[:-1])


def test_through_a_pipe_without_columns_wraps_at_80(examples, tmp_path):
    out = _piped(["report", str(examples / "resnet50_8p_allreduce_tail"), "-o", "out"], tmp_path)
    report = _report(tmp_path / "out")
    assert _joined(report["findings"][0]["message"]) in _joined(out)
    assert max(cell_len(x) for x in _prose(out, report)[:-1]) <= 80
