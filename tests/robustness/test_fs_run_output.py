"""``advisor run -o OUT`` never deletes what advisor did not write.

A new run into OUT removes the previous run's traces, so the report does not
mix two runs; it once removed every ``*.pt.trace.json*`` and ``*_ascend_pt``
/ ``*_ascend_ms`` under ``OUT/trace``, whoever wrote them. Now a run writes
into an empty folder or one it made (its marker lists what it wrote), and
refuses anything else with one line, before writing anything.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rb_util import TINY_LOOP, snapshot

from advisor.collectors.live.backend import importable

needs_torch = pytest.mark.skipif(not importable("torch"), reason="torch is not importable here")


def _run(tmp_path: Path, out: Path, script: str) -> subprocess.CompletedProcess:
    path = tmp_path / "train.py"
    path.write_text(script)
    return subprocess.run([sys.executable, "-m", "advisor", "run", "--steps", "2", "--warmup", "1", "-o", str(out),
                           "--no-color", "--", sys.executable, str(path)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)


def _one_line(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and all(f in lines[0] for f in fragments), result.stderr


def test_a_folder_advisor_did_not_make_is_refused_and_left_alone(tmp_path):
    keep = tmp_path / "keep"
    (keep / "trace" / "worker_1_ascend_pt").mkdir(parents=True)
    (keep / "trace" / "worker_1_ascend_pt" / "profiler_info_0.json").write_text("{}")
    (keep / "trace" / "rank0.pt.trace.json").write_text('{"traceEvents": []}')
    (keep / "trace" / "rank1.pt.trace.json.gz").write_bytes(b"\x1f\x8b")
    before = snapshot(keep)
    result = _run(tmp_path, keep, "open('ran', 'w').close()\n")
    _one_line(result, str(keep), "not empty", "choose another -o")
    assert snapshot(keep) == before
    assert not (tmp_path / "ran").exists()  # refused before the command ran


@needs_torch
def test_a_run_replaces_its_own_traces_and_nothing_else(tmp_path):
    out = tmp_path / "out"
    out.mkdir()  # an empty folder is taken
    first = _run(tmp_path, out, TINY_LOOP)
    assert first.returncode == 0, first.stderr
    traces = sorted(p.name for p in (out / "trace").iterdir())
    assert len(traces) == 1 and traces[0].endswith(".pt.trace.json")
    assert (out / "report.json").is_file()
    marker = json.loads((out / ".advisor-output.json").read_text())
    assert marker["trace"] == traces

    second = _run(tmp_path, out, TINY_LOOP)  # advisor's own folder: the previous trace goes
    assert second.returncode == 0, second.stderr
    assert "removed 1 trace(s) of a previous run" in second.stderr
    newer = sorted(p.name for p in (out / "trace").iterdir())
    assert len(newer) == 1 and newer != traces

    mine = out / "trace" / "rank7.pt.trace.json"  # the user's own trace, copied in afterwards
    mine.write_text('{"traceEvents": []}')
    (out / "notes.txt").write_text("the user's notes")
    before = snapshot(out)
    third = _run(tmp_path, out, TINY_LOOP)
    _one_line(third, str(mine), "not written by advisor", "does not delete it")
    assert snapshot(out) == before
