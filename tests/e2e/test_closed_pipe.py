"""A reader that stops early (``advisor ... | head``) changes nothing but
the printed lines: the command finishes its work and keeps its own exit
code (1 means "the gate found a regression", so a closed pipe must not
produce it), with nothing on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FP32, FP16 = REPO / "examples" / "vgg16_fp32", REPO / "examples" / "vgg16_fp16"


def _into_closed_pipe(*args, stderr_too: bool = False) -> subprocess.CompletedProcess:
    """``advisor ARGS`` with stdout (and stderr with ``stderr_too``) a pipe
    whose reader has already gone, so its first write fails (no race with a
    reader reading first)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "advisor", *map(str, args)], stdout=write_end,
                              stderr=write_end if stderr_too else subprocess.PIPE, text=True, timeout=300,
                              cwd=REPO)
    finally:
        os.close(write_end)


@pytest.mark.parametrize(("current", "baseline", "code"), [(FP16, FP32, 0), (FP32, FP16, 1)],
                         ids=["pass", "regression"])
def test_gate_verdict_survives_a_closed_pipe(tmp_path, current, baseline, code):
    done = _into_closed_pipe("gate", current, "--baseline", baseline, "-o", tmp_path)
    assert done.returncode == code, done.stderr
    assert done.stderr == ""
    assert (tmp_path / "gate.md").is_file() and (tmp_path / "junit.xml").is_file()


def test_report_is_written_whole(tmp_path):
    done = _into_closed_pipe("report", REPO / "examples" / "resnet50_data_bound", "-o", tmp_path, "--no-color")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "input-bound" in (tmp_path / "report.json").read_text(encoding="utf-8")
    assert (tmp_path / "report.html").stat().st_size > 10_000


def test_bad_input_keeps_exit_code_2_into_a_closed_pipe(tmp_path):
    done = _into_closed_pipe("report", tmp_path / "missing", "-o", tmp_path / "out", stderr_too=True)
    assert done.returncode == 2
