"""Several captures of one process are windows of one rank, not ranks.

Trace files are written as PyTorch's ``tensorboard_trace_handler`` names
them, ``{worker}.{ms}.pt.trace.json[.gz]`` with ``{worker}`` =
``{hostname}_{pid}`` unless the user names it (torch/profiler/profiler.py,
``tensorboard_trace_handler``); host events carry the process id in ``pid``
(Kineto's Chrome trace output). A schedule with ``repeat=2`` writes two
such files from one process.
"""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
from pathlib import Path

import pytest

from advisor import analyze
from advisor.chart_tables import build_tables
from advisor.collectors import load_profile
from advisor.collectors.kineto import collector as kineto
from advisor.reports._view import _series_chart
from tests.collectors.kineto.test_kineto import X, write

TB_RUN = Path("kineto-tb-plugin/resnet50_num_workers_0")


def _steps(first: int, count: int, pid: int) -> list[dict]:
    """``count`` steps from ``ProfilerStep#first``, host events of ``pid``."""
    out = []
    for k in range(count):
        t = 1000 * k
        out += [X("user_annotation", f"ProfilerStep#{first + k}", t, 900, pid=pid, tid=pid),
                X("cpu_op", "aten::mm", t + 10, 600, pid=pid, tid=pid)]
    return out


def _step_ids(path: Path) -> list[int]:
    """The ProfilerStep numbers a trace file holds (read from the file)."""
    text = gzip.open(path, "rt").read() if path.name.endswith(".gz") else path.read_text()
    return sorted({int(n) for n in re.findall(r"ProfilerStep#(\d+)", text)})


def test_two_captures_of_one_process_are_one_rank(tmp_path):
    write(tmp_path / "host-a_4242.1700000000001.pt.trace.json", _steps(2, 2, 4242))
    write(tmp_path / "host-a_4242.1700000009999.pt.trace.json", _steps(6, 2, 4242))
    p = load_profile(tmp_path, jobs=1)
    assert p.meta.ranks == [0]
    assert sorted(p.steps["step"]) == [2, 3, 6, 7]  # each step keeps its own number
    assert any("one process" in n and "capture windows of rank 0" in n for n in p.meta.notes)
    assert not any("own rank" in n for n in p.meta.notes)


def test_traces_of_two_processes_stay_two_ranks(tmp_path):
    write(tmp_path / "host-a_4242.1700000000001.pt.trace.json", _steps(2, 2, 4242))
    write(tmp_path / "host-a_5151.1700000000002.pt.trace.json", _steps(2, 2, 5151))
    p = load_profile(tmp_path, jobs=1)
    assert p.meta.ranks == [0, 1] and p.meta.ranks_inferred
    assert any("2 processes" in n and "own rank" in n for n in p.meta.notes)


def test_one_user_named_worker_with_two_pids_is_two_processes(tmp_path):
    """A worker name the user chose is no process id: the pids decide."""
    write(tmp_path / "worker0.1700000000001.pt.trace.json", _steps(1, 2, 11))
    write(tmp_path / "worker0.1700000000002.pt.trace.json", _steps(1, 2, 12))
    assert load_profile(tmp_path, jobs=1).meta.ranks == [0, 1]


def test_a_file_read_alone_names_no_other_file(tmp_path):
    one = write(tmp_path / "host-a_4242.1700000000001.pt.trace.json", _steps(2, 2, 4242))
    write(tmp_path / "host-a_5151.1700000000002.pt.trace.json", _steps(2, 2, 5151))
    write(tmp_path / "host-a_4242.1700000009999.pt.trace.json", _steps(6, 2, 4242))
    p = load_profile(one, jobs=1)
    assert p.meta.ranks == [0]
    assert not any("trace files" in n or "own rank" in n for n in p.meta.notes), p.meta.notes


def test_step_line_breaks_between_captures(tmp_path):
    write(tmp_path / "host-a_4242.1700000000001.pt.trace.json", _steps(2, 4, 4242))
    write(tmp_path / "host-a_4242.1700000009999.pt.trace.json", _steps(10, 4, 4242))
    tables = build_tables(load_profile(tmp_path, jobs=1), {})
    series = tables["step_series"]
    assert [r["step"] for r in series if r["after_gap"]] == [10]
    assert "rank_heatmap" not in tables
    chart = _series_chart(series, "en")
    gap = chart["labels"].index("(6…9)")
    assert chart["series"][0]["data"][gap] is None  # the line is not drawn across steps never recorded
    assert chart["labels"][gap - 1] == "5" and chart["labels"][gap + 1] == "10"


# ------------------------------------------------------------- real traces


def test_corpus_two_captures_are_one_rank(corpus):
    folder = corpus / TB_RUN
    files = sorted(folder.glob("*.pt.trace.json.gz"))
    assert len(files) == 2
    p = load_profile(folder, jobs=1)
    assert p.meta.ranks == [0]
    for f in files:  # every step of each capture, under its own number
        assert set(_step_ids(f)) <= set(p.steps["step"])
    report = analyze(folder, jobs=1)
    assert "rank_heatmap" not in report.tables and "rank_breakdown" not in report.tables
    after = [r["step"] for r in report.tables["step_series"] if r["after_gap"]]
    assert after == [min(_step_ids(files[1]))]


def test_corpus_single_capture_mentions_no_second_file(corpus):
    first = sorted((corpus / TB_RUN).glob("*.pt.trace.json.gz"))[0]
    report = analyze(first, jobs=1)
    notes = " ".join(report.run.notes)
    assert "trace files" not in notes and "own rank" not in notes


SCRIPT = """
import sys, torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 64)
repeat = int(sys.argv[2])
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=2, repeat=repeat),
             on_trace_ready=tensorboard_trace_handler(sys.argv[1])) as prof:
    for _ in range(4 * repeat + 1):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        prof.step()
"""


def _profile(out: Path, repeat: int) -> None:
    pytest.importorskip("torch")
    subprocess.run([sys.executable, "-c", SCRIPT, str(out), str(repeat)], check=True, timeout=300)


def test_real_schedule_with_repeat_two_is_one_rank(tmp_path):
    _profile(tmp_path, repeat=2)
    files = sorted(tmp_path.glob("*.pt.trace.json*"))
    assert len(files) == 2
    p = load_profile(tmp_path, jobs=1)
    assert p.meta.ranks == [0]
    assert sorted(p.steps["step"].dropna().astype(int)) == sorted(s for f in files for s in _step_ids(f))
    assert any("one process" in n for n in p.meta.notes)


def test_real_runs_of_two_processes_are_two_ranks(tmp_path):
    _profile(tmp_path, repeat=1)
    _profile(tmp_path, repeat=1)
    assert len(list(tmp_path.glob("*.pt.trace.json*"))) == 2
    p = load_profile(tmp_path, jobs=1)
    assert p.meta.ranks == [0, 1]
    assert kineto.rank_notes(sorted(tmp_path.glob("*.pt.trace.json*")))  # says each process got its own rank
