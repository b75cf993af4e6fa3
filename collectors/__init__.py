"""Collectors: detect a profiler's output layout and read it into a Profile.

One subpackage per format (``ascend``, ``mindspore_gpu``, ``mindinsight``, ``kineto``,
``memory``; ``live`` records a run), each with a ``collector`` module that follows the contract
in ``advisor.collectors.protocol``. ``load_profile`` picks the first
collector (in ``collectors()`` order) that finds units and reads every
unit; the cluster engine (``advisor.collectors.parallel.rank_reader``)
reads them in parallel (process pool or Dask) and merges the per-rank
Profiles into one cluster Profile.

Importing this package is cheap (no pandas): ``advisor`` takes
``KERNEL_RANKS`` from it at import time, and the collectors load when a
profile is read.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.collectors.parallel.kernel_sample import DEFAULT_LIMIT as KERNEL_RANKS
from advisor.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from advisor.collectors.protocol import Collector
    from advisor.profile import Profile


#: The collector modules, the most specific layouts first.
COLLECTORS = ("advisor.collectors.ascend.collector", "advisor.collectors.mindspore_gpu.collector",
              "advisor.collectors.mindinsight.collector", "advisor.collectors.kineto.collector",
              "advisor.collectors.memory.collector")


def collectors() -> tuple[Collector, ...]:
    """The collector modules (``COLLECTORS``), imported."""
    return tuple(_imported_in_turn())


def _imported_in_turn(skip: str = "") -> Iterator[Collector]:
    """The collector modules but ``skip``, each imported when its turn
    comes: the first that finds the profile is often the first tried, and
    importing the others costs tens of milliseconds before the read."""
    for name in COLLECTORS:
        if name != skip:
            yield importlib.import_module(name)


def load_profile(path: str | Path, *, jobs: int | None = None, dask_address: str | None = None,
                 kernel_ranks: int | None = KERNEL_RANKS, meanwhile: Callable[[], object] | None = None) -> Profile:
    """Read whatever profiler output is at ``path`` into one Profile.

    ``jobs``: worker processes for reading rank units (default: the CPUs
    this process may use, ``advisor.runtime.cpus``; 1, or a single unit, reads in
    this process). ``dask_address``: read the
    units on an existing Dask cluster instead (``tcp://host:8786``). Results
    are identical, and in the same rank order, whichever way they are read.
    ``kernel_ranks``: read kernel files on at most this many ranks (None:
    every rank; see ``advisor.collectors.parallel.kernel_sample``).
    ``meanwhile``: the caller's own work, done in this process once while
    worker processes read (before reading when this process reads);
    what it raises ends the read.
    A folder no collector recognises is searched below
    (``advisor.collectors.search``): the one profile found there is read,
    and several are refused with a list to pick from; so are several
    separate runs a collector finds side by side in the folder given
    (``search.separate``), which are never merged as the ranks of one run.
    Raises InputError (one line, names the path) when nothing usable is
    there, ConfigError for an unusable ``jobs`` or Dask address.
    """
    from advisor.collectors.parallel import rank_reader as engine

    root = Path(path)
    if not root.exists():
        raise InputError(root, "no such file or folder")
    if root.is_dir():
        try:
            next(root.iterdir(), None)
        except OSError as exc:
            raise InputError(root, f"cannot list folder ({exc.strerror})") from None
    else:
        from advisor.collectors.io.files import check_regular

        check_regular(root)  # a FIFO or device given as the profile: never opened
    for module in _imported_in_turn():
        units = module.discover(root)
        if not units:
            continue
        if root.is_dir():
            from advisor.collectors.search import separate, several

            places = separate(root, module, units)
            if len(places) > 1:  # independent runs side by side, not the ranks of one
                raise several(root, places, "this folder holds")
        others = engine.other_formats(root, units, _imported_in_turn(skip=module.__name__))
        return engine.read_units(module.__name__, root, units, jobs=jobs,
                                 dask_address=dask_address, others=others, kernel_ranks=kernel_ranks,
                                 meanwhile=meanwhile)
    if root.is_dir():
        from advisor.collectors.search import one_place_below

        place = one_place_below(root, collectors())
        if place is not None:
            others = engine.other_formats(place.shown, place.units, _imported_in_turn(skip=place.module.__name__))
            profile = engine.read_units(place.module.__name__, place.shown, place.units, jobs=jobs,
                                        dask_address=dask_address, others=others,
                                        kernel_ranks=kernel_ranks, meanwhile=meanwhile)
            below = os.path.relpath(place.shown, root)
            profile.meta.notes.insert(0, f"read {below}, the one profile found below {root}")
            return profile
    raise InputError(
        root,
        "no profiler output found (expected *_ascend_pt / *_ascend_ms folders, "
        "ASCEND_PROFILER_OUTPUT/, cluster_analysis_output/, MindInsight "
        "or MindSpore GPU profiler files, *.pt.trace.json[.gz] traces, or PyTorch memory timelines)",
    )
