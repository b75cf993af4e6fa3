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
finds units, reads every unit, and merges them into one cluster Profile.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from advisor.errors import InputError
from advisor.profile import Profile, RunMeta, merge_profiles

# Order matters: the most specific layouts first.
COLLECTORS = (
    "advisor.collectors.ascend",
    "advisor.collectors.mindinsight",
    "advisor.collectors.kineto",
)


def _modules():
    for name in COLLECTORS:
        try:
            yield importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a collector not yet shipped
            if exc.name != name:
                raise


def load_profile(path: str | Path, *, jobs: int | None = None, dask_address: str | None = None) -> Profile:
    """Read whatever profiler output is at ``path`` into one Profile.

    ``jobs`` and ``dask_address`` choose how rank units are read (not yet
    parallel: every unit is read in this process). Raises InputError (one
    line, names the path) when nothing usable is there.
    """
    root = Path(path)
    if not root.exists():
        raise InputError(root, "no such file or folder")
    if root.is_dir():
        try:
            next(root.iterdir(), None)
        except OSError as exc:
            raise InputError(root, f"cannot list folder ({exc.strerror})") from None
    for module in _modules():
        units = module.discover(root)
        if not units:
            continue
        return _read_units(module, root, units)
    raise InputError(
        root,
        "no profiler output found (expected *_ascend_pt / *_ascend_ms folders, "
        "ASCEND_PROFILER_OUTPUT/, cluster_analysis_output/, MindInsight "
        "profiler files, or *.pt.trace.json[.gz] traces)",
    )


def _read_units(module, root: Path, units: list[Path]) -> Profile:
    parts: list[Profile] = []
    failures: list[InputError] = []
    for unit in units:
        try:
            parts.append(module.read(unit))
        except InputError as exc:
            failures.append(exc)
    if not parts:
        raise failures[0]
    first = parts[0].meta
    meta = RunMeta(
        framework=first.framework,
        device=first.device,
        source_format=first.source_format,
        source_version=first.source_version,
        source_path=str(root),
        world_size=max((p.meta.world_size or 0 for p in parts), default=0) or None,
        parallel=first.parallel,
    )
    profile = merge_profiles(parts, meta) if len(parts) > 1 else parts[0]
    profile.meta.source_path = str(root)
    for exc in failures:
        profile.skip(exc.path, exc.problem)
    return profile
