"""What a user types first: a rule or metric name spelled the other way
(``input_bound``, ``free_ratio``) gets the close names, and a parent folder
of profiles (``advisor report corpus/mstt``) is searched below: one profile
is read and named, several are listed for the user to pick one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from advisor.collectors import search
from advisor.collectors.search import MAX_LISTED

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _one_error_line(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("advisor: error: ")
    return lines[0]


@pytest.mark.parametrize(("command", "typed", "meant"), [
    (("rules", "explain"), "input_bound", "'input-bound'"),
    (("rules", "explain"), "Input Bound", "'input-bound'"),
    (("rules", "explain"), "exposed-allreduse", "'exposed-allreduce'"),
    (("metrics", "explain"), "free_ratio", "'step.free_ratio'"),
    (("metrics", "explain"), "step.free-ratio", "'step.free_ratio'"),
    (("metrics", "explain"), "overlap_ratio", "'comm.overlap_ratio'"),
])
def test_unknown_name_suggests_the_close_one(run_cli, command, typed, meant) -> None:
    line = _one_error_line(run_cli(*command, typed))
    assert f"did you mean {meant}?" in line
    assert repr(typed) in line


@pytest.mark.parametrize("command", [("rules", "explain"), ("metrics", "explain")])
def test_unrelated_name_gets_no_suggestion(run_cli, command) -> None:
    line = _one_error_line(run_cli(*command, "zebra"))
    assert "did you mean" not in line and "'zebra'" in line


def test_parent_of_several_profiles_lists_them(run_cli, corpus: Path, tmp_path: Path) -> None:
    root = corpus / "mstt"
    line = _one_error_line(run_cli("report", str(root), "-o", str(tmp_path / "out")))
    assert "4 separate profiles below it" in line
    for place in ("test/resource/advisor/cluster_analysis_output",
                  "test/ut/advisor/advisor_backend/compute_advice",
                  "test/ut/advisor/advisor_backend/timeline_advice",
                  "test/ut/advisor/compute_advice/data"):
        assert place in line
    assert not (tmp_path / "out").exists()


def test_parent_of_one_profile_is_read_and_named(run_cli, corpus: Path, tmp_path: Path) -> None:
    root = corpus / "mstt" / "test" / "resource"
    done = run_cli("report", str(root), "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    found = root / "advisor" / "cluster_analysis_output"
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["run"]["source_path"] == str(found)
    assert report["run"]["ranks"] == list(range(8))
    assert report["run"]["notes"][0] == f"read advisor/cluster_analysis_output, the one profile found below {root}"
    assert "read advisor/cluster_analysis_output, the one profile found below" in done.stdout


def _nest(parent: Path, name: str, *, link: bool = False) -> Path:
    """``examples/<name>`` five folders below ``parent`` (deeper than the
    collectors look on their own), copied or as a symbolic link."""
    where = parent / "a" / "b" / "c" / "d" / name
    where.parent.mkdir(parents=True, exist_ok=True)
    if link:
        where.symlink_to(EXAMPLES / name, target_is_directory=True)
    else:
        shutil.copytree(EXAMPLES / name, where)
    return where


@pytest.mark.parametrize(("name", "ranks", "top"), [
    ("resnet50_data_bound", 1, "input-bound"),
    ("resnet50_8p_allreduce_tail", 8, "exposed-allreduce"),
])
def test_deep_example_is_found_and_named(run_cli, tmp_path: Path, name: str, ranks: int, top: str) -> None:
    where = _nest(tmp_path / "runs", name)
    done = run_cli("report", str(tmp_path / "runs"), "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["run"]["source_path"] == str(where / "profiler")
    assert len(report["run"]["ranks"]) == ranks
    assert [f["rule"] for f in report["findings"]][:1] == [top]
    note = f"read a/b/c/d/{name}/profiler, the one profile found below {tmp_path / 'runs'}"
    assert report["run"]["notes"][0] == note


def test_two_deep_examples_are_listed_not_merged(run_cli, tmp_path: Path) -> None:
    _nest(tmp_path / "runs", "resnet50_data_bound")
    _nest(tmp_path / "runs", "resnet50_data_fixed")
    line = _one_error_line(run_cli("report", str(tmp_path / "runs"), "-o", str(tmp_path / "out")))
    assert "2 separate profiles below it" in line
    assert "a/b/c/d/resnet50_data_bound/profiler, a/b/c/d/resnet50_data_fixed/profiler" in line


def test_many_places_are_cut_to_a_few(run_cli, tmp_path: Path) -> None:
    names = sorted(p.name for p in EXAMPLES.iterdir() if (p / "profiler").is_dir())
    assert len(names) > MAX_LISTED
    for name in names:
        _nest(tmp_path / "runs", name)
    line = _one_error_line(run_cli("report", str(tmp_path / "runs"), "-o", str(tmp_path / "out")))
    assert f"{len(names)} separate profiles" in line
    assert f"and {len(names) - MAX_LISTED} more; give one of them" in line
    assert names[MAX_LISTED - 1] in line and names[MAX_LISTED] not in line


def test_the_examples_folder_lists_its_runs_not_merges_them(run_cli, tmp_path: Path) -> None:
    """``advisor report examples``: the MindInsight collector finds every
    example's files at once; the runs are listed, never read as ranks of one."""
    names = sorted(p.name for p in EXAMPLES.iterdir() if (p / "profiler").is_dir())
    line = _one_error_line(run_cli("report", str(EXAMPLES), "-o", str(tmp_path / "out")))
    assert f"this folder holds {len(names)} separate profiles below it" in line
    assert ", ".join(f"{n}/profiler" for n in names[:MAX_LISTED]) in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["resnet50_8p_allreduce_tail", "resnet50_8p_overlapped"])
def test_an_example_cluster_is_still_one_run(run_cli, tmp_path: Path, name: str) -> None:
    done = run_cli("report", str(EXAMPLES / name), "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    files = sorted((EXAMPLES / name / "profiler").glob("step_trace_raw_*_detail_time.csv"))
    assert len(report["run"]["ranks"]) == len(files) > 1


def test_link_out_of_the_folder_is_not_followed(run_cli, tmp_path: Path) -> None:
    _nest(tmp_path / "runs", "resnet50_data_bound", link=True)
    line = _one_error_line(run_cli("report", str(tmp_path / "runs"), "-o", str(tmp_path / "out")))
    assert "no profiler output found" in line



def test_rank_folders_deep_down_are_one_run(run_cli, examples: Path, tmp_path: Path) -> None:
    """MindInsight r1.3 writes ``cluster_profiler/{rank}/profiler`` with the
    same file names in each rank's folder: one run, not a list to pick from."""
    src = examples / "resnet50_data_fixed" / "profiler"
    for rank in (1, 2):
        shutil.copytree(src, tmp_path / "runs" / "a" / "b" / "job" / "cluster_profiler" / str(rank) / "profiler")
    done = run_cli("report", str(tmp_path / "runs"), "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["run"]["ranks"] == [1, 2]
    assert report["run"]["notes"][0] == f"read a/b/job/cluster_profiler, the one profile found below {tmp_path / 'runs'}"


def test_a_tree_too_large_to_search_is_refused(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    where = _nest(tmp_path / "runs", "resnet50_data_bound")
    entries = sum(1 for _ in (tmp_path / "runs").rglob("*"))
    monkeypatch.setattr(search, "MAX_ENTRIES", entries - 1)
    line = _one_error_line(run_cli("report", str(tmp_path / "runs"), "-o", str(tmp_path / "out")))
    assert f"more than {entries - 1} entries below it to search" in line
    monkeypatch.setattr(search, "MAX_ENTRIES", entries)
    done = run_cli("report", str(tmp_path / "runs"), "-o", str(tmp_path / "out"))
    assert done.returncode == 0 and json.loads((tmp_path / "out" / "report.json").read_text())["run"][
        "source_path"] == str(where / "profiler")
