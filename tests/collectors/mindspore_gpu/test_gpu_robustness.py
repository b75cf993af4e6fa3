"""Damaged MindSpore GPU folders: a one-line error naming the file (exit 2)
when nothing usable is left, else a partial report saying what was skipped.
Folders written by ``gpu_folder`` (sources cited there)."""

from __future__ import annotations

import os
from dataclasses import replace

import gpu_folder as gf
import pytest
from test_mindspore_gpu import HEALTHY, INPUT_BOUND

from advisor.cli import main
from advisor.collectors import load_profile
from advisor.errors import InputError

#: What a damaged file may hold instead of its content.
DAMAGE = {
    "empty": b"",
    "binary": bytes(range(256)) * 4,
    "header only": None,  # first line kept
    "cut mid-line": None,  # first half of the bytes kept
    "not utf-8": b"\xff\xfe\x00garbage,\x80\x81\n1,2\n",
}


def _damage(path, how: str) -> None:
    data = path.read_bytes()
    if how == "header only":
        path.write_bytes(data.split(b"\n", 1)[0] + b"\n")
    elif how == "cut mid-line":
        path.write_bytes(data[: len(data) // 2 + 3])
    else:
        path.write_bytes(DAMAGE[how])


def _skipped_files(profile) -> set[str]:
    return {os.path.basename(s.what) for s in profile.skipped}


@pytest.mark.parametrize("how", list(DAMAGE))
def test_every_damaged_file_is_an_input_error_or_a_skip(tmp_path, how):
    """Each file damaged in turn: the folder still reads (the file listed as
    skipped, or its table missing) or fails with InputError naming a file;
    never another exception."""
    clean = gf.write(tmp_path / "clean", replace(INPUT_BOUND, allreduce_ms=2.0), txt_trace="step")
    for name in sorted(p.name for p in clean.iterdir()):
        folder = gf.write(tmp_path / how.replace(" ", "_") / name, replace(INPUT_BOUND, allreduce_ms=2.0),
                          txt_trace="step")
        _damage(folder / name, how)
        try:
            profile = load_profile(folder, jobs=1)
        except InputError as exc:
            assert "\n" not in str(exc)
            assert str(folder) in str(exc), (name, str(exc))
            continue
        assert profile.table("steps") is not None or profile.table("ops") is not None, name


def test_garbled_kernel_file_is_skipped_and_the_op_file_used(tmp_path):
    folder = gf.write(tmp_path / "profiler", INPUT_BOUND)
    (folder / "gpu_activity_data_0.csv").write_text("name,type\n\"unterminated,cuLaunchKernel\n")
    profile = load_profile(folder, jobs=1)
    assert "gpu_activity_data_0.csv" in _skipped_files(profile)
    assert "Conv2D-op107" in set(profile.ops["name"])  # from gpu_op_detail_info
    assert len(profile.steps) == 10


def test_negative_kernel_time_is_skipped(tmp_path):
    folder = gf.write(tmp_path / "profiler", INPUT_BOUND)
    path = folder / "gpu_activity_data_0.csv"
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace(",20,90000.0,", ",20,-90000.0,")
    path.write_text("\n".join(lines) + "\n")
    profile = load_profile(folder, jobs=1)
    reasons = [s.reason for s in profile.skipped if s.what.endswith("gpu_activity_data_0.csv")]
    assert reasons and "impossible operator time" in reasons[0]


def test_garbled_step_csv_falls_back_to_the_profiler_text(tmp_path):
    folder = gf.write(tmp_path / "profiler", INPUT_BOUND, txt_trace="step")
    (folder / "step_trace_raw_0_detail_time.csv").write_text("step_num,start_point\n1,2\n")
    profile = load_profile(folder, jobs=1)
    skip = [s for s in profile.skipped if s.what.endswith("step_trace_raw_0_detail_time.csv")]
    assert skip and "used step_trace_profiling_0.txt" in skip[0].reason
    assert profile.steps["duration_us"].tolist() == [100_000.0] * 10


def test_unusable_step_trace_is_exit_2_with_one_line_naming_it(tmp_path, capsys):
    folder = gf.write(tmp_path / "profiler", INPUT_BOUND, txt_trace=None)
    (folder / "step_trace_raw_0_detail_time.csv").write_text("step_num,total\nx,y\n")
    with pytest.raises(SystemExit) as end:
        main(["report", str(folder), "-o", str(tmp_path / "out"), "--jobs", "1"])
    assert end.value.code == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "step_trace_raw_0_detail_time.csv: no step rows" in lines[0], err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("text, problem", [
    ("Default/Conv2D-op1 10,20 30,40\nGradients/Conv2DBackpropFilter-op2 15,18\nDefault/ApplyMomentum-op3 19,20 "
     "39,40\n", "different numbers of steps"),
    ("Default/Conv2D-op1 10,20\nGradients/Conv2DBackpropFilter-op2 15,18\n", "expected at least 3"),
    ("Default/Conv2D-op1 10;20\nGradients/Conv2DBackpropFilter-op2 15,18\nDefault/ApplyMomentum-op3 19,20\n",
     "not a 'start,end' pair"),
    ("Default/GetNext-op1,100 Default/Conv2D-op1,2x0 Gradients/B-op2,300 Default/A-op3,400\n", "not an integer"),
    ("Default/GetNext-op1,100 Default/Conv2D-op1,200 Gradients/B-op2,300\n", "expected at least 4"),
    ("Default/GetNext-op1,500 Default/Conv2D-op1,200 Gradients/B-op2,300 Default/A-op3,400\n", "out of order"),
])
def test_bad_step_text_is_an_error_naming_the_file(tmp_path, text, problem):
    folder = gf.write(tmp_path / "profiler", INPUT_BOUND, csv_trace=False, txt_trace=None)
    (folder / "step_trace_profiling_0.txt").write_text(text)
    with pytest.raises(InputError, match=problem) as err:
        load_profile(folder, jobs=1)
    assert "step_trace_profiling_0.txt" in str(err.value)


def test_garbled_getnext_file_is_skipped(tmp_path):
    folder = gf.write(tmp_path / "profiler", INPUT_BOUND)
    (folder / "minddata_getnext_profiling_0.txt").write_text("GetNext 1 2\nGetNext 3 4 five\n")
    profile = load_profile(folder, jobs=1)
    assert "minddata_getnext_profiling_0.txt" in _skipped_files(profile)
    assert set(profile.data_queue["queue"]) == {"host"}


def test_one_broken_device_of_two_gives_a_partial_report(tmp_path):
    folder = tmp_path / "profiler"
    gf.write(folder, replace(INPUT_BOUND, dev=0))
    gf.write(folder, replace(HEALTHY, dev=1), txt_trace=None)
    (folder / "step_trace_raw_1_detail_time.csv").write_bytes(b"\x00\x01\x02")
    profile = load_profile(folder, jobs=1)
    assert profile.meta.ranks == [0]
    assert any("gpu_op_detail_info_1.csv" in s.what or "step_trace_raw_1" in s.what for s in profile.skipped)


def test_dangling_anchor_names_the_file(tmp_path):
    folder = tmp_path / "profiler"
    folder.mkdir()
    (folder / "gpu_op_detail_info_0.csv").symlink_to(folder / "gone.csv")
    with pytest.raises(InputError, match="gpu_op_detail_info_0.csv.*dangling"):
        load_profile(folder, jobs=1)
