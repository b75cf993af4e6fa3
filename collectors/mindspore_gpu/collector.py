"""MindSpore Profiler on GPU (CUPTI) ``profiler/`` folder -> Profile.

``Profiler(output_path=...)`` + ``Profiler.analyse()`` on GPU write flat
files named by device id (``layout``; the MindSpore GPU profiling guide,
https://mindspore.cn/mindinsight/docs/en/r2.3/performance_profiling_gpu.html):

* ``step_trace_raw_{dev}_detail_time.csv``, else the profiler's own
  ``step_trace_profiling_{dev}.txt`` -> ``steps`` (``step_trace``): step
  time, iteration interval (the wait between steps: data and host),
  forward+backward and tail, as on Ascend.
* ``gpu_activity_data_{dev}.csv`` (CUDA kernels), else
  ``gpu_op_detail_info_{dev}.csv`` / ``gpu_op_type_info_{dev}.csv``
  (framework ops), else the host ``cpu_op_*`` files -> ``ops``
  (``operators``).
* MindData: ``minddata_pipeline_raw_{dev}.csv`` / ``pipeline_profiling_{dev}.json``
  -> ``data_ops``; ``device_queue_profiling_{dev}.txt`` /
  ``dataset_iterator_profiling_{dev}.txt`` (host queue) and
  ``minddata_getnext_profiling_{dev}.txt`` (GPU data queue) ->
  ``data_queue`` (``queues``). The MindInsight reader's modules read the
  files the two platforms share.
* Communication ops caught by the step trace -> ``comm`` (as on Ascend).
* ``gpu_cluster_analyse_{mode}_{stages}_{rank_size}_{dev}.csv`` (the GPU
  twin of ``ascend_cluster_analyse_*``) -> exposed communication per step
  and the parallel layout (``cluster_analyse``).
* ``profiler_info_{dev}.json`` -> world size and MindSpore version.

Not read: ``gpu_timeline_display_{dev}.json`` and the ``*_execute_timestamp_{dev}.txt``
files, the per-launch timelines. Their gaps between kernels would give device idle
time per step, but by default (``sync_enable=True``) the GPU profiler waits for each
op's kernels before launching the next, so those gaps are partly the profiler's own;
no file records which mode was used, so no device-idle figure is derived (the host /
device idle checks are reported as not evaluated). ``gpu_framework_{dev}.txt`` holds
input shapes without dtypes. No GPU file names the device model, so the run's
``device_model`` stays unknown.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from advisor.collectors.mindinsight import cluster_analyse, communication, minddata
from advisor.collectors.mindinsight import layout as ascend_layout
from advisor.collectors.mindinsight import step_trace as ascend_steps
from advisor.collectors.mindinsight.meta import read_profiler_info
from advisor.collectors.mindspore_gpu import layout, operators, queues, step_trace
from advisor.collectors.protocol import Capabilities
from advisor.errors import InputError
from advisor.profile import Profile, RunMeta

#: Why the host / device idle checks are not evaluated on these folders (module doc).
IDLE_NOTE = ("device idle time per step is not derived from the MindSpore GPU timelines: with the "
             "profiler's default sync_enable=True each op waits for its kernels, so the gaps between "
             "kernels are partly the profiler's own")

#: ``discover`` and ``read`` only.
CAPABILITIES = Capabilities(label="MindSpore GPU profiler output(s)")


def discover(root: Path) -> list[Path]:
    """One anchor file per (folder, device id) of this layout under ``root``:
    ``root`` itself, then sub-folders a few levels deep (names only)."""
    root = Path(root)
    if root.is_file():
        return [root] if layout.anchor_id(root.name) is not None else []
    units: list[Path] = []
    for folder in ascend_layout.folders(root, 0):
        units.extend(layout.folder_anchors(folder))
    return units


def read(unit: Path) -> Profile:
    """Read one device (``unit`` is its anchor file) into a Profile.

    The step trace is required when present (unusable -> InputError; an
    unusable CSV falls back to the profiler's text file when that is
    there); the other files are optional (unusable -> ``profile.skip``).
    """
    unit = Path(unit)
    hit = layout.anchor_id(unit.name)
    if hit is None or not unit.is_file():
        raise InputError(unit, ascend_layout.not_a_file(unit) if hit else "not a MindSpore GPU profiler file")
    folder, dev = unit.parent, hit[1]
    # On GPU the files are named by get_rank() in an NCCL job, by the device id otherwise.
    rank = dev
    profile = Profile(meta=RunMeta(framework="mindspore", device="gpu", source_format="mindspore_gpu",
                                   source_path=str(folder), ranks=[rank], time_unit="us"))
    read_profiler_info(profile, folder / ascend_layout.PROFILER_INFO_FILE.format(dev))
    frame = _step_frame(profile, folder, dev)
    if frame is not None:
        profile.steps = ascend_steps.steps_table(frame, rank)
    cluster_analyse.apply(profile, folder, dev, rank)  # gpu_cluster_analyse_*: exposed communication, layout
    try:
        profile.data_ops = minddata.data_ops(profile, folder, dev, rank)
    except InputError as exc:
        profile.skip(exc.path, exc.problem)
    profile.data_queue = queues.data_queue(profile, folder, dev, rank)  # skips what it cannot read
    profile.ops = operators.ops(profile, folder, dev, rank)  # likewise
    profile.comm = communication.comm_table(profile, frame, None, rank)
    if not any(profile.table(t) is not None for t in ("steps", "data_ops", "data_queue", "ops")):
        if profile.skipped:  # nothing left: the first file that could not be read is the error
            raise InputError(profile.skipped[0].what, profile.skipped[0].reason)
        raise InputError(folder, f"no usable MindSpore GPU profiler data for device {dev}")
    profile.meta.notes.append(IDLE_NOTE)
    if profile.steps is None:
        profile.meta.notes.append(f"no step trace for device {dev} (step_trace_raw_{dev}_detail_time.csv or "
                                  f"step_trace_profiling_{dev}.txt): per-step times are not available")
    return profile


def _step_frame(profile: Profile, folder: Path, dev: int) -> pd.DataFrame | None:
    """The raw step frame from the CSV, else the text file (module doc)."""
    csv_path = folder / ascend_layout.STEP_TRACE_FILE.format(dev)
    txt_path = folder / layout.STEP_TRACE_TXT_FILE.format(dev)
    if csv_path.is_file():
        try:
            return step_trace.load_csv(csv_path)
        except InputError as exc:
            if not txt_path.is_file():
                raise
            profile.skip(exc.path, exc.problem + "; used " + txt_path.name)
    elif os.path.lexists(csv_path):
        raise InputError(csv_path, ascend_layout.not_a_file(csv_path))
    if txt_path.is_file():
        return step_trace.load_txt(txt_path)
    if os.path.lexists(txt_path):
        raise InputError(txt_path, ascend_layout.not_a_file(txt_path))
    return None
