"""Ascend / MindSpore profiler CSV files -> normalized tables.

One function per file kind. Each reads only the columns it needs (see
``csvio``), treats its file as required (a broken file raises InputError
naming it; the caller decides whether to skip it) and returns a table with
a ``rank`` column. A file with a header but no usable rows is an error too.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from advisor.collectors import grouping
from advisor.collectors.ascend import fields
from advisor.collectors.io.csv_files import clean_text, read_columns, read_numbers, read_table, text_to_float
from advisor.collectors.kernel_sequences import sequence_rows
from advisor.collectors.parallel.arrow_frames import to_pandas
from advisor.collectors.parallel.batch_tables import PendingTable, build_one
from advisor.collectors.vocab import dtype_text
from advisor.errors import InputError

# --------------------------------------------------------------------- steps

_STEP_TRACE = fields.text("step_trace_time.csv").fields
_STEP_NUMERIC = tuple(_STEP_TRACE)


#: Columns of the steps table in order (``rank`` and ``step`` always there).
STEP_COLUMNS = ("rank", "step", *(c for c in _STEP_TRACE if c not in ("step", "_exposed_no_recv")),
                "duration_us", "receive_us", "device_busy_us")
_STEP_TYPES = {"rank": pa.int64(), "step": pa.int64()}


def step_columns(col: dict[str, np.ndarray], rank: np.ndarray) -> PendingTable:
    """Step-trace columns (float arrays, our names) -> the steps table to
    build (``batch_tables``): ``rank``, ``step`` (int, null where missing),
    the columns that have a value, and the derived ones:

    duration_us = computing + exposed communication + free (Free is defined
    as step time minus computing and communication); when a part is absent
    the stage time stands in. receive_us = exposed communication minus the
    "exclude receive" variant.
    """
    n = len(rank)
    out: dict[str, np.ndarray] = {"rank": rank.astype(np.int64), "step": col.get("step", np.full(n, np.nan))}
    out.update((k, v) for k, v in col.items() if k not in ("step", "_exposed_no_recv"))
    parts = ("computing_us", "exposed_comm_us", "free_us")
    duration = (col["computing_us"] + col["exposed_comm_us"] + col["free_us"]
                if all(p in col for p in parts) else None)
    if "stage_us" in col:
        stage = np.where(col["stage_us"] > 0, col["stage_us"], np.nan)
        duration = stage if duration is None else np.where(np.isnan(duration), stage, duration)
    if duration is not None:
        out["duration_us"] = duration
    if "_exposed_no_recv" in col and "exposed_comm_us" in col:
        recv = col["exposed_comm_us"] - col["_exposed_no_recv"]
        out["receive_us"] = np.where(np.isnan(recv), np.nan, np.maximum(recv, 0.0))
    return PendingTable(out, n, order=STEP_COLUMNS, types=_STEP_TYPES, keep=frozenset({"rank", "step"}))


def _steps_table(col: dict[str, np.ndarray], rank: np.ndarray) -> pa.Table:
    """``step_columns`` built into an Arrow table."""
    return build_one(step_columns(col, rank))


def read_step_trace(path: Path, rank: int) -> pa.Table:
    """``step_trace_time.csv`` -> steps (one row per step, times in us), in
    Arrow form (see ``arrow_frames``); columns as ``step_columns`` makes them.

    Some versions lead with ``Device_id``; it is not read (the rank comes
    from the profiler metadata).
    """
    return build_one(step_trace_columns(path, rank))


def step_trace_columns(path: Path, rank: int) -> PendingTable:
    """``read_step_trace`` with the table left to build (``batch_tables``)."""
    col = read_numbers(path, _STEP_TRACE, required=("computing_us",))
    n = len(col["computing_us"])
    if n == 0:
        raise InputError(path, "no step rows")
    steps = step_columns(col, np.full(n, rank, dtype=np.int64))
    duration = steps.columns.get("duration_us")
    if duration is None or np.isnan(duration).all():
        raise InputError(path, "no step has a duration (Computing/Free/Stage all empty)")
    return steps


def _step_array(values: np.ndarray | None, n: int) -> pa.Array:
    """Step labels read as numbers (3.0, NaN) -> int64 with nulls."""
    if values is None:
        return pa.nulls(n, pa.int64())
    missing = np.isnan(values)
    return pa.array(np.where(missing, 0, np.round(values)).astype(np.int64), mask=missing)


_CLUSTER_STEP = fields.text("cluster_step_trace_time.csv").fields


def read_cluster_step_trace(path: Path) -> pd.DataFrame:
    """msprof-analyze ``cluster_step_trace_time.csv`` -> steps with rank = Index.

    Only ``Type == rank`` rows are read (``stage`` rows aggregate ranks).
    """
    table = read_table(path, _CLUSTER_STEP, numeric=_STEP_NUMERIC,
                       required=("type", "index", "computing_us"))
    ranks = pc.cast(pc.if_else(pc.equal(pc.utf8_lower(table.column("type")), "rank"),
                               text_to_float(table.column("index")), None), pa.float64())
    table = table.filter(pc.is_valid(ranks))
    if table.num_rows == 0:
        raise InputError(path, "no Type=rank rows")
    col = {name: table.column(name).to_numpy() for name in table.column_names
           if name not in ("type", "index")}
    rank = pc.drop_null(ranks).to_numpy().astype(np.int64)
    return to_pandas("steps", _steps_table(col, rank))


# ----------------------------------------------------------------------- ops

_KERNELS = fields.text("kernel_details.csv").fields

#: Kernel text columns that identify an operator: the ops table's keys.
_OP_KEYS = ("name", "type", "core", "input_dtypes", "input_shapes", "op_state")
#: Kernel pipe busy times, summed per operator where the file has them.
PIPE_TIMES = ("aicore_us", "aic_mac_us", "aic_mte2_us", "aic_fixpipe_us",
              "aiv_us", "aiv_vec_us", "aiv_mte2_us", "aiv_mte3_us")
#: Kernel block dims, taken per operator as their most common value (``grouping.most_common``).
BLOCK_DIMS = ("block_dim", "mix_block_dim")


def _finish_key(column: str, text: str | None) -> str | None:
    """A kernel text cell as reported: cleaned (``csvio.clean_text``); input
    dtypes in the Profile's spelling (``vocab.dtype_text``); the accelerator core in upper case."""
    text = clean_text(text)
    if text is None:
        return None
    if column == "input_dtypes":
        return dtype_text(text)
    return text.upper() if column == "core" else text


def _finish_text(table: pa.Table) -> pa.Table:
    """``_finish_key`` on every text column of a kernels or ops table, once
    per distinct value."""
    for i, name in enumerate(table.column_names):
        if name in _OP_KEYS:
            values = table.column(name).to_pylist()
            mapping = {v: _finish_key(name, v) for v in set(values)}
            table = table.set_column(i, name, pa.array([mapping[v] for v in values], pa.string()))
    return table


def kernel_table(path: Path) -> pa.Table:
    """``kernel_details.csv`` -> one row per kernel (our column names, us),
    in Arrow form; ``step`` int64. Columns that the file's version lacks are
    simply absent. Start times with a trailing TAB parse as floats. Text
    columns are as written: ``ops_from_kernels`` finishes them per operator
    (``_finish_text``), ~20x fewer values than kernels."""
    table = read_table(path, _KERNELS, numeric=("step", "start_us", "duration_us", "wait_us", *PIPE_TIMES,
                                                      *BLOCK_DIMS),
                       required=("name", "duration_us"), raw_text=True)
    if "step" in table.column_names:
        i = table.column_names.index("step")
        table = table.set_column(i, "step", _step_array(table.column("step").to_numpy(), table.num_rows))
    if table.column("duration_us").null_count:
        table = table.filter(pc.is_valid(table.column("duration_us")))
    if table.num_rows == 0:
        raise InputError(path, "no kernel rows")
    return table


def read_kernel_details(path: Path) -> pd.DataFrame:
    """``kernel_table`` as a DataFrame, text finished (``_finish_text``)."""
    return to_pandas("kernels", _finish_text(kernel_table(path)))


def ops_from_kernels(kernels: pa.Table, rank: int) -> pa.Table | None:
    """Per-kernel rows -> ops table (Arrow): one row per (name, type, core,
    dtypes, shapes) after ``_finish_text``, heaviest first; groups in
    first-seen order among equals."""
    return ops_for_ranks([(kernels, rank)])[0]


def ops_for_ranks(entries: list[tuple[pa.Table, int]]) -> list[pa.Table | None]:
    """``ops_from_kernels`` for many (kernels, rank) at once, identical to
    one by one: ranks whose files have the same columns are grouped in one
    pass, with the rank's position as the first key (each Arrow group-by,
    sort and text finish costs ~0.1-0.3 ms per call before any row)."""
    out: list[pa.Table | None] = [None] * len(entries)
    layouts: dict[tuple, list[int]] = {}
    for i, (kernels, _) in enumerate(entries):
        if kernels.num_rows:
            keys = tuple(k for k in _OP_KEYS if k in kernels.column_names)
            has_wait = ("wait_us" in kernels.column_names
                        and kernels.column("wait_us").null_count < kernels.num_rows)
            pipes = tuple(c for c in PIPE_TIMES if c in kernels.column_names)
            if "step" in kernels.column_names and kernels.column("step").null_count < kernels.num_rows:
                pipes += ("step",)
            pipes += tuple(c for c in BLOCK_DIMS if c in kernels.column_names)
            layouts.setdefault((keys, has_wait, pipes), []).append(i)
    for (keys, has_wait, pipes), members in layouts.items():
        for i, ops in zip(members, _ops_of_layout([entries[i] for i in members], list(keys), has_wait, pipes)):
            out[i] = ops
    return out


def _ops_of_layout(entries: list[tuple[pa.Table, int]], keys: list[str], has_wait: bool,
                   pipes: tuple[str, ...] = ()) -> list[pa.Table]:
    """``ops_for_ranks`` for kernels tables sharing ``keys``, ``has_wait`` and pipe times.

    An operator is a unit's kernels whose key texts are equal once finished
    (``_finish_key``, applied once per distinct text: keys written
    differently -- spaces, quotes, DT_ prefixes -- are one operator),
    summed by ``advisor.collectors.grouping``."""
    values = (["duration_us", "wait_us"] if has_wait else ["duration_us"]) + list(pipes)
    kernels = pa.concat_tables(
        [k.select([*keys, *values]).append_column("_unit", pa.array(np.full(k.num_rows, i, dtype=np.int64)))
         for i, (k, _) in enumerate(entries)], promote_options="permissive")
    finished = {k: _finished_codes(k, kernels.column(k)) for k in keys}
    unit = kernels.column("_unit").to_numpy()
    group, first = grouping.numbers([unit, *(code for code, _ in finished.values())])
    n = first.size
    duration = grouping.floats(kernels.column("duration_us"))
    arrays = {"count": grouping.nullable(np.bincount(group, minlength=n)),
              "total_us": grouping.nullable(*grouping.sums(group, *duration, n)),
              "max_us": grouping.nullable(*grouping.extreme(np.fmax, group, *duration, n)),
              "min_us": grouping.nullable(*grouping.extreme(np.fmin, group, *duration, n))}
    if has_wait:
        arrays["wait_us"] = grouping.nullable(*grouping.sums(group, *grouping.floats(kernels.column("wait_us")), n,
                                                             min_count=0))
    for c in pipes:
        if c not in BLOCK_DIMS and c != "step":
            arrays[c] = grouping.nullable(*grouping.sums(group, *grouping.floats(kernels.column(c)), n))
    if "step" in pipes:  # the steps an operator with these shapes ran in
        arrays["steps"] = grouping.nullable(grouping.distinct_counts(group, kernels.column("step"), n))
    for c in pipes:  # an operator's launches with one shape normally share their block dim
        if c in BLOCK_DIMS:
            arrays[c] = grouping.nullable(*grouping.most_common(group, *grouping.floats(kernels.column(c)), n))
    ranks = np.array([rank for _, rank in entries], dtype=np.int64)
    texts = {k: pa.array(distinct, pa.string()).take(code[first]) for k, (code, distinct) in finished.items()}
    ops = pa.table({"_unit": unit[first], "rank": ranks[unit[first]], **texts, **arrays})
    ops = ops.take(pc.sort_indices(ops, sort_keys=[("_unit", "ascending"), ("total_us", "descending")]))
    bounds = np.searchsorted(ops.column("_unit").to_numpy(), np.arange(len(entries) + 1))
    ops = ops.drop_columns(["_unit"])
    return [ops.slice(lo, hi - lo) for lo, hi in zip(bounds[:-1], bounds[1:])]


def _finished_codes(key: str, column: pa.ChunkedArray) -> tuple[np.ndarray, list[str | None]]:
    """(per kernel, the index of its finished text in the list; the distinct
    finished texts) of one key column."""
    code, raw = grouping.codes(column)
    number: dict[str | None, int] = {}
    renumber = np.array([number.setdefault(_finish_key(key, v), len(number)) for v in raw], dtype=np.int64)
    return renumber[code], list(number)


def busy_per_step(kernels: pa.Table) -> tuple[np.ndarray, np.ndarray] | None:
    """(step ids, union length of their kernel intervals): ``device_busy_us``
    per step. Needs ``step`` and ``start_us``; None when the file lacks them."""
    if not {"step", "start_us"} <= set(kernels.column_names):
        return None
    k = kernels.select(["step", "start_us", "duration_us"])
    if any(col.null_count for col in k.columns):
        k = k.filter(pc.and_(pc.and_(pc.is_valid(k.column("step")), pc.is_valid(k.column("start_us"))),
                             pc.is_valid(k.column("duration_us"))))
    if k.num_rows == 0:
        return None
    step = k.column("step").to_numpy()
    start = k.column("start_us").to_numpy()
    start = start - start.min()
    end = start + k.column("duration_us").to_numpy()
    order = np.lexsort((start, step))
    step, start, end = step[order], start[order], end[order]
    # Shift each step's times past the previous step's so one running
    # maximum over the whole array never carries across steps.
    first = _starts(step[1:] != step[:-1])
    group = np.cumsum(first) - 1
    shift = group * (max(float(end.max()), 0.0) + 1.0)
    s, e = start + shift, end + shift
    reach = np.maximum.accumulate(e)
    # A new busy block starts where a kernel begins after everything before it ended.
    new = _starts(s[1:] > reach[:-1])
    new |= first
    starts = np.flatnonzero(new)
    block = np.maximum.reduceat(e, starts) - s[starts]
    busy = np.bincount(group[starts], weights=block, minlength=int(group[-1]) + 1)
    return step[first], busy


def _starts(change: np.ndarray) -> np.ndarray:
    """``change`` (does row i+1 differ from row i) with True for row 0 in front."""
    out = np.empty(len(change) + 1, dtype=bool)
    out[0] = True
    out[1:] = change
    return out


def busy_for_steps(step: np.ndarray, kernels: pa.Table) -> np.ndarray | None:
    """``device_busy_us`` for each row of a steps table whose step ids are
    ``step`` (float, NaN where unknown): its step's ``busy_per_step``, NaN
    where the step ran no kernel; None when no row gets a value."""
    busy = busy_per_step(kernels)
    if busy is None:
        return None
    ids, values = busy  # ids sorted ascending
    known = ~np.isnan(step)
    wanted = np.where(known, step, -1).astype(np.int64)
    pos = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
    hit = (ids[pos] == wanted) & known
    return np.where(hit, values[pos], np.nan) if hit.any() else None


_OP_STATISTIC = fields.text("op_statistic.csv").fields


def read_op_statistic(path: Path, rank: int) -> pd.DataFrame:
    """``op_statistic.csv`` -> ops per operator type (name = type)."""
    df = read_columns(path, _OP_STATISTIC, numeric=("count", "total_us", "min_us", "max_us"),
                      required=("type", "count", "total_us"))
    df = require_rows(path, df.dropna(subset=["type", "total_us"]), "operator")
    df.insert(0, "name", df["type"])
    if "core" in df:
        df["core"] = df["core"].str.upper()
    df["count"] = df["count"].fillna(0).astype("int64")
    df.insert(0, "rank", rank)
    df["rank"] = df["rank"].astype("int64")
    df = df.dropna(axis=1, how="all")
    return df.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


_CPU_DETAIL = fields.text("cpu_op_detail_info.csv")
_CPU_TYPE = fields.text("cpu_op_type_info.csv")


def read_cpu_ops(path: Path, rank: int) -> pd.DataFrame:
    """MindSpore ``FRAMEWORK/cpu_op_detail_info_*.csv`` (or ``cpu_op_type_info_*``)
    -> ops with core "CPU"; times there are milliseconds."""
    source = _CPU_DETAIL if path.name.startswith("cpu_op_detail_info") else _CPU_TYPE
    df = read_columns(path, source.fields, numeric=("count", "total_us"), required=("type", "count", "total_us"))
    df = require_rows(path, df.dropna(subset=["type", "total_us"]), "operator")
    if "name" not in df:
        df.insert(0, "name", df["type"])
    out = pd.DataFrame({
        "rank": np.full(len(df), rank, dtype="int64"),
        "name": df["name"].fillna(df["type"]),
        "type": df["type"],
        "core": "CPU",
        "count": df["count"].fillna(0).astype("int64"),
        "total_us": df["total_us"] * source.scale["total_us"],
    })
    return out.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


# ------------------------------------------------------------------ data_ops

_DATASET = fields.text("dataset.csv").fields


def read_dataset(path: Path, rank: int) -> pd.DataFrame:
    """MindSpore ``dataset.csv`` -> data_ops (name, stage, count, avg_time_us)."""
    df = read_columns(path, _DATASET, numeric=("count", "avg_time_us"), required=("name",))
    df = require_rows(path, df.dropna(subset=["name"]), "dataset operator")
    if "count" in df:
        df["count"] = df["count"].astype("Int64")
    df.insert(0, "rank", rank)
    df["rank"] = df["rank"].astype("int64")
    return df.dropna(axis=1, how="all").reset_index(drop=True)


def rank_from_name(name: str) -> int | None:
    """Trailing ``_N`` of a per-rank file stem (``cpu_op_type_info_3.csv`` -> 3)."""
    m = re.search(r"_(\d+)$", Path(name).stem)
    return int(m.group(1)) if m else None


def require_rows(path: Path, df: pd.DataFrame | None, what: str) -> pd.DataFrame:
    """``df`` when it has rows, else InputError "no <what> rows"."""
    if df is None or df.empty:
        raise InputError(path, f"no {what} rows")
    return df


def freq_table(samples: list[tuple[float, float]], rank: int) -> pd.DataFrame | None:
    """AI Core clock samples (time us, MHz) -> the ``device_freq`` table, in
    time order; None without a usable sample."""
    df = pd.DataFrame(samples, columns=["time_us", "mhz"]).dropna()
    df = df[df["mhz"] > 0]
    if df.empty:
        return None
    df = df.sort_values("time_us", kind="stable").reset_index(drop=True)
    df.insert(0, "rank", np.int64(rank))
    return df


# ---------------------------------------------------------- kernel sequences

#: Accelerator cores whose tasks end a fusable sequence: communication and
#: AI CPU (msprof-analyze fusible_operator_checker ``check_hccl`` /
#: ``check_aicpu``).
UNFUSABLE_CORES = frozenset({"HCCL", "COMMUNICATION", "AI_CPU"})
#: Operator-name prefixes of communication tasks (the same checker).
COMM_PREFIXES = ("hcom", "lccl", "lcoc")


def _codes(column) -> tuple[np.ndarray, list[str]]:
    """A text column as (per-row code, distinct values); nulls are ""."""
    if column.null_count:
        column = pc.fill_null(column, "")
    encoded = (column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()).dictionary_encode()
    return encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary.to_pylist()


def kernel_sequences(kernels: pa.Table, rank: int) -> pa.Table | None:
    """``kernel_sequences`` rows of one rank's kernels, in Arrow (converted
    with the rank's other tables, ``arrow_frames``): a kernel is its
    operator type (else name) with its input shapes, as msprof-analyze's
    fusible-operator check keys it; the steps are the distinct step ids
    (1 when the file has none). Text is looked at once per distinct value."""
    if "start_us" not in kernels.column_names or kernels.num_rows < 2:
        return None
    wanted = ("name", "type", "core", "input_shapes", "step", "start_us", "duration_us", *PIPE_TIMES)
    k = kernels.select([c for c in wanted if c in kernels.column_names])
    if k.column("start_us").null_count:
        k = k.filter(pc.is_valid(k.column("start_us")))
    cols = k.column_names
    name, names = _codes(k.column("name"))
    label, labels = _codes(k.column("type")) if "type" in cols else (name, names)
    if "type" in cols:  # a kernel without a type is known by its name
        label = np.where(np.array([not v.strip() for v in labels])[label], len(labels) + name, label)
        labels = labels + names
    shapes, shape_values = _codes(k.column("input_shapes")) if "input_shapes" in cols else (np.zeros_like(label), [""])
    keys, key = np.unique(label.astype(np.int64) * len(shape_values) + shapes, return_inverse=True)
    key_labels = [labels[int(u) // len(shape_values)].strip() for u in keys]
    fusable = ~np.array([v.lower().startswith(COMM_PREFIXES) for v in names], dtype=bool)[name]
    if "core" in cols:
        core, cores = _codes(k.column("core"))
        fusable &= ~np.array([v.strip().upper().replace(" ", "_") in UNFUSABLE_CORES for v in cores], dtype=bool)[core]
    steps = 1
    if "step" in cols:
        steps = max(pc.count_distinct(k.column("step"), mode="only_valid").as_py(), 1)
    found = sequence_rows(key, key_labels, k.column("start_us").to_numpy(zero_copy_only=False),
                          k.column("duration_us").to_numpy(zero_copy_only=False), fusable, steps, rank,
                          _pipe_times(k))
    if found is None:
        return None
    rows, columns = found
    return pa.table(dict(zip(columns, map(pa.array, zip(*rows)))))


def _pipe_times(kernels: pa.Table) -> tuple[np.ndarray, np.ndarray] | None:
    """Per kernel (memory-transfer time, busy time of its cores) in us, as
    msprof-analyze's fusible-operator check weighs a sequence
    (``get_mte_time``: the larger of the cube and vector parts' MTE2 load
    plus the larger of their FIXPIPE / MTE3 store), the busy time being the
    larger of the cube part's and the vector part's time (the peer takes the
    cube part's alone, which leaves vector-only chains out); None when the
    kernels have no pipe times."""
    cols = kernels.column_names
    if not ({"aicore_us", "aiv_us"} & set(cols)) or not ({"aic_mte2_us", "aiv_mte2_us"} & set(cols)):
        return None

    def time(name: str) -> np.ndarray:
        if name not in cols:
            return np.zeros(kernels.num_rows)
        return np.nan_to_num(kernels.column(name).to_numpy(zero_copy_only=False).astype(float))

    mte = (np.maximum(time("aic_mte2_us"), time("aiv_mte2_us"))
           + np.maximum(time("aic_fixpipe_us"), time("aiv_mte3_us")))
    busy = np.maximum(time("aicore_us"), time("aiv_us"))
    if not busy.any():
        return None
    return mte, busy
