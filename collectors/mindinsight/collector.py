"""MindSpore / MindInsight profiler folder (the ``profiler/`` layout) -> Profile.

This is the layout MindSpore 1.x-2.2 wrote next to the raw CANN data and
MindInsight read: flat files named by rank id in one folder.

``step_trace_raw_{rank}_detail_time.csv``  (required when present)
    One row per step: ``step_num, start_point, end_point, total, fp_point,
    bp_point, iteration_interval, fp_and_bp, tail`` then, per all-reduce
    caught by the step-trace points, ``stream_{s}_{i}_{op}`` (duration),
    ``..._start_point`` and ``..._end_point``. All values are Ascend
    system-counter ticks of **10 ns** (MindInsight ``PER_MS_SYSCNT = 100000``,
    "one sys count takes 10 ns"; MindSpore 2.x writes msprof milliseconds
    times ``1e5``), so microseconds = value / 100. The last row is an
    average row with ``step_num`` = ``-`` (older releases: ``0``); it is
    dropped. Inference runs have no ``bp_point``/``tail`` and name the
    forward time ``fp``. Reduce columns of Receive operators give the
    pipeline wait (``step_trace``).

``minddata_pipeline_raw_{rank}.csv`` / ``pipeline_profiling_{rank}.json``
    The dataset pipeline: per op its type, workers, output connector queue
    (samples of its size and its capacity) and tree links.

``device_queue_profiling_{rank}.txt`` / ``dataset_iterator_profiling_{rank}.txt``
    Lines ``type extra batch value [timestamp_ms]``; type 1 records the
    size (``value``) and capacity (``extra``) of the host connector that
    feeds the device (MindInsight's "host queue"); type 0 records times.

``minddata_aicpu_{rank}.txt``
    ``GetNext_dequeue_wait start_us end_us queue_size``: the size of the
    on-device data queue each time the network takes a batch (MindInsight's
    "data queue" / device queue).

``aicore_intermediate_{rank}_detail.csv`` (+ ``framework_raw_{rank}.csv``,
``output_op_compute_time_{rank}.txt``)
    Per-operator average AI Core time; the framework file adds the type and
    ``op_info`` JSON with each input's ``data_type`` and ``shape``.

``ascend_cluster_analyse_{mode}_{stages}_{rank_size}_{rank}.csv``
    Per step: computation, communication alone, and in pipeline-parallel
    runs stage time, receive alone, collective communication alone; the
    name gives the parallel layout (``cluster_analyse``).

``hccl_raw_{rank}.csv``
    Per step and link (src-dst, SDMA/RDMA): time, size, bandwidth; per
    communication operator its transfer and wait time (``hccl_raw``).

``flops_summary_{rank}.json`` / ``flops_{rank}.txt``
    The FLOPs the rank executed (``flops``).

``memory_usage_summary_{rank}.json``
    Device memory capacity, peak and static memory of the rank's graphs
    (``memory_summary``).

The MindInsight r1.3 cluster folder (``cluster_profiler/{n}/profiler``
with ``hccl.json`` and ``host_ips_mapping.txt``) names files by device id:
``rank_table`` maps them to ranks and hosts.

Tables: ``steps`` (``step_trace``, ``cluster_analyse``), ``links``
(``hccl_raw``), ``flops`` (``flops``), ``memory_summary``
(``memory_summary``), ``data_ops`` (``minddata``),
``data_queue`` (``queues``), ``ops`` (``operators``), ``comm``
(``communication``); which files make up a rank: ``layout``; run
metadata: ``meta``. ``examples/README.md`` describes the example profiles
built in these formats.
"""

from __future__ import annotations

import os
from pathlib import Path

from advisor.collectors.mindinsight import (
    cluster_analyse,
    communication,
    flops,
    hccl_raw,
    layout,
    memory_summary,
    minddata,
    operators,
    queues,
    rank_table,
    step_trace,
)
from advisor.collectors.mindinsight.meta import read_profiler_info
from advisor.collectors.protocol import Capabilities
from advisor.errors import InputError
from advisor.profile import Profile, RunMeta

#: ``discover`` and ``read`` only.
CAPABILITIES = Capabilities(label="MindInsight profiler output(s)")


def discover(root: Path) -> list[Path]:
    """One anchor file per (folder, rank id) of this layout under ``root``.

    Looks at names only: ``root`` itself, then sub-folders up to a few
    levels deep (skipping ``*_ascend_pt``/``*_ascend_ms``/``PROF_*``).
    """
    root = Path(root)
    if root.is_file():
        return [root] if layout.claims(root) else []
    units: list[Path] = []
    for folder in layout.folders(root, 0):
        units.extend(layout.folder_anchors(folder))
    return units


def read(unit: Path) -> Profile:
    """Read one rank (``unit`` is that rank's anchor file) into a Profile.

    The step trace is required when present (unusable -> InputError); the
    other files are optional (unusable -> ``profile.skip``). A unit whose
    files all fail raises the first error.
    """
    unit = Path(unit)
    hit = layout.anchor_id(unit.name)
    if hit is None:
        raise InputError(unit, "not a MindSpore/MindInsight profiler file")
    if not unit.is_file():
        raise InputError(unit, layout.not_a_file(unit))
    folder, fid = unit.parent, hit[1]
    placed = rank_table.lookup(folder, fid)
    rank = placed[0] if placed else layout.rank_of(folder, fid)
    meta = RunMeta(
        framework="mindspore",
        device="ascend",
        source_format="mindinsight",
        source_path=str(folder),
        ranks=[rank],
        time_unit="us",
        hosts={rank: placed[1]} if placed else {},
    )
    profile = Profile(meta=meta)
    read_profiler_info(profile, folder / layout.PROFILER_INFO_FILE.format(fid))
    step_file = folder / layout.STEP_TRACE_FILE.format(fid)
    failures: list[InputError] = []
    step_frame = None
    if step_file.is_file():
        step_frame = step_trace.load(step_file)  # required: errors propagate
        profile.steps = step_trace.steps_table(step_frame, rank)
    elif os.path.lexists(step_file):
        raise InputError(step_file, layout.not_a_file(step_file))
    framework = operators.framework_ops(profile, folder, fid)
    readers = (
        ("data_ops", minddata.data_ops),
        ("data_queue", queues.data_queue),
        ("ops", lambda p, f, i, r: operators.ops(p, f, i, r, framework)),
    )
    for name, fn in readers:
        try:
            table = fn(profile, folder, fid, rank)
        except InputError as exc:
            failures.append(exc)
            profile.skip(exc.path, exc.problem)
            continue
        if table is not None and len(table):
            setattr(profile, name, table)
    cluster_analyse.apply(profile, folder, fid, rank)
    hccl = _hccl(profile, folder / hccl_raw.FILE.format(fid), rank)
    waits = hccl_raw.operator_rows(hccl, rank) if hccl else None
    profile.comm = communication.comm_table(profile, step_frame, framework, rank, waits)
    profile.links = hccl_raw.links_table(hccl, rank) if hccl else None
    profile.flops = flops.flops_table(profile, folder, fid, rank)
    profile.memory_summary = memory_summary.summary_table(profile, folder, fid, rank)
    if not any(profile.table(t) is not None for t in ("steps", "data_ops", "data_queue", "ops", "links")):
        if failures:
            raise failures[0]
        raise InputError(folder, f"no usable MindSpore profiler data for rank id {fid}")
    return profile


def _hccl(profile: Profile, path: Path, rank: int) -> list[dict] | None:
    """The step rows of ``hccl_raw`` (None when absent; unusable -> skip)."""
    if not path.is_file():
        return None
    try:
        return hccl_raw.load(path)
    except InputError as exc:
        profile.skip(exc.path, exc.problem)
        return None
