"""PyTorch memory timelines (raw ``export_memory_timeline`` events) -> Profile.

Inputs
------
A file written by ``prof.export_memory_timeline(path, device)`` with a path
ending ``.raw.json.gz`` (``MemoryProfileTimeline.export_memory_timeline_raw``;
the format is described in :mod:`advisor.collectors.memory.timeline`), also
when renamed ``*.raw.gz``, ``*.json`` or ``*.json.gz``; or a folder holding
such files directly. ``discover`` reads the first few KB of each candidate
and claims only content that starts a list of ``[time, action, bytes,
category]`` integer events, so Kineto traces (JSON objects) and the
timeline's plot export (``[times, sizes]``) are never claimed.

Output
------
One rank per file: the number in a file name such as ``rank1.raw.json.gz``
(as for Kineto traces), else 0 (the timeline itself names no rank; of
several files claiming one rank the engine keeps the first and notes the
others). The ``memory`` table holds every
event; there is no ``steps`` table: a memory timeline records when memory
was allocated and freed, not where time went, so no timing check applies
(the verdict says so). ``meta.device`` is unknown (the file names no
device), ``meta.framework`` pytorch, ``meta.source_format``
``memory_timeline``.
"""

from __future__ import annotations

from pathlib import Path

from advisor.collectors.kineto.collector import _RANK_IN_NAME as RANK_IN_NAME
from advisor.collectors.memory import timeline
from advisor.collectors.protocol import Capabilities
from advisor.errors import InputError
from advisor.profile import Profile, RunMeta

#: ``discover`` and ``read`` only.
CAPABILITIES = Capabilities(label="PyTorch memory timeline(s)")
#: ``meta.source_format`` of a profile read from a memory timeline.
SOURCE_FORMAT = "memory_timeline"
#: File names a timeline may have.
SUFFIXES = (".raw.gz", ".json", ".json.gz")


def _candidate(path: Path) -> bool:
    return path.name.endswith(SUFFIXES) and not path.name.startswith(".")


def looks_like_timeline(path: Path) -> bool:
    """A candidate name whose first bytes start a list of raw timeline events."""
    try:
        if not _candidate(path) or not path.is_file():
            return False
    except OSError:
        return False
    return timeline.head_is_timeline(timeline.head(path))


def discover(root: Path) -> list[Path]:
    """``root`` when it is a memory timeline, else the timelines directly in
    the folder ``root`` (sorted); [] otherwise."""
    root = Path(root)
    try:
        if root.is_file():
            return [root] if looks_like_timeline(root) else []
        if not root.is_dir():
            return []
        return sorted(p for p in root.iterdir() if looks_like_timeline(p))
    except OSError:
        return []


def _rank(unit: Path) -> int:
    """The rank a number in the file name gives (``rank-1``, ``rank_1``,
    ``rank1``: the Kineto collector's rule), else 0."""
    m = RANK_IN_NAME.search(unit.name)
    return int(m.group(1)) if m else 0


def read(unit: Path) -> Profile:
    """One memory timeline -> a Profile with a ``memory`` table; InputError
    (one line, naming the file) when the content is not one."""
    unit = Path(unit)
    events = timeline.read_events(unit)
    if not (events[:, 1] != 1).any():
        raise InputError(unit, "memory timeline holds only pre-existing memory: nothing was recorded")
    rank = _rank(unit)
    meta = RunMeta(framework="pytorch", device="unknown", source_format=SOURCE_FORMAT,
                   source_path=str(unit), ranks=[rank],
                   notes=["a PyTorch memory timeline (export_memory_timeline raw events of one "
                                  "device): it records memory, not time, so no timing check applies"])
    return Profile(meta=meta, memory=timeline.table(events, rank))
