"""Bad input through the real CLI: exit code 2, one line naming the file and
the problem, no traceback, and nothing written into the input folder."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest


def _advisor(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "advisor", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


def _ascend_rank(root: Path, files: dict[str, str | bytes]) -> Path:
    out = root / "host_1_20260101_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    for name, content in files.items():
        mode = "wb" if isinstance(content, bytes) else "w"
        with open(out / name, mode) as fh:
            fh.write(content)
    return root


STEP_HEADER = "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free\n"

CASES = {
    "missing folder": (lambda tmp: tmp / "does_not_exist", "no such file or folder"),
    "folder with no profiler files": (
        lambda tmp: (tmp / "notes").mkdir() or (tmp / "notes" / "readme.txt").write_text("hi") and tmp / "notes",
        "no profiler output found",
    ),
    "empty step_trace_time.csv": (
        lambda tmp: _ascend_rank(tmp / "in", {"step_trace_time.csv": ""}),
        "step_trace_time.csv",
    ),
    "header-only step_trace_time.csv": (
        lambda tmp: _ascend_rank(tmp / "in", {"step_trace_time.csv": STEP_HEADER}),
        "step_trace_time.csv",
    ),
    "truncated kernel_details.csv": (
        lambda tmp: _ascend_rank(tmp / "in", {"kernel_details.csv": 'Step Id,Name,Type,Accelerator Core,Start Time(us),Dur'}),
        "kernel_details.csv",
    ),
    "communication.json cut mid-way": (
        lambda tmp: _ascend_rank(tmp / "in", {"communication.json": '{"step1": {"collective": {"hcom_allReduce__1_0@g": {"Communication Time Info": {"Elapse'}),
        "communication.json",
    ),
    "kineto trace cut mid-way (gzip)": (
        lambda tmp: (tmp / "in").mkdir() or (tmp / "in" / "w.pt.trace.json.gz").write_bytes(
            gzip.compress(b'{"schemaVersion": 1, "traceEvents": [' + b'{"ph": "X", "name": "a", "ts": 1, "dur": 2},' * 500)[:900]
        ) and tmp / "in",
        "w.pt.trace.json.gz",
    ),
    # a file named as a PyTorch trace and given alone is read as one, so its own problem is the error
    # (it was "no profiler output found (expected ... *.pt.trace.json[.gz] traces ...)")
    "a named trace whose start is not a trace": (
        lambda tmp: (tmp / "rank0.pt.trace.json").write_text('{"bad": ') and tmp / "rank0.pt.trace.json",
        "rank0.pt.trace.json: malformed or truncated JSON",
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_bad_input_exits_2_with_one_line(tmp_path, case):
    make, fragment = CASES[case]
    target = make(tmp_path)
    before = _snapshot(tmp_path)
    out_dir = tmp_path.parent / f"{tmp_path.name}_out"
    result = _advisor("report", str(target), "-o", str(out_dir), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("advisor: error: ") and fragment in lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    assert _snapshot(tmp_path) == before


def test_output_inside_input_is_refused(tmp_path, corpus):
    src = corpus / "mstt/test/resource/advisor/cluster_analysis_output"
    result = _advisor("report", str(src), "-o", str(src / "out"), cwd=tmp_path)
    assert result.returncode == 2
    assert "inside the input" in result.stderr
    assert not (src / "out").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read files without read permission")
def test_unreadable_file_is_named(tmp_path):
    root = _ascend_rank(tmp_path / "in", {"step_trace_time.csv": STEP_HEADER + "1,1,1,0,1,1\n"})
    target = next(root.rglob("step_trace_time.csv"))
    target.chmod(0)
    result = _advisor("report", str(root), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 2 and "step_trace_time.csv" in result.stderr
