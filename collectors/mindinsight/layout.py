"""Which files of the MindSpore / MindInsight ``profiler/`` layout make up
a rank, and which rank they are: file names only, never contents.

Every file is named by a rank id (the ``*_FILE`` templates); what each
holds is described in ``advisor.collectors.mindinsight.collector``. A
rank's unit is its first anchor file in ``_ANCHORS`` order.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from advisor.collectors.io.listing import best_per_id
from advisor.collectors.mindspore_gpu.layout import has_device as _gpu_device

# folder names that carry a rank (MindInsight r1.3 ``cluster_profiler/{rank}/profiler``)
from advisor.collectors.search import RANK_DIR as _RANK_DIR

STEP_TRACE_FILE = "step_trace_raw_{}_detail_time.csv"
PIPELINE_CSV_FILE = "minddata_pipeline_raw_{}.csv"
PIPELINE_JSON_FILE = "pipeline_profiling_{}.json"
DEVICE_QUEUE_FILE = "device_queue_profiling_{}.txt"
ITERATOR_FILE = "dataset_iterator_profiling_{}.txt"
AICPU_QUEUE_FILE = "minddata_aicpu_{}.txt"
OP_DETAIL_FILE = "aicore_intermediate_{}_detail.csv"
OP_COMPUTE_FILE = "output_op_compute_time_{}.txt"
FRAMEWORK_FILE = "framework_raw_{}.csv"
PROFILER_INFO_FILE = "profiler_info_{}.json"

#: File-name patterns that mark a folder as this layout, in anchor order:
#: the first one present for a rank id is that rank's unit.
_ANCHORS = (
    re.compile(r"^step_trace_raw_(\d+)_detail_time\.csv$"),
    re.compile(r"^minddata_pipeline_raw_(\d+)\.csv$"),
    re.compile(r"^pipeline_profiling_(\d+)\.json$"),
    re.compile(r"^aicore_intermediate_(\d+)_detail\.csv$"),
    re.compile(r"^framework_raw_(\d+)\.csv$"),
    re.compile(r"^device_queue_profiling_(\d+)\.txt$"),
    re.compile(r"^dataset_iterator_profiling_(\d+)\.txt$"),
    re.compile(r"^minddata_aicpu_(\d+)\.txt$"),
)
#: Folders never searched: other collectors' layouts and raw CANN data.
_SKIP_DIR = re.compile(r"(_ascend_pt|_ascend_ms)$|^(PROF_|JOB)|^(ASCEND_PROFILER_OUTPUT|FRAMEWORK_FILE)$")
_MAX_DEPTH = 4


def folders(folder: Path, depth: int):
    """``folder`` and its sub-folders (breadth first by depth), names only."""
    yield folder
    if depth >= _MAX_DEPTH:
        return
    try:
        subs = sorted(p for p in folder.iterdir() if p.is_dir() and not _SKIP_DIR.search(p.name))
    except OSError:
        return
    for sub in subs:
        yield from folders(sub, depth + 1)


def claims(path: Path) -> bool:
    """Whether the file ``path`` is an anchor of this layout: named as one,
    and not a file the MindSpore GPU layout shares (its device has GPU files)."""
    hit = anchor_id(path.name)
    return hit is not None and not _gpu_device(path.parent, hit[1])


def anchor_id(name: str) -> tuple[int, int] | None:
    """(anchor priority, rank id) when ``name`` is one of our file names."""
    for prio, pattern in enumerate(_ANCHORS):
        m = pattern.match(name)
        if m:
            return prio, int(m.group(1))
    return None


def folder_anchors(folder: Path) -> list[Path]:
    """The best anchor file of each rank id present in ``folder``
    (``listing.best_per_id``; a rank id whose files belong to the MindSpore
    GPU layout is left to it).

    A rank whose only anchors are not readable files (a dangling symlink, a
    folder with a file's name) still yields one, so that reading it fails
    with a message naming the file instead of the rank vanishing silently.
    """
    return best_per_id(folder, anchor_id, skip=lambda rid: _gpu_device(folder, rid))


def not_a_file(path: Path) -> str:
    """Why ``path`` (present by name) cannot be read as a file."""
    if path.is_symlink() and not path.exists():
        return "dangling symbolic link (its target is missing)"
    if path.is_dir():
        return "is a folder, not a file"
    return "not a readable regular file"


def _ids_in(folder: Path) -> set[int]:
    """All rank ids named by this layout's files in ``folder``."""
    try:
        return {h[1] for p in folder.iterdir() if (h := anchor_id(p.name))}
    except OSError:
        return set()


def rank_of(folder: Path, file_id: int) -> int:
    """The rank of ``file_id`` in ``folder``.

    The id in the file names is the rank id (MindSpore >= 1.3 on Ascend).
    The MindInsight r1.3 cluster layout ``{rank}/profiler/..._0...`` names
    files by device id instead; there the rank folder wins when the folder
    holds a single id and the rank folder has rank-folder siblings. The
    folder names are looked at first: a folder of thousands of ranks' files
    is then never listed once per rank.
    """
    named = [(cand, m) for cand in (folder, folder.parent) if (m := _RANK_DIR.match(cand.name))]
    if not named or len(_ids_in(folder)) != 1:
        return file_id
    for cand, m in named:
        if _has_rank_sibling(cand):
            return int(m.group(1))
    return file_id


def _has_rank_sibling(folder: Path) -> bool:
    """Whether another sub-folder of ``folder``'s parent is named like a rank
    folder (stops at the first: a cluster holds thousands)."""
    try:
        with os.scandir(folder.parent) as entries:
            return any(e.name != folder.name and _RANK_DIR.match(e.name) and e.is_dir() for e in entries)
    except OSError:
        return False

