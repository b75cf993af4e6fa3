"""Which files of a MindSpore GPU ``profiler/`` folder make up a device,
and which device they are: file names only, never contents.

MindSpore's GPU profiler (CUPTI) writes flat files named by device id into
``{output_path}/profiler/`` (``GpuDataSaver`` in
``mindspore/ccsrc/plugin/device/gpu/hal/profiler/gpu_data_saver.cc``,
``Profiler._gpu_analyse`` in ``mindspore/python/mindspore/profiler/
profiling.py``). In a multi-card job every process writes into the same
folder and names its files by ``get_rank()``, so one folder may hold
several devices. A device's unit is its first anchor file in ``_ANCHORS``
order; only the GPU-specific names are anchors, so a folder of Ascend
MindInsight files (which shares the step-trace and MindData names) is
never taken for a GPU one.
"""

from __future__ import annotations

import re
from pathlib import Path

from advisor.collectors.io import listing

OP_DETAIL_FILE = "gpu_op_detail_info_{}.csv"
OP_TYPE_FILE = "gpu_op_type_info_{}.csv"
ACTIVITY_FILE = "gpu_activity_data_{}.csv"
STEP_TRACE_TXT_FILE = "step_trace_profiling_{}.txt"
TIMELINE_FILE = "gpu_timeline_display_{}.json"
GETNEXT_FILE = "minddata_getnext_profiling_{}.txt"
CPU_OP_DETAIL_FILE = "cpu_op_detail_info_{}.csv"
CPU_OP_TYPE_FILE = "cpu_op_type_info_{}.csv"

#: The GPU-only files, in anchor order: any one marks a device of this layout.
_ANCHOR_FILES = (OP_DETAIL_FILE, ACTIVITY_FILE, OP_TYPE_FILE, STEP_TRACE_TXT_FILE, TIMELINE_FILE, GETNEXT_FILE)
#: One pattern for them all: the alternative that matches (its group) is the anchor priority.
_ANCHOR = re.compile("^(?:" + "|".join(re.escape(t).replace(r"\{\}", r"(\d+)") for t in _ANCHOR_FILES) + ")$")


def anchor_id(name: str) -> tuple[int, int] | None:
    """(anchor priority, device id) when ``name`` is one of our anchor names."""
    m = _ANCHOR.match(name)
    return None if m is None else (m.lastindex - 1, int(m.group(m.lastindex)))


def folder_anchors(folder: Path) -> list[Path]:
    """The best anchor file of each device id present in ``folder``
    (``listing.best_per_id``: a device whose only anchors are not readable
    files still yields one, so that reading it fails naming the file)."""
    return listing.best_per_id(folder, anchor_id)


def has_device(folder: Path, dev: int) -> bool:
    """Whether ``folder`` holds a GPU-layout file of device ``dev``: a few
    stats (or look-ups in a cached scan), no listing. The MindInsight reader
    asks it of every rank id it would claim, so that the step-trace and
    MindData files the two layouts share are not taken for an Ascend rank."""
    return any(listing.is_file(Path(folder) / template.format(dev)) for template in _ANCHOR_FILES)
