"""The cluster engine: read a run's rank units in parallel and merge them.

Each unit (one rank folder, one trace file, ...) is read on its own by the
collector that discovered it, in a worker process (``concurrent.futures``
process pool, ``jobs`` workers) or on an existing Dask cluster. Only the
per-rank Profile (summary tables) comes back, so memory grows with the
number of ranks, not with the number of raw events.

Decisions, applied the same way whichever way the units are read:

* Order: units are merged sorted by their lowest rank, then by discovery
  order, so the Profile is identical for any ``jobs`` and for Dask.
* A unit that cannot be read (InputError) becomes a ``skipped`` entry naming
  its file; the rest is analyzed. Only when no unit is readable is the first
  error raised.
* Two units that are the same files (a symlink, a repeated path) are read
  once. Two units claiming the same rank: the first (in that order) is kept
  and the other is left out, with a skip naming both paths -- merging them
  would double-count the rank's steps. A collector whose units may share a
  rank (``shared_ranks``: several Kineto traces of one rank are separate
  capture windows of it) keeps them all and says which (``rank_notes``),
  except a unit that numbers a step its rank already has: capture windows
  of one process never do, so it is another run of that rank (an A/B pair
  below one folder, a copied trace), left out with a skip and a note.
* Other formats in the same folder are not read (one format per run); the
  report says what they were, e.g. "also found 3 Kineto traces".
* Kernel files: above ``kernel_ranks`` units, a collector that can
  (``skips_kernels``) reads them on a sample of ranks only
  (``kernel_sample``): a spread, then (once every rank's steps are in) the
  few ranks slowest in compute; the report says on how many.

What a collector can do is what its ``CAPABILITIES`` declare
(``advisor.collectors.protocol``).
"""

from __future__ import annotations

import gc
import math
import multiprocessing
import os
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from advisor.collectors import protocol
from advisor.collectors.io import listing
from advisor.collectors.parallel import arrow_frames, kernel_sample
from advisor.errors import ConfigError, InputError, ReaderError
from advisor.profile import Profile, RunMeta
from advisor.runtime.cpus import usable_cpus
from advisor.runtime.forking import can_fork, parent_in_charge, sigint_held
from advisor.runtime.libc import release_free_memory

#: Seconds to wait for a Dask scheduler to answer before giving up.
DASK_CONNECT_TIMEOUT = 10


# ------------------------------------------------------------------ workers

def _nothing() -> None:
    """No work of the caller's beside the read."""


def read_one(module_name: str, unit: str, kernels: bool = True) -> tuple:
    """Read one unit in whatever process runs this: ("ok", Profile) or
    ("error", path, problem). Plain tuples pickle the same for a process
    pool and for Dask. A collector with ``arrow`` returns its tables in
    Arrow form (``arrow_frames``); ``_merge`` converts them.
    ``kernels=False``: leave the unit's kernel files out (``kernel_sample``;
    only asked of a collector that ``skips_kernels``)."""
    module, caps = protocol.load(module_name)
    if not kernels:
        return _guard(lambda: module.read_arrow(Path(unit), kernels=False))
    reader = module.read_arrow if caps.arrow else module.read
    return _guard(lambda: reader(Path(unit)))


def _guard(read) -> tuple:
    """("ok", ``read()``) or ("error", path, problem) for its InputError."""
    try:
        return ("ok", read())
    except InputError as exc:
        return ("error", exc.path, exc.problem)


def read_batch(module_name: str, units: list[str], no_kernels: frozenset[str] = frozenset()) -> list[tuple]:
    """``read_one`` for each of ``units`` (those in ``no_kernels`` without
    their kernel files); through the collector's ``read_arrow_batch`` when
    it reads in ``batch`` (same results, per-call costs shared by the batch)."""
    module, caps = protocol.load(module_name)
    if not caps.batch:
        return [read_one(module_name, unit, unit not in no_kernels) for unit in units]
    results = module.read_arrow_batch([Path(u) for u in units], kernels=[u not in no_kernels for u in units])
    return [("error", r.path, r.problem) if isinstance(r, InputError) else ("ok", r) for r in results]


@contextmanager
def _no_collection():
    """The garbage collector paused: a chunk allocates many small JSON
    objects and frees them all (no cycles to find), and each collection it
    sets off would walk everything the process holds."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_chunk(module_name: str, units: list[str], no_kernels: frozenset[str] = frozenset()) -> list[tuple]:
    """``read_batch`` of one chunk of units, the collector paused."""
    with _no_collection():
        return read_batch(module_name, units, no_kernels)


def read_many(module_name: str, units: list[str], no_kernels: frozenset[str] = frozenset()) -> tuple:
    """``read_chunk``, packed (``arrow_frames.pack``): one task per chunk of
    units keeps the pool's per-task and per-table costs (pickling,
    scheduling) off small ranks."""
    with _no_collection():
        return arrow_frames.pack(read_batch(module_name, units, no_kernels))


def _mp_context(module_name: str):
    """``fork`` where ``can_fork`` (cheap: the workers inherit the imported
    libraries), else ``forkserver`` with the collector preloaded (not on
    macOS), else ``spawn``."""
    if can_fork():
        return multiprocessing.get_context("fork")
    if "forkserver" in multiprocessing.get_all_start_methods() and sys.platform != "darwin":
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([__name__, module_name])  # no effect once the server runs
        return ctx
    return multiprocessing.get_context("spawn")


@contextmanager
def _progress(total: int):
    """The per-rank bar (``advisor.runtime.progress.bar``) when there are several
    units. Yields ``advance(n=1)``."""
    if total < 2:
        yield lambda n=1: None
        return
    from advisor.runtime.progress import bar

    done = 0
    with bar("reading ranks", total) as show:
        def advance(n: int = 1) -> None:
            nonlocal done
            done += n
            show(done)

        yield advance


#: Units per pool task: each task takes its share of the units left,
#: ``left / (jobs x TASKS_PER_WORKER)``, ``MAX_CHUNK`` at most and at least
#: ``1 / (jobs x MIN_SHARE_OF)`` of all units (one at least): guided
#: self-scheduling. Large tasks first amortize the per-task cost (pickling,
#: scheduling, a batch's shared work: ~4 ms, a small Ascend rank's read
#: ~1.2 ms), small ones last let the workers finish together instead of one
#: waiting on the other's last large task; the floor keeps a thousand small
#: ranks from ending in a tail of one-unit tasks, while a few large units
#: (eight traces) still go out one by one.
TASKS_PER_WORKER = 2
MAX_CHUNK = 128
MIN_SHARE_OF = 32


def _chunks(units: list[str], jobs: int) -> list[list[str]]:
    """Consecutive chunks of ``units`` for ``jobs`` workers, shrinking (above)."""
    out, at = [], 0
    least = max(1, len(units) // (jobs * MIN_SHARE_OF))
    while at < len(units):
        size = max(least, min(MAX_CHUNK, math.ceil((len(units) - at) / (jobs * TASKS_PER_WORKER))))
        out.append(units[at:at + size])
        at += size
    return out


class _LocalReads:
    """Reads units in this process (``jobs`` 1, or a single unit) or on a
    process pool made at the first read that needs one and kept until the
    ``with`` block ends: a read's second pass (``_read_slowest``) runs on
    the workers of the first instead of forking new ones."""

    def __init__(self, module_name: str, jobs: int):
        self.module_name = module_name
        self.jobs = jobs
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> _LocalReads:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if self._pool is not None:  # on a failure or Ctrl-C: drop the queued chunks, finish the ones under way
            self._pool.shutdown(wait=True, cancel_futures=exc is not None)

    def run(self, units: list[str], advance, no_kernels: frozenset[str], meanwhile=_nothing) -> list[tuple]:
        module, caps = protocol.load(self.module_name)
        if self.jobs == 1 or len(units) == 1:
            with sigint_held():  # read in this process: nothing runs beside it
                meanwhile()
            if len(units) == 1 and self.jobs > 1 and caps.splits_unit:
                # one unit, several cores: the collector may spread its read over them
                out = [_guard(lambda: module.read_alone(Path(units[0]), self.jobs))]
                advance(1)
                return out
            out = []
            for chunk in _chunks(units, 1):
                out.extend(read_chunk(self.module_name, chunk, no_kernels & set(chunk)))
                advance(len(chunk))
            return out
        chunks = _chunks(units, self.jobs)
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=min(self.jobs, len(chunks)),
                                             mp_context=_mp_context(self.module_name),
                                             initializer=parent_in_charge)
        results: list[list[tuple] | None] = [None] * len(chunks)
        try:
            with sigint_held():
                index = {self._pool.submit(read_many, self.module_name, chunk, no_kernels & set(chunk)): i
                         for i, chunk in enumerate(chunks)}
                meanwhile()
            for future in as_completed(index):
                i = index[future]
                results[i] = arrow_frames.unpack(future.result())
                advance(len(chunks[i]))
        except BrokenProcessPool:
            raise ReaderError(
                "a reader process died or could not start (killed for memory? a script calling advisor "
                "needs `if __name__ == \"__main__\":` where processes cannot fork); -j 1 / jobs=1 reads "
                "in this process") from None
        return [r for chunk in results for r in chunk]  # type: ignore[union-attr]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]


def _probe(address: str) -> None:
    """Fail fast, in one line, on a malformed address or a closed TCP port
    (the Dask client would retry until its timeout, then log a traceback)."""
    import socket

    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, loc = parse_address(address)
        if scheme != "tcp":
            return  # tls://, ucx://, inproc://: let the client handle them
        host, port = parse_host_port(loc, default_port=8786)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"--dask {address}: not a scheduler address ({_one_line(exc)})") from None
    try:
        socket.create_connection((host, port), timeout=DASK_CONNECT_TIMEOUT).close()
    except OSError as exc:
        raise ConfigError(f"--dask {address}: cannot connect to a Dask scheduler "
                          f"({exc.strerror or _one_line(exc)})") from None


def _run_dask(address: str, module_name: str, units: list[str], advance,
              no_kernels: frozenset[str], meanwhile=_nothing) -> list[tuple]:
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError:
        raise ConfigError("--dask needs the 'distributed' package: pip install 'advisor[dask]'") from None
    _probe(address)
    try:
        client = Client(address, timeout=DASK_CONNECT_TIMEOUT, set_as_default=False)
    except Exception as exc:  # noqa: BLE001 -- OSError, TimeoutError, ValueError for a bad address
        raise ConfigError(f"--dask {address}: cannot connect to a Dask scheduler ({_one_line(exc)})") from None
    try:
        futures = client.map(read_one, [module_name] * len(units), units,
                             [u not in no_kernels for u in units], pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        with sigint_held():
            meanwhile()
        results: list[tuple | None] = [None] * len(units)
        for future in dask_completed(futures, loop=client.loop):
            results[index[future.key]] = client.gather(future)
            advance()
        return results  # type: ignore[return-value]
    finally:
        client.close()


# ------------------------------------------------------------------- merge

def _dedupe_paths(units: list[Path]) -> tuple[list[str], list[tuple[str, str]]]:
    """Units with distinct real paths (symlinks resolved) + skips for repeats."""
    seen: dict[str, str] = {}
    keep: list[str] = []
    skips: list[tuple[str, str]] = []
    for unit, real in zip(units, listing.real_paths(units)):  # never raises on symlink loops
        if real in seen:
            skips.append((str(unit), f"same files as {seen[real]} (symlink or repeated path); read once"))
            continue
        seen[real] = str(unit)
        keep.append(str(unit))
    return keep, skips


def _rank_key(item: tuple[int, str, Profile]) -> tuple:
    index, _, profile = item
    ranks = profile.meta.ranks
    return (min(ranks) if ranks else math.inf, index)


def _drop_duplicate_ranks(module_name: str, parts: list[tuple[int, str, Profile]]):
    """(kept parts, skips) -- see the module docstring."""
    if protocol.load(module_name)[1].shared_ranks:
        return _drop_repeated_steps(parts)
    owner: dict[int, str] = {}
    kept, skips = [], []
    for item in parts:
        _, unit, profile = item
        clash = [r for r in profile.meta.ranks if r in owner]
        if clash:
            skips.append((unit, f"claims rank {clash[0]}, already read from {owner[clash[0]]}; "
                                "kept the first, this duplicate is left out"))
            continue
        for r in profile.meta.ranks:
            owner[r] = unit
        kept.append(item)
    return kept, skips


#: The run note for the units ``_drop_repeated_steps`` leaves out (the skips name them).
REPEATED_STEPS_NOTE = ("{} trace file(s) repeat steps of a rank already read from another file: other runs of "
                       "that rank, left out (the report's skipped list names them)")


def _drop_repeated_steps(parts: list[tuple[int, str, Profile]]):
    """(kept parts, skips) of a collector whose units may share a rank:
    capture windows of one rank never number a step twice, so a unit that
    repeats a step already read for its rank is another run of that rank
    (an A/B pair of one job's rank 1 below one folder, a copied trace) and
    is left out, with a skip naming both paths; merged, the two runs'
    steps would be counted twice."""
    units_of = Counter(r for _, _, profile in parts for r in profile.meta.ranks)
    owner: dict[tuple[int, int], str] = {}
    kept, skips = [], []
    for item in parts:
        _, unit, profile = item
        shared = any(units_of[r] > 1 for r in profile.meta.ranks)
        keys = _step_keys(profile) if shared else set()  # a rank read from one unit alone repeats nothing
        clash = sorted(k for k in keys if k in owner)
        if clash:
            rank, steps = clash[0][0], sorted({s for r, s in clash if r == clash[0][0]})
            shown = f"{steps[0]}" if len(steps) == 1 else f"{steps[0]}-{steps[-1]}"
            skips.append((unit, f"repeats step(s) {shown} of rank {rank} already read from {owner[clash[0]]}: "
                                "another run of that rank, not a capture window of it, so it is left out "
                                "(advisor compare sets two runs side by side)"))
            continue
        owner.update((k, unit) for k in keys)
        kept.append(item)
    return kept, skips


def _step_keys(profile: Profile) -> set[tuple[int, int]]:
    """The (rank, step) pairs of a unit's numbered steps (pandas or Arrow)."""
    rank, step = _steps_column(profile, "rank"), _steps_column(profile, "step")
    if rank is None or step is None:
        return set()
    numbered = ~(np.isnan(rank) | np.isnan(step))
    return set(zip(rank[numbered].astype(np.int64).tolist(), step[numbered].astype(np.int64).tolist()))


def _steps_column(profile: Profile | None, name: str) -> np.ndarray | None:
    """Column ``name`` of a unit's steps (Arrow or pandas) as float64, NaN
    where it has no value; None without steps or without that column."""
    steps = None if profile is None else profile.steps
    if steps is None or len(steps) == 0:
        return None
    if arrow_frames.is_arrow(steps):
        table = steps.resolve() if isinstance(steps, arrow_frames.Rows) else steps
        if name not in table.column_names:
            return None
        return table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
    if name not in steps.columns:
        return None
    return steps[name].to_numpy(dtype=np.float64, na_value=np.nan)


def read_units(module_name: str, root: Path, units: list[Path], *, jobs: int | None = None,
               dask_address: str | None = None, others: list[tuple[str, str]] = (),
               kernel_ranks: int | None = kernel_sample.DEFAULT_LIMIT, meanwhile=None) -> Profile:
    """Read ``units`` with collector ``module_name`` and merge them (see
    module doc). ``kernel_ranks``: read kernel files on at most this many
    units (None: on all). ``meanwhile``: called once in this process while
    the workers read (``advisor.collectors.load_profile``)."""
    if jobs is not None and jobs < 1:
        raise ConfigError(f"--jobs {jobs}: must be 1 or more")
    if kernel_ranks is not None and kernel_ranks < 1:
        raise ConfigError(f"--kernel-ranks {kernel_ranks}: must be 1 or more, or all")
    paths, skips = _dedupe_paths(units)
    no_kernels = _no_kernels(module_name, paths, kernel_ranks)
    meanwhile = meanwhile or _nothing

    with _LocalReads(module_name, jobs or usable_cpus()) as local:
        def run(units: list[str], advance, without_kernels: frozenset[str], meanwhile=_nothing) -> list[tuple]:
            if dask_address:
                return _run_dask(dask_address, module_name, units, advance, without_kernels, meanwhile)
            return local.run(units, advance, without_kernels, meanwhile)

        with _progress(len(paths)) as advance:
            results = run(paths, advance, no_kernels, meanwhile)
        slow = _read_slowest(run, paths, results, no_kernels, kernel_ranks)
    parts: list[tuple[int, str, Profile]] = []
    failures: list[InputError] = []
    for i, (unit, result) in enumerate(zip(paths, results)):
        if result[0] == "ok":
            parts.append((i, unit, result[1]))
        else:
            failures.append(InputError(result[1], result[2]))
    if not parts:
        raise failures[0]
    parts.sort(key=_rank_key)
    parts, dup_skips = _drop_duplicate_ranks(module_name, parts)
    kept = [Path(u) for _, u, _ in parts]
    units_read = [p for _, _, p in parts]
    del results, parts
    profile = _merge(units_read, root)
    del units_read
    release_free_memory()  # the units' own tables, merged and let go, leave holes the metrics would not fill
    module, caps = protocol.load(module_name)
    if caps.shared_ranks:
        profile.meta.notes.extend(n for n in module.rank_notes(kept) if n not in profile.meta.notes)
        if dup_skips:
            profile.meta.notes.append(REPEATED_STEPS_NOTE.format(len(dup_skips)))
    if no_kernels:
        ops = profile.table("ops")
        read = 0 if ops is None else int(ops["rank"].nunique())
        profile.meta.notes.append(kernel_sample.note(read, len(kept), kernel_ranks, slow))
    for exc in failures:
        profile.skip(exc.path, exc.problem)
    for what, reason in [*skips, *dup_skips, *others]:
        profile.skip(what, reason)
    return profile


def _no_kernels(module_name: str, paths: list[str], kernel_ranks: int | None) -> frozenset[str]:
    """The units whose kernel files are left out (``kernel_sample``): none
    unless the collector can leave them out (``skips_kernels``)."""
    if not protocol.load(module_name)[1].skips_kernels:
        return frozenset()
    return frozenset(u for u, read in zip(paths, kernel_sample.chosen(len(paths), kernel_ranks)) if not read)


def _read_slowest(run, paths: list[str], results: list[tuple], no_kernels: frozenset[str],
                  kernel_ranks: int | None) -> int:
    """Read whole (``run``: as the others were read) the units outside the
    kernel sample that are slowest in compute (``kernel_sample.slowest``),
    in place of their reads without kernels in ``results``; how many were."""
    if not no_kernels:
        return 0
    profiles = [result[1] if result[0] == "ok" else None for result in results]
    compute = _median_computes(profiles)
    stages = [None if profile is None else next(iter(profile.meta.stages.values()), None) for profile in profiles]
    picked = kernel_sample.slowest(compute, stages, [u not in no_kernels for u in paths], kernel_ranks)
    if not picked:
        return 0
    read = 0
    for i, result in zip(picked, run([paths[i] for i in picked], lambda n=1: None, frozenset())):
        if result[0] == "ok":  # else the read without kernels stands
            results[i] = result
            read += 1
    return read


def _median_computes(profiles: list[Profile | None]) -> list[float]:
    """The median of each unit's ``computing_us`` over its steps, NaN
    without them. Units of one worker chunk share a packed table
    (``arrow_frames.Rows``): its column is converted once and sliced."""
    packed: dict[int, np.ndarray] = {}
    out = []
    for profile in profiles:
        steps = None if profile is None else profile.steps
        if isinstance(steps, arrow_frames.Rows) and "computing_us" in steps.columns:
            whole = packed.get(id(steps.table))
            if whole is None:
                column = steps.table.column("computing_us").to_numpy(zero_copy_only=False)
                whole = packed[id(steps.table)] = column.astype(np.float64)
            values = whole[steps.offset:steps.offset + steps.count]
        else:
            values = _steps_column(profile, "computing_us")
        values = values[~np.isnan(values)] if values is not None else np.empty(0)
        out.append(float(np.median(values)) if values.size else math.nan)
    return out


def _merge(parts: list[Profile], root: Path) -> Profile:
    first = parts[0].meta
    known = next((p.meta for p in parts if p.meta.framework != "unknown"), first)
    modelled = next((p.meta for p in parts if p.meta.device_model or p.meta.compute_capability), first)
    meta = RunMeta(
        framework=known.framework,
        device=first.device,
        device_model=modelled.device_model,
        compute_capability=modelled.compute_capability,
        cpu=next((p.meta.cpu for p in parts if p.meta.cpu), None),
        source_format=first.source_format,
        source_version=first.source_version,
        source_path=str(root),
        world_size=max((p.meta.world_size or 0 for p in parts), default=0) or None,
        parallel=next((p.meta.parallel for p in parts if p.meta.parallel), {}),
    )
    if len(parts) > 1:
        profile = arrow_frames.merge(parts, meta)
    else:
        profile = arrow_frames.profile_to_pandas(parts[0])
    profile.meta.source_path = str(root)
    return profile


# ----------------------------------------------------------- other formats

class _Chosen:
    """The chosen units' real paths, for "is this path one of them, inside
    one, or above one" in time proportional to the path's depth."""

    def __init__(self, units: list[Path]):
        self.paths = {os.path.realpath(u) for u in units}
        self.above = {a for p in self.paths for a in _ancestors(p)}

    def overlaps(self, path: str) -> bool:
        real = os.path.realpath(path)
        return real in self.paths or real in self.above or any(a in self.paths for a in _ancestors(real))


def _ancestors(path: str) -> list[str]:
    """Every folder above ``path`` (an absolute real path), nearest first."""
    out = []
    parent = os.path.dirname(path)
    while parent and parent != path:
        out.append(parent)
        path, parent = parent, os.path.dirname(parent)
    return out


def other_formats(root: Path, units: list[Path], others) -> list[tuple[str, str]]:
    """Skips naming what the other collectors (``others``, an iterable of
    modules, gone through only when ``root`` holds something beside the
    units) would have found next to the chosen units (files or folders
    directly under ``root``)."""
    if not Path(root).is_dir():
        return []
    named = {str(u) for u in units}  # the common case, a child that is a unit itself: no path resolved
    try:
        children = sorted(c for c in Path(root).iterdir() if str(c) not in named)  # the few others, sorted
    except OSError:
        return []
    if not children:
        return []
    chosen = _Chosen(units)
    children = [c for c in children if not chosen.overlaps(c)]
    if not children:
        return []
    out = []
    for module in others:
        found: set[str] = set()
        for child in children:
            try:
                hits = module.discover(child)
            except (OSError, RuntimeError, RecursionError):
                continue
            found.update(os.path.realpath(h) for h in hits if not chosen.overlaps(h))
        if found:
            label = protocol.check(module).label
            out.append((str(root), f"also found {len(found)} {label}; not read: one format per run"))
    return out


__all__ = ["read_units", "read_one", "other_formats"]
