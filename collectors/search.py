"""Profiles below a parent folder that no collector recognises itself.

``advisor report runs/`` where ``runs/job_a/prof/*_ascend_pt`` lies deeper
than a collector looks: the folders below are searched, shallowest first,
and each collector's ``discover`` is asked about each folder in turn; a
folder where one answers holds a profile (or several, see ``separate``) and
is not searched further. ``separate`` also tells apart the runs a collector
finds at once in a folder it does recognise (six example runs side by
side): several runs are listed, never merged as the ranks of one.

Bounds: folders at most ``MAX_DEPTH`` levels below the given one are asked,
and the tree below it is listed only while it holds at most ``MAX_ENTRIES``
entries (files and folders; a larger tree is refused, as every ``discover``
call would walk it again). Hidden folders are skipped, symbolic links to
folders are never entered, and units a collector finds through a link that
leads outside the given folder are dropped.
"""

from __future__ import annotations

import filecmp
import os
import re
from dataclasses import dataclass
from pathlib import Path

from advisor.collectors.io import listing
from advisor.errors import InputError

#: Folder levels below the given folder that are searched.
MAX_DEPTH = 6
#: Entries (files and folders) the tree below the given folder may hold for
#: it to be searched at all.
MAX_ENTRIES = 50_000
#: A folder named for a rank (``rank3``, ``rank_3``, ``3``, as MindInsight
#: r1.3's ``cluster_profiler/{rank}/profiler``): same-named files in two of
#: them are two ranks of one run.
RANK_DIR = re.compile(r"^(?:rank[_-]?)?(\d+)$", re.IGNORECASE)
#: Places named in the error when several profiles are found.
MAX_LISTED = 4


@dataclass(frozen=True)
class Place:
    """Where a collector found a profile: the folder it was asked about, the
    folder the units share (what the user is told) and the units."""

    folder: Path
    shown: Path
    module: object
    units: list[Path]


def _subfolders(root: Path) -> list[list[Path]]:
    """The folders below ``root`` by level (level 1 first, down to
    ``MAX_DEPTH``); InputError when the tree holds more than ``MAX_ENTRIES``
    entries. Symbolic links and hidden folders are not entered."""
    levels: list[list[Path]] = []
    level, seen, depth = [root], 0, 0
    while level:
        below: list[Path] = []
        for folder in level:
            try:
                with os.scandir(folder) as it:
                    for entry in it:
                        seen += 1
                        if seen > MAX_ENTRIES:
                            raise InputError(root, f"no profiler output in this folder itself, and more than "
                                                   f"{MAX_ENTRIES} entries below it to search: give the "
                                                   "profile's own folder")
                        if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
                            below.append(Path(entry.path))
            except OSError:
                continue
        depth += 1
        if depth <= MAX_DEPTH and below:
            levels.append(sorted(below))
        level = below
    return levels


def _inside(units: list[Path], root: Path) -> list[Path]:
    """The units that resolve to a place inside ``root``."""
    real = root.resolve()
    return [u for u in units if Path(u).resolve().is_relative_to(real)]


def _shown(units: list[Path], folder: Path) -> Path:
    """The folder the units share (a single trace file: its folder)."""
    try:
        common = Path(os.path.commonpath([str(u) for u in units]))
    except ValueError:
        return folder
    return common.parent if common.is_file() else common


def _names_recur(folder: Path, units: list[Path]) -> bool:
    """Whether a unit's name recurs among ``units`` with no rank folder
    (``RANK_DIR``) on its path below ``folder`` to tell the two apart."""
    keys = [(u.name, tuple(p for p in u.relative_to(folder).parts[:-1] if RANK_DIR.match(p)))
            for u in units if u.is_relative_to(folder)]
    return len(set(keys)) < len(keys)


def _distinct(units: list[Path]) -> list[Path]:
    """``units`` without those reached again through a symbolic link (a
    folder linking to itself): of the paths to one file, the shortest."""
    first: dict[str, Path] = {}
    ordered = sorted(units, key=lambda u: str(u).count(os.sep))  # fewest parts first, as len(u.parts)
    for real, unit in zip(listing.real_paths(ordered), ordered):
        first.setdefault(real, unit)
    kept = set(first.values())
    return [u for u in units if u in kept]


def _copies(units: list[Path]) -> bool:
    """Whether every file name that recurs among ``units`` names
    byte-identical files: a copy of some of a run's files left beside it
    (the collector reports the repeated rank), not a second run."""
    by_name: dict[str, list[Path]] = {}
    for unit in units:
        by_name.setdefault(unit.name, []).append(unit)
    repeated = [paths for paths in by_name.values() if len(paths) > 1]
    return bool(repeated) and all(
        all(p.is_file() and filecmp.cmp(paths[0], p, shallow=False) for p in paths) for paths in repeated)


def separate(folder: Path, module, units: list[Path]) -> list[Place]:
    """The profiles among the units ``module`` found at ``folder``: one, or
    one per folder when the same file or folder name recurs among them
    without a rank folder (``RANK_DIR``) to tell the copies apart (two
    runs' ``profiler/step_trace_raw_0_detail_time.csv``: separate
    profiles; ``cluster_profiler/1/profiler`` and ``.../2/profiler``, or
    rank folders named apart: one run's ranks). A collector that can tell
    runs apart by what its files declare (``runs(units)``: Kineto traces
    without a rank, in two folders) splits them further."""
    units = _distinct([Path(u) for u in units])
    homes: dict[Path, list[Path]] = {}
    for unit in units:
        homes.setdefault(unit.parent, []).append(unit)
    if len(homes) >= 2 and _names_recur(folder, units) and not _copies(units):
        return [Place(home, _shown(found, home), module, found) for home, found in sorted(homes.items())]
    found = module.runs(units) if len(homes) >= 2 and hasattr(module, "runs") else [units]
    if len(found) > 1:
        return sorted((Place(_shown(run, folder), _shown(run, folder), module, run) for run in found),
                      key=lambda place: place.shown)
    return [Place(folder, _shown(units, folder), module, units)]


def places_below(root: Path, modules) -> list[Place]:
    """Every place below ``root`` where one of ``modules`` (collectors, most
    specific first) finds units, shallowest first."""
    places: list[Place] = []
    taken: list[Path] = []
    for level in _subfolders(root):
        for folder in level:
            if any(folder.is_relative_to(t) for t in taken):
                continue
            for module in modules:
                units = _inside(module.discover(folder), root)
                if units:
                    places.extend(separate(folder, module, units))
                    taken.append(folder)
                    break
    return places


def one_place_below(root: Path, modules) -> Place | None:
    """The one place below ``root`` holding a profile; None when there is
    none; InputError (``several``) when there are several."""
    places = places_below(root, modules)
    if len(places) > 1:
        raise several(root, places, "no profiler output in this folder itself, and")
    return places[0] if places else None


def several(root: Path, places: list[Place], lead: str) -> InputError:
    """The one-line error for several separate profiles at or below
    ``root``, listing up to ``MAX_LISTED`` of them relative to it for the
    user to pick one."""
    names = [os.path.relpath(p.shown, root) for p in places[:MAX_LISTED]]
    more = f" and {len(places) - MAX_LISTED} more" if len(places) > MAX_LISTED else ""
    return InputError(root, f"{lead} {len(places)} separate profiles below it: {', '.join(names)}{more}; "
                            "give one of them")
