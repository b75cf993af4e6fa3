"""``gpu_cluster_analyse_{mode}_{stages}_{rank_size}_{dev}.csv``: the GPU twin of
``ascend_cluster_analyse_*``.

MindSpore's ``GpuTimelineGenerator`` (``mindspore/profiler/parser/
gpu_analysis``/``integrator``: ``_cluster_analyse_filename =
'gpu_cluster_analyse_{}_{}_{}_{}.csv'``, parallel mode, stage count, rank
size, rank id) writes it with the base class's ``_write_cluster_metrices``
(``base_timeline_generator.py``), as on Ascend: header
``computation_time,communication_alone_time`` (pipeline runs add
``stage_time,receive_alone_time,collective_communication_alone_time``), one
row per step in ms, then a row of means. It lies beside the GPU profiler's
own files (``gpu_folder`` writes them), which the MindSpore GPU collector reads.
"""

from __future__ import annotations

import csv

import pytest

from advisor.collectors import load_profile
from advisor.collectors.mindinsight import cluster_analyse
from tests.collectors.mindspore_gpu import gpu_folder as gf

#: Per step: exposed all-reduce (ms) of a 2-device data-parallel run.
ALONE_MS = 12.0


def _write(folder, dev: int, run: gf.GpuRun, *, mode: str = "data-parallel", stages: int = 1,
           rank_size: int = 2, pipeline: bool = False) -> str:
    rows = []
    for _ in range(run.steps):
        row = [round(run.step_ms - ALONE_MS, 4), ALONE_MS]
        if pipeline:
            row += [run.step_ms - 2.0, 2.0, ALONE_MS - 2.0]
        rows.append(row)
    means = [round(sum(r[i] for r in rows[1:]) / (len(rows) - 1), 4) for i in range(len(rows[0]))]
    name = f"gpu_cluster_analyse_{mode}_{stages}_{rank_size}_{dev}.csv"
    header = ["computation_time", "communication_alone_time"]
    if pipeline:
        header += ["stage_time", "receive_alone_time", "collective_communication_alone_time"]
    with open(folder / name, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
        w.writerow(means)
    return name


def test_the_gpu_name_is_matched_with_its_layout(tmp_path):
    run = gf.GpuRun(dev=1, rank_size=4)
    name = _write(tmp_path, 1, run, mode="pipeline-parallel", stages=2, rank_size=4, pipeline=True)
    assert cluster_analyse.FILE.match(name)
    path, mode, stages, size = cluster_analyse.find(tmp_path, 1)
    assert (path.name, mode, stages, size) == (name, "pipeline-parallel", 2, 4)
    frame = cluster_analyse.load(path, run.steps)
    assert len(frame) == run.steps  # the row of means is not a step
    assert frame["receive_alone"].tolist() == [2.0] * run.steps


def test_gpu_folder_steps_get_the_exposed_communication(tmp_path):
    """A 2-device data-parallel GPU run: the steps carry communication alone and computation."""
    folder = tmp_path / "profiler"
    for dev in (0, 1):
        run = gf.GpuRun(dev=dev, rank_size=2, allreduce_ms=ALONE_MS)
        gf.write(folder, run)
        _write(folder, dev, run)
    profile = load_profile(folder)
    assert profile.meta.device == "gpu"
    steps = profile.steps
    assert sorted(steps["rank"].unique()) == [0, 1]
    assert steps.groupby("rank").size().tolist() == [run.steps] * 2
    assert steps["exposed_comm_us"].tolist() == pytest.approx([ALONE_MS * 1000] * len(steps), abs=1)
    # computation less the iteration interval: device time outside exposed communication
    expected = (run.step_ms - ALONE_MS - run.interval_ms) * 1000
    assert steps["computing_us"].tolist() == pytest.approx([expected] * len(steps), abs=1)
    assert profile.meta.parallel.get("dp") == 2 and profile.meta.world_size == 2


def test_misaligned_gpu_file_is_a_skip(tmp_path):
    """A file with another step count than the step trace is left out, saying so."""
    folder = tmp_path / "profiler"
    run = gf.GpuRun(dev=0)
    gf.write(folder, run)
    _write(folder, 0, gf.GpuRun(dev=0, steps=run.steps + 3))
    profile = load_profile(folder)
    assert "exposed_comm_us" not in profile.steps
    assert any("not aligned" in s.reason for s in profile.skipped)
