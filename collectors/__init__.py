"""Collectors: detect a profiler's output layout and read it into a Profile.

Each collector module exposes two functions:

``discover(root: Path) -> list[Path]``
    The rank units under ``root`` that this collector reads (``root``
    itself when it is one): an ``*_ascend_pt`` folder, a Kineto trace file,
    an msprof ``cluster_analysis_output`` folder, ... Returns [] when the
    layout is not this collector's. Must be cheap (names, not contents).

``read(unit: Path) -> Profile``
    One unit -> a Profile whose tables carry a ``rank`` column. Raises
    ``InputError`` when the unit is unusable; records partial problems with
    ``Profile.skip``. Never writes anything under ``unit``.

``load_profile`` picks the first collector (in ``COLLECTORS`` order) that
finds units and reads every unit; the cluster engine (``advisor.collectors.parallel.rank_reader``)
reads them in parallel (process pool or Dask) and merges the per-rank
Profiles into one cluster Profile.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from advisor.collectors.parallel.kernel_sample import DEFAULT_LIMIT as KERNEL_RANKS
from advisor.errors import InputError
from advisor.profile import Profile

# Order matters: the most specific layouts first.
COLLECTORS = (
    "advisor.collectors.ascend.collector",
    "advisor.collectors.mindinsight.collector",
    "advisor.collectors.kineto.collector",
)


def _modules():
    for name in COLLECTORS:
        try:
            yield importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a collector not yet shipped
            if exc.name != name:
                raise


def load_profile(path: str | Path, *, jobs: int | None = None, dask_address: str | None = None,
                 meanwhile: Callable[[], None] | None = None,
                 kernel_ranks: int | None = KERNEL_RANKS) -> Profile:
    """Read whatever profiler output is at ``path`` into one Profile.

    ``jobs``: worker processes for reading rank units (default: the CPUs
    this process may use, ``advisor.runtime.cpus``; 1, or a single unit, reads in
    this process). ``dask_address``: read the
    units on an existing Dask cluster instead (``tcp://host:8786``). Results
    are identical, and in the same rank order, whichever way they are read.
    ``meanwhile``: work for this process while the units are read (called
    once, after they are handed out; its exception stops the read).
    ``kernel_ranks``: read kernel files on at most this many ranks (None:
    every rank; see ``advisor.collectors.parallel.kernel_sample``).
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
    modules = list(_modules())
    for module in modules:
        units = module.discover(root)
        if not units:
            continue
        others = engine.other_formats(root, units, [m for m in modules if m is not module])
        return engine.read_units(module.__name__, root, units, jobs=jobs,
                                 dask_address=dask_address, others=others, meanwhile=meanwhile,
                                 kernel_ranks=kernel_ranks)
    raise InputError(
        root,
        "no profiler output found (expected *_ascend_pt / *_ascend_ms folders, "
        "ASCEND_PROFILER_OUTPUT/, cluster_analysis_output/, MindInsight "
        "profiler files, or *.pt.trace.json[.gz] traces)",
    )
