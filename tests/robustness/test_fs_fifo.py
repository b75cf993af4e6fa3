"""Only regular files are read.

A FIFO named like a profiler file (``mkfifo rank0.pt.trace.json``) blocks a
plain ``open`` until some process writes to it, i.e. forever. Wherever one
is planted -- a Kineto trace, an Ascend rank's ``profiler_info_N.json`` or
``profiler_metadata.json``, its SQLite database, or the path given to
``advisor report`` -- the command ends: the file is skipped and named in
the report when other ranks are readable, or it is a one-line error (exit
2) when it is the only input. The FIFOs here never get a writer, so a
reader that opened one would wait until the test's timeout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rb_damage import npu_cluster, tb_plugin

from bench.scenarios.ascend import sample_rank, write_db

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")

#: Seconds a command may take here (each takes a few): a hang guard, not a timing test.
PATIENCE = 120


def _report(target: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "advisor", "report", str(target), "-o", str(out), "--no-color",
                           "-j", "1"], capture_output=True, text=True, timeout=PATIENCE, cwd=out.parent)


def _plant_fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _skips(out: Path) -> list[str]:
    return [f"{s['what']}: {s['reason']}" for s in json.loads((out / "report.json").read_text())["skipped"]]


def _one_line_error(result: subprocess.CompletedProcess, fifo: Path) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert str(fifo) in lines[0] and "not a regular file" in lines[0]


def test_a_fifo_trace_beside_readable_ones_is_skipped_and_named(tmp_path, corpus):
    data = tb_plugin(corpus, tmp_path / "in")
    fifo = data / "rank9.pt.trace.json"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    result = _report(data, out)
    assert result.returncode == 0, result.stderr
    assert any(s.startswith(str(fifo)) and "not a regular file (a FIFO)" in s for s in _skips(out))


def test_a_fifo_as_the_only_trace_is_a_one_line_error(tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    fifo = data / "rank0.pt.trace.json"
    os.mkfifo(fifo)
    _one_line_error(_report(data, tmp_path / "out"), fifo)
    _one_line_error(_report(fifo, tmp_path / "out"), fifo)  # the FIFO given as the profile itself


@pytest.mark.parametrize("name", ["profiler_info_1.json", "profiler_metadata.json",
                                  "ASCEND_PROFILER_OUTPUT/kernel_details.csv",
                                  "ASCEND_PROFILER_OUTPUT/step_trace_time.csv"])
def test_a_fifo_in_an_ascend_rank_leaves_that_rank_out(tmp_path, corpus, name):
    data = npu_cluster(corpus, tmp_path / "in", ranks=2)
    rank1 = next(data.glob("*_1001_*_ascend_pt"))
    fifo = rank1 / name
    _plant_fifo(fifo)
    out = tmp_path / "out"
    result = _report(data, out)
    assert result.returncode == 0, result.stderr
    assert any(str(fifo) in s and "not a regular file (a FIFO)" in s for s in _skips(out)), _skips(out)


@pytest.mark.parametrize("analysis", [True, False], ids=["beside-analysis-db", "only-db"])
def test_a_fifo_database_in_an_ascend_rank_is_skipped_or_an_error_naming_it(tmp_path, analysis):
    data = tmp_path / "in"
    rank = write_db(data, sample_rank(0), analysis=analysis)
    db = rank / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    good = tmp_path / "good"
    shutil.copytree(data, good)
    assert _report(good, tmp_path / "good_out").returncode == 0  # the layout is read when the file is real
    _plant_fifo(db)
    out = tmp_path / "out"
    result = _report(data, out)
    if not analysis:
        _one_line_error(result, db)
        return
    assert result.returncode == 0, result.stderr
    assert f"{db}: not a regular file (a FIFO); not read" in _skips(out)
