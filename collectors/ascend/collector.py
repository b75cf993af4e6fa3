"""Collector for Ascend PyTorch Profiler (torch_npu) and MindSpore Profiler text output.

Units it reads:

* a rank folder ``*_ascend_pt`` / ``*_ascend_ms`` (or any folder holding
  ``ASCEND_PROFILER_OUTPUT/``, or that folder itself);
* msprof-analyze's ``cluster_analysis_output/`` when no rank folders exist.

A parent folder of many rank folders yields all of them, sorted by rank.

Per rank, from ``ASCEND_PROFILER_OUTPUT/``: ``step_trace_time.csv`` ->
``steps``; ``kernel_details.csv`` -> ``ops`` (plus ``device_busy_us`` per
step), else ``op_statistic.csv``; ``communication.json`` -> ``comm`` and
``bandwidth``; ``communication_matrix.json`` -> ``links``; ``dataset.csv``
-> ``data_ops``; ``memory_record.csv`` (else ``operator_memory.csv``) ->
``memory_summary`` (``memory_record``); ``trace_view.json`` -> ``steps`` from
the Overlap Analysis lanes, only when ``step_trace_time.csv`` is absent. MindSpore CPU output
(``FRAMEWORK/cpu_op_*.csv``) fills ``ops`` when nothing better exists.
A rank read without its kernels (``kernel_sample``) gets no ``ops`` and no
``device_busy_us``, unless its steps have no other source.

Every file is optional on its own: a broken one is recorded with
``Profile.skip`` and the rest is read. The unit fails with InputError only
when nothing usable is left (naming the broken file when there was one).
Nothing is ever written under the input folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from advisor.collectors.ascend import comm as comm_io
from advisor.collectors.ascend import (
    comm_rollup,
    contention,
    dispatch,
    hccl_rows,
    hccl_tasks,
    host_calls,
    link_ranks,
    memory_record,
    tables,
)
from advisor.collectors.ascend import db as ascend_db
from advisor.collectors.ascend.meta import (
    add_groups,
    framework_from_files,
    framework_from_host_calls,
    framework_of,
    host_from_folder_name,
    pipeline_stage,
    rank_from_folder_name,
    rank_from_info_names,
    read_core_counts,
    read_meta,
)
from advisor.collectors.ascend.trace_view import Trace, decode_trace, hccl_operators, read_trace
from advisor.collectors.io import listing
from advisor.collectors.io.files import load_json
from advisor.collectors.parallel import arrow_frames, batch_tables
from advisor.collectors.parallel.batch_tables import PendingTable
from advisor.collectors.protocol import Capabilities
from advisor.errors import InputError
from advisor.profile import TABLES, Profile, RunMeta

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
#: Arrow tables, a chunk of ranks per call, and a rank without its kernel
#: files when the engine samples them (``kernel_sample``).
CAPABILITIES = Capabilities(label="Ascend profiler folder(s)", arrow=True, batch=True, skips_kernels=True)
CLUSTER_DIR = "cluster_analysis_output"
#: Files msprof-analyze ``cluster -m all`` writes that advisor reads
#: (``msprof_analyze/prof_common/constant.py``: CLUSTER_STEP_TIME_CSV,
#: CLUSTER_COMM_JSON, CLUSTER_COMMUNICATION_MATRIX_JSON); its
#: ``communication_group.json`` (each group's global ranks) is not needed:
#: the cluster files already name global ranks.
CLUSTER_FILES = ("cluster_step_trace_time.csv", "cluster_communication.json", "cluster_communication_matrix.json")
RANK_SUFFIXES = ("_ascend_pt", "_ascend_ms")
#: Files that make a bare folder an ASCEND_PROFILER_OUTPUT (users copy them around).
OUTPUT_FILES = (
    "step_trace_time.csv", "kernel_details.csv", "op_statistic.csv",
    "communication.json", "communication_matrix.json", "trace_view.json",
)


# ------------------------------------------------------------------ discover

_is_file = listing.is_file
_is_dir = listing.is_dir


def discover(root: Path) -> list[Path]:
    """Rank folders (sorted by rank) or a cluster_analysis_output folder under ``root``."""
    with listing.cached(root):
        return _discover(Path(root))


def _discover(root: Path) -> list[Path]:
    if _is_file(root) and root.name in OUTPUT_FILES:
        return [root.parent]
    if not _is_dir(root):
        return []
    if _is_rank_unit(root) or _is_cluster_output(root):
        return [root]
    ranks = _child_rank_folders(root)
    if ranks:
        return sorted(ranks, key=_rank_sort_key)
    cluster = root / CLUSTER_DIR
    if _is_cluster_output(cluster):
        return [cluster]
    return []


def _is_rank_unit(path: Path) -> bool:
    """A rank folder by name, an ASCEND_PROFILER_OUTPUT folder, or a folder holding one."""
    return (path.name.lower().endswith(RANK_SUFFIXES) or path.name == OUTPUT_DIR
            or _is_dir(path / OUTPUT_DIR) or _holds_output_files(path))


def _holds_output_files(path: Path) -> bool:
    """A bare folder holding ASCEND_PROFILER_OUTPUT files directly."""
    return any(_is_file(path / name) for name in OUTPUT_FILES)


def _is_cluster_output(path: Path) -> bool:
    """A folder with msprof-analyze cluster summary files."""
    return _is_dir(path) and any(_is_file(path / f) for f in CLUSTER_FILES)


#: How many folder levels below the given one rank folders are looked for:
#: copies gathered from several hosts nest them (job/host0/prof/*_ascend_pt).
MAX_RANK_DEPTH = 6


def _child_rank_folders(root: Path) -> list[Path]:
    """The rank folders at the shallowest level below ``root`` (down to
    ``MAX_RANK_DEPTH``) that has any: one run's ranks, side by side or in
    one folder per host, never mixed with a copy nested deeper. A rank
    folder is named ``*_ascend_pt|ms`` or holds ``ASCEND_PROFILER_OUTPUT/``
    (renamed, e.g. ``rank0``); rank folders, ``cluster_analysis_output``
    and hidden folders are not entered."""
    level = [root]
    for _ in range(MAX_RANK_DEPTH):
        found: list[Path] = []
        below: list[Path] = []
        for folder in level:
            for name in listing.names(folder):
                path = folder / name
                if name.startswith(".") or name in (CLUSTER_DIR, OUTPUT_DIR) or not _is_dir(path):
                    continue
                if name.lower().endswith(RANK_SUFFIXES) or _is_dir(path / OUTPUT_DIR):
                    found.append(path)
                else:
                    below.append(path)
        if found or not below:
            return found
        level = below
    return []


def _rank_sort_key(folder: Path) -> tuple:
    """Sort key: rank from file/folder names (unknown last), then name."""
    rank = rank_from_info_names(folder)
    if rank is None:
        rank = rank_from_folder_name(folder)
    return (rank is None, rank or 0, folder.name)


# ---------------------------------------------------------------------- read

def read(unit: Path) -> Profile:
    """Read one unit (rank folder or cluster_analysis_output) into a Profile."""
    return arrow_frames.profile_to_pandas(read_arrow(unit))


def read_arrow(unit: Path, kernels: bool = True) -> Profile:
    """``read`` with the per-rank tables left in Arrow form, for the cluster
    engine to concatenate over ranks before converting (see ``arrow_frames``).
    ``kernels=False``: without the kernel files (see module doc)."""
    result = read_arrow_batch([Path(unit)], kernels=[kernels])[0]
    if isinstance(result, InputError):
        raise result
    return result


#: Rows a reader batch holds before it builds them (``read_arrow_batch``):
#: a real job's kernel_details.csv can hold 10^5 kernels a rank and its
#: communication files 10^4-10^5 rows, and a batch of up to 64 ranks would
#: otherwise hold them all at once in one worker (pending tables as Python
#: lists: ~30 bytes a value).
GROUP_KERNEL_ROWS = 250_000
BUILD_PENDING_ROWS = 100_000


def read_arrow_batch(units: list[Path], kernels: list[bool] | None = None) -> list[Profile | InputError]:
    """``read_arrow`` of each unit (its Profile, or the InputError it raised),
    with the operators of their kernel files grouped and their small tables
    built a few ranks at a time (``ascend_tables.ops_for_ranks``,
    ``batch_tables.build``; at most ``GROUP_KERNEL_ROWS`` kernels and
    ``BUILD_PENDING_ROWS`` pending rows held): the same results, less
    per-call cost. ``kernels[i]`` False: unit i without its kernel files."""
    results: list[Profile | InputError] = []
    held: dict[int, tuple[pa.Table, int]] = {}
    kernel_rows = pending_rows = built = 0
    for i, unit in enumerate(units):
        try:
            profile = _read_unit(Path(unit), held, i, kernels is None or kernels[i])
        except InputError as exc:  # a unit that fails has put no kernels in
            results.append(exc)
            continue
        results.append(profile)
        kernel_rows += held[i][0].num_rows if i in held else 0
        pending_rows += sum(len(t) for t in (getattr(profile, n) for n in PENDING_TABLES)
                            if isinstance(t, PendingTable))
        if kernel_rows >= GROUP_KERNEL_ROWS:
            _group_ops(held, results)
            kernel_rows = 0
        if pending_rows >= BUILD_PENDING_ROWS:
            _build_pending([r for r in results[built:] if isinstance(r, Profile)])
            pending_rows, built = 0, len(results)
    _group_ops(held, results)
    _build_pending([r for r in results[built:] if isinstance(r, Profile)])
    return results


def _group_ops(kernels: dict[int, tuple[pa.Table, int]], results: list) -> None:
    """Set the ``ops`` of the results whose kernels are held, and let go of them."""
    for i, ops in zip(kernels, tables.ops_for_ranks(list(kernels.values()))):
        results[i].ops = ops
    kernels.clear()


#: Tables the reader leaves pending (``batch_tables``) until its batch is read.
PENDING_TABLES = ("steps", "comm", "bandwidth", "links")


def _build_pending(profiles: list[Profile]) -> None:
    """Build the pending tables of ``profiles`` (one Arrow table per name
    for all of them, each profile given its slice); communication,
    bandwidth and links rolled up (``comm_rollup``)."""
    for name in PENDING_TABLES:
        held = [p for p in profiles if isinstance(getattr(p, name), PendingTable)]
        pending = [getattr(p, name) for p in held]
        if name in comm_rollup.USED:  # only what the rollup reads is built
            pending = [batch_tables.only(t, comm_rollup.USED[name]) for t in pending]
        built = batch_tables.build(pending)
        if name in comm_rollup.KEYS:
            built = comm_rollup.rollup_units(name, built)
        for profile, table in zip(held, built):
            setattr(profile, name, table)


def _read_unit(unit: Path, kernels: dict, index: int, with_kernels: bool = True) -> Profile:
    with listing.cached(unit):
        if not _is_dir(unit):
            raise InputError(unit, "not a folder")
        if not _is_rank_unit(unit) and _is_cluster_output(unit):
            return read_cluster(unit)
        return read_rank(unit, kernels, index, with_kernels)


def _locate(unit: Path) -> tuple[Path, Path | None]:
    """(ASCEND_PROFILER_OUTPUT folder, rank root folder or None)."""
    if unit.name == OUTPUT_DIR or (not _is_dir(unit / OUTPUT_DIR) and _holds_output_files(unit)):
        parent = unit.parent
        return unit, (parent if parent.name.lower().endswith(RANK_SUFFIXES) else None)
    return unit / OUTPUT_DIR, unit


class _Reader:
    """Reads the optional files of one unit, turning failures into skips.
    ``kernels``: the unit's kernels table, whose operators the batch reader
    computes once the batch is read (``read_arrow_batch``). ``with_kernels``
    False: the kernel and operator files are left out (``kernel_sample``)
    once steps are found. ``folder``: the folder of the unit's files, listed
    once (``file``)."""

    def __init__(self, profile: Profile, with_kernels: bool = True, folder: Path | None = None):
        self.profile = profile
        self.folder = folder
        self.files = frozenset() if folder is None else listing.files(folder)
        self.failures: list[InputError] = []
        self.kernels: pa.Table | None = None
        self.kernels_origin_us = 0.0  # absolute time of the kernels' start_us 0 (database layout)
        self.with_kernels = with_kernels
        self._trace: Trace | None | bool = False  # False: trace_view.json not decoded yet

    def trace(self, path: Path) -> Trace | None:
        """The unit's ``trace_view.json`` (``path``), decoded on first use and
        shared by every reader of the file; None (one skip) when it cannot be
        decoded."""
        if self._trace is False:
            self._trace = self.attempt(path, decode_trace)
        return self._trace

    def file(self, name: str) -> Path | None:
        """``folder / name`` when it is a file there (``listing.files``), else None."""
        return self.folder / name if name in self.files else None

    def has_ops(self) -> bool:
        return self.profile.ops is not None or self.kernels is not None

    def skips_kernels(self) -> bool:
        """Leave this rank's kernel and operator files out: not wanted, and
        its steps have a source of their own."""
        return not self.with_kernels and self.profile.steps is not None

    def attempt(self, path: Path, func, *args):
        """``func(path, *args)``; an InputError becomes a skip and returns None."""
        try:
            return func(path, *args)
        except InputError as exc:
            self.failures.append(exc)
            self.profile.skip(str(path), exc.problem)
            return None


def read_rank(unit: Path, kernels: dict, index: int, with_kernels: bool = True) -> Profile:
    """One rank folder -> Profile (see the module docstring for the files);
    its kernels table, if any, goes to ``kernels[index]`` with the rank, for
    the caller to turn into ``ops``. ``with_kernels=False``: see module doc."""
    out_dir, root = _locate(unit)
    framework, source_format = framework_of(root or unit)
    profile = Profile(meta=RunMeta(framework=framework, device="ascend",
                                   source_format=source_format, source_path=str(unit)))
    if not _is_dir(out_dir):
        raise InputError(unit, f"no {OUTPUT_DIR}/ folder (profile not parsed yet, or "
                               "exported as .db only)")
    reader = _Reader(profile, with_kernels, out_dir)
    facts = read_meta(root, profile)
    db_layout = _db_only(reader)
    if db_layout and facts.rank is None:
        facts.rank = ascend_db.rank_of(out_dir)
    if db_layout and not facts.groups:
        add_groups(facts, ascend_db.parallel_group_info(out_dir))
    rank = _decide_rank(root, facts, reader)
    _fill_meta(profile.meta, facts, rank)
    host = host_from_folder_name(root)
    if host is not None:
        profile.meta.hosts = {rank: host}
    stage = pipeline_stage(facts, rank)
    if stage is not None:
        profile.meta.stages = {rank: stage}
    for name, n in read_core_counts(root, profile).items():
        setattr(profile.meta, name, {rank: n})

    if db_layout:  # newer CANN / torch_npu / MindSpore export_type=db
        ascend_db.read_into(reader, out_dir, rank)
        if reader.kernels is not None:
            _add_device_busy(profile, reader.kernels)
    else:
        _read_steps_and_ops(reader, rank)
        _read_comm(reader, rank)
        if profile.comm is None:
            _read_level0_comm(reader, rank)
    if profile.meta.comm_source.get(rank) == hccl_rows.LEVEL1:
        profile.comm_contention = contention.contention_table(reader.kernels, profile.comm, profile.bandwidth, rank,
                                                              reader.kernels_origin_us)
    _links_to_global(profile, rank, facts.groups)
    path = reader.file("dataset.csv")
    if path is not None:
        profile.data_ops = reader.attempt(path, tables.read_dataset, rank)
    if profile.steps is None:
        _read_trace_steps(reader)
    memory_file = next((p for p in map(reader.file, memory_record.FILES) if p is not None), None)
    if memory_file is not None:
        profile.memory_summary = reader.attempt(memory_file, memory_record.read, rank)
    trace_path = reader.file("trace_view.json")
    if trace_path is not None:
        trace = reader.trace(trace_path)
        if trace is not None:
            _add_dispatch(profile, dispatch.read(trace, rank))
            profile.host_calls = host_calls.read(trace, rank, profile.meta.notes)
            profile.hccl_tasks = hccl_tasks.read(trace, rank)
    if not reader.has_ops() and not reader.skips_kernels() and root is not None:
        _read_cpu_ops(reader, root / "FRAMEWORK", rank)
    if profile.meta.framework == "unknown":
        profile.meta.framework = framework_from_files(root)
    if profile.meta.framework == "unknown":
        profile.meta.framework = framework_from_host_calls(profile.host_calls)
    _require_something(profile, reader, out_dir)
    if reader.kernels is not None:
        kernels[index] = (reader.kernels, rank)
        profile.kernel_sequences = tables.kernel_sequences(reader.kernels, rank)
    return profile


def _links_to_global(profile: Profile, rank: int, groups: dict[str, list[int]]) -> None:
    """The links' group-local ranks as global ranks (``link_ranks``)."""
    if not isinstance(profile.links, PendingTable):
        return
    profile.links, dropped = link_ranks.to_global(profile.links, rank, groups)
    if dropped:
        profile.meta.notes.append(
            "communication matrix links were left out where their communication group is not listed in "
            "the profiler metadata (parallel_group_info) or names a rank beyond its size: the matrix "
            "names group-local ranks, and naming links by them would blame the wrong cards")


def _db_only(reader: _Reader) -> bool:
    """The database layout (``*.db``, see ascend_db) and none of the text files."""
    return reader.files.isdisjoint(OUTPUT_FILES) and ascend_db.has_db(reader.folder)


def _decide_rank(root: Path | None, facts, reader: _Reader) -> int:
    """Rank id: profiler_info_{N}.json name, JSON contents, rank-N folder
    name, the communication matrix (the one rank on every link), else 0
    with a note."""
    candidates = (rank_from_info_names(root), facts.rank, rank_from_folder_name(root))
    for rank in candidates:
        if rank is not None:
            return rank
    matrix = reader.file("communication_matrix.json")
    if matrix is not None:
        rank = comm_io.rank_from_links(matrix)
        if rank is not None:
            return rank
    reader.profile.meta.notes.append(
        "rank id not found (no profiler_info_{rank}.json, no rank in profiler "
        "metadata or communication files); assumed rank 0")
    return 0


def _fill_meta(meta: RunMeta, facts, rank: int) -> None:
    """Copy what the metadata files said into RunMeta."""
    meta.ranks = [rank]
    meta.world_size = facts.world_size
    meta.parallel = dict(facts.parallel)
    meta.source_version = facts.version
    meta.env = {rank: dict(facts.env)} if facts.env else {}
    if meta.framework == "unknown" and facts.framework:
        meta.framework = facts.framework


def _read_steps_and_ops(reader: _Reader, rank: int) -> None:
    """step_trace_time.csv -> steps; kernel_details.csv (else op_statistic.csv) -> ops."""
    profile = reader.profile
    path = reader.file("step_trace_time.csv")
    if path is not None:
        profile.steps = reader.attempt(path, tables.step_trace_columns, rank)
    if reader.skips_kernels():
        return
    path = reader.file("kernel_details.csv")
    if path is not None:
        kernels = reader.attempt(path, tables.kernel_table)
        if kernels is not None and kernels.num_rows:
            reader.kernels = kernels
            _add_device_busy(profile, kernels)
    if not reader.has_ops():
        path = reader.file("op_statistic.csv")
        if path is not None:
            profile.ops = reader.attempt(path, tables.read_op_statistic, rank)
            if profile.ops is not None:
                profile.meta.notes.append(
                    "operators from op_statistic.csv: one row per operator type, "
                    "without input dtypes or shapes")


def _add_device_busy(profile: Profile, kernels: pa.Table) -> None:
    """Add per-step device busy time (union of kernels) to the pending steps table."""
    steps = profile.steps
    if steps is None or np.isnan(steps.columns["step"]).all():
        return
    busy = tables.busy_for_steps(steps.columns["step"], kernels)
    if busy is not None:
        steps.columns["device_busy_us"] = busy


def _add_dispatch(profile: Profile, per_step: pd.DataFrame | None) -> None:
    """Add the dispatch columns of ``dispatch.read`` to the steps, by step id."""
    steps = profile.steps
    if per_step is None or steps is None:
        return
    by_step = per_step.set_index(per_step["step"].astype("int64"))
    if isinstance(steps, PendingTable):
        ids = np.asarray(steps.columns["step"], dtype=np.float64)
        for column in dispatch.COLUMNS:
            steps.columns[column] = by_step[column].reindex(ids).to_numpy(np.float64)
    else:
        ids = steps["step"].astype("Float64").to_numpy(np.float64, na_value=np.nan)
        for column in dispatch.COLUMNS:
            steps[column] = by_step[column].reindex(ids).to_numpy(np.float64)


def _read_comm(reader: _Reader, rank: int) -> None:
    """communication.json -> comm, bandwidth; communication_matrix.json -> links."""
    _read_comm_files(reader, reader.file("communication.json"), rank,
                     reader.file("communication_matrix.json"), lambda p: comm_io.matrix_columns(p, rank))


def _read_comm_files(reader: _Reader, comm_path: Path | None, rank: int | None, matrix_path: Path | None,
                     read_matrix) -> None:
    """A communication summary -> comm, bandwidth; a matrix -> links (each
    optional: None where the file is not there)."""
    profile = reader.profile
    if comm_path is not None:
        result = reader.attempt(comm_path, comm_io.communication_columns, rank)
        if result is not None:
            profile.comm, profile.bandwidth = result
            if rank is not None and profile.comm is not None:
                profile.meta.comm_source[rank] = hccl_rows.LEVEL1
    if matrix_path is not None:
        profile.links = reader.attempt(matrix_path, read_matrix)


def _read_level0_comm(reader: _Reader, rank: int) -> None:
    """No communication.json (profiler Level0, the default): comm from the
    HCCL rows of the kernels, else the HCCL lanes of trace_view.json, else
    the HCCL rows of op_statistic.csv (``hccl_rows``)."""
    profile = reader.profile
    source = None
    if reader.kernels is not None:
        profile.comm = hccl_rows.comm_from_kernels(reader.kernels, rank)
        source = hccl_rows.LEVEL0
    trace = reader.file("trace_view.json")
    if profile.comm is None and trace is not None:
        decoded = reader.trace(trace)
        ops = None if decoded is None else hccl_operators(decoded)
        profile.comm = None if ops is None else hccl_rows.comm_from_kernels(ops, rank)
        source = hccl_rows.LEVEL0_TRACE_VIEW
    if profile.comm is None and reader.kernels is None:
        ops = profile.ops
        path = reader.file("op_statistic.csv")
        if ops is None and path is not None:
            ops = reader.attempt(path, tables.read_op_statistic, rank)
        profile.comm = None if ops is None else hccl_rows.comm_from_op_statistic(ops, rank)
        source = hccl_rows.LEVEL0_OP_STATISTIC
    if profile.comm is not None:
        profile.meta.comm_source[rank] = source
        profile.meta.notes.append(
            f"no communication.json (profiler Level0, the default): collectives read from the "
            f"{hccl_rows.SOURCES[source]}; "
            "waits for peers (late-rank) and link bandwidths (slow-link) need the communication analysis "
            "of profiler_level Level1 (communication.json, communication_matrix.json)")


def _read_trace_steps(reader: _Reader) -> None:
    """trace_view.json -> steps from the overlap lanes (no step_trace_time.csv)."""
    profile = reader.profile
    path = reader.file("trace_view.json")
    if path is None:
        return
    trace = reader.trace(path)
    if trace is None:
        return
    facts = read_trace(trace)
    only_trace = not reader.has_ops() and profile.comm is None
    if facts.device == "cpu" and only_trace:
        profile.meta.device = "cpu"
    if facts.freq:
        profile.device_freq = tables.freq_table(facts.freq, profile.meta.ranks[0])
    if facts.steps is not None:
        profile.steps = facts.steps
        profile.steps.insert(0, "rank", profile.meta.ranks[0])
        profile.steps["rank"] = profile.steps["rank"].astype("int64")
        profile.meta.notes.append("steps derived from the Overlap Analysis lanes of "
                                  "trace_view.json (no step_trace_time.csv)")
        if not facts.has_step_markers:
            profile.meta.notes.append("no ProfilerStep markers in trace_view.json: the "
                                      "whole capture is reported as one step (step NA)")
    else:
        why = ("no step markers and no Overlap Analysis lanes"
               if not facts.has_step_markers else "no Overlap Analysis lanes")
        profile.meta.notes.append(f"trace_view.json has {why}: per-step times are not "
                                  "available and no steps were invented")


def _read_cpu_ops(reader: _Reader, framework_dir: Path, rank: int) -> None:
    """MindSpore FRAMEWORK/cpu_op_detail_info_*.csv (else cpu_op_type_info_*) -> ops."""
    if not _is_dir(framework_dir):
        return
    for pattern in ("cpu_op_detail_info_*.csv", "cpu_op_type_info_*.csv"):
        for path in listing.glob(framework_dir, pattern):
            file_rank = tables.rank_from_name(path.name)
            ops = reader.attempt(path, tables.read_cpu_ops, rank if file_rank is None else file_rank)
            if ops is not None:
                reader.profile.ops = ops
                reader.profile.meta.notes.append(
                    f"operators from FRAMEWORK/{path.name}: host CPU operators "
                    "(core CPU), aggregated by MindSpore")
                return


def _require_something(profile: Profile, reader: _Reader, where: Path) -> None:
    """InputError when no table could be read (naming the first broken file)."""
    if reader.kernels is not None or any(profile.table(name) is not None for name in TABLES):
        return
    if reader.failures:
        raise reader.failures[0]
    raise InputError(where, "no readable profiler files (expected step_trace_time.csv, "
                            "kernel_details.csv, communication.json or trace_view.json)")


# ------------------------------------------------------------------- cluster

def read_cluster(unit: Path) -> Profile:
    """msprof-analyze cluster_analysis_output -> per-rank totals and communication."""
    profile = Profile(meta=RunMeta(device="ascend", source_format="msprof_cluster",
                                   source_path=str(unit)))
    reader = _Reader(profile, folder=unit)
    path = reader.file("cluster_step_trace_time.csv")
    if path is not None:
        profile.steps = reader.attempt(path, tables.read_cluster_step_trace)
    _read_comm_files(reader, reader.file("cluster_communication.json"), None,
                     reader.file("cluster_communication_matrix.json"), _read_cluster_matrix)
    _require_something(profile, reader, unit)
    _build_pending([profile])
    arrow_frames.profile_to_pandas(profile)
    ranks: set[int] = set()
    for name in ("steps", "comm", "bandwidth", "links"):
        df = profile.table(name)
        if df is not None:
            ranks.update(int(r) for r in df["rank"].unique())
    profile.meta.ranks = sorted(ranks)
    if profile.comm is not None:
        profile.meta.comm_source = {int(r): hccl_rows.LEVEL1_CLUSTER for r in profile.comm["rank"].unique()}
    else:
        profile.meta.notes.append(
            "no cluster_communication.json: the ranks' profiles hold no communication analysis (profiler "
            "Level0, the default); analyze the rank folders themselves for their collectives (HCCL kernel rows)")
    if profile.steps is not None:
        profile.meta.world_size = int(profile.steps["rank"].nunique())
    profile.meta.notes.append(
        "msprof-analyze cluster summary: per-rank totals over the profiled steps "
        "(step NA), no per-operator data; framework unknown")
    return profile


def _read_cluster_matrix(path: Path) -> PendingTable | None:
    """cluster_communication_matrix.json -> links; a link's rank is its source."""
    data = load_json(path)
    rows = comm_io.link_records(data) if isinstance(data, dict) else []
    if not rows:
        raise InputError(path, "no src-dst link records found")
    for row in rows:
        if row.get("rank") is None:
            row["rank"] = row["src"]
    return comm_io.pending_columns(comm_io.without_repeats(comm_io.rows_to_columns(rows)), None,
                                   comm_io.LINK_COLUMNS)
