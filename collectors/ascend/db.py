"""Ascend database layout (newer CANN / torch_npu / MindSpore ``export_type=db``).

Files in ``ASCEND_PROFILER_OUTPUT/``:

* ``ascend_pytorch_profiler_{rank}.db`` (torch_npu) or
  ``ascend_mindspore_profiler_{rank}.db`` (MindSpore): the msprof tables --
  ``STRING_IDS(id, value)``; ``TASK(startNs, endNs, deviceId, connectionId,
  globalTaskId, ..., taskType, streamId, ...)``; ``COMPUTE_TASK_INFO(name,
  globalTaskId, ..., taskType, opType, inputDataTypes, inputShapes, ...)``
  (text columns are STRING_IDS ids); ``COMMUNICATION_OP(opName, startNs,
  endNs, connectionId, groupName, opId, ..., opType)``; ``STEP_TIME(id,
  startNs, endNs)``; ``RANK_DEVICE_MAP(rankId, deviceId)``. Times in ns.
* ``analysis.db`` (MindSpore may call it ``communication_analyzer.db``):
  ``StepTraceTime([deviceId,] step, computing, communication_not_overlapped,
  overlapped, communication, free, stage, bubble,
  communication_not_overlapped_and_exclude_receive, preparing)`` in us, the
  table behind ``step_trace_time.csv``; ``CommAnalyzerTime`` (ms),
  ``CommAnalyzerBandwidth`` (one row per operator, transport and packet size),
  ``CommAnalyzerMatrix`` -- the tables behind ``communication.json`` and
  ``communication_matrix.json``.

Table and column names as written by torch_npu
(``profiler/analysis/prof_common_func/_constant.py``: ``TableColumnsManager``,
``prof_db_parse/_trace_step_time_db_parser.py``) and documented in msprof's
"Profile Data File Reference (DB)".

Everything lands in the same tables, with the same units, as the text
layout. When ``StepTraceTime`` is absent the step breakdown is computed from
``STEP_TIME`` and the task intervals the way torch_npu computes it: a task
belongs to the step its start falls in; computing = union of compute tasks,
communication = union of communication operators, communication not
overlapped = communication minus computing, bubble = union of
``hcom_receive*`` operators, stage = first-to-last task span minus bubble,
free = step window minus computing and exposed communication.

Databases are opened read-only and immutable (``file:...?mode=ro&immutable=1``):
nothing is written next to them, not even a journal or a lock file.

The compute tasks (10^5 a rank on real jobs) are fetched as Arrow columns
through the ADBC SQLite driver (``adbc-driver-sqlite``) by string id and
their texts looked up in ``STRING_IDS`` in Arrow: 200 000 tasks in ~0.17 s
against ~0.7 s for the same join fetched row by row through ``sqlite3`` and
turned into columns, which stays the path for everything else and the
fallback (driver missing, or a column ADBC cannot type).
"""

from __future__ import annotations

import ast
import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from advisor.collectors.ascend import comm as comm_io
from advisor.collectors.ascend import fields, hccl_tasks, tables
from advisor.collectors.ascend import hccl_rows as level0
from advisor.collectors.io import listing
from advisor.collectors.io.files import check_regular
from advisor.collectors.parallel.batch_tables import PendingTable, select_rows
from advisor.collectors.vocab import HCCL_DATA_TYPES, collective_kind
from advisor.errors import InputError

PROFILER_DB_GLOBS = ("ascend_pytorch_profiler*.db", "ascend_mindspore_profiler*.db")
ANALYSIS_DBS = ("analysis.db", "communication_analyzer.db")
NS_PER_US = 1000.0
_RANK_IN_NAME = re.compile(r"_(\d+)\.db$")
_DIGITS = re.compile(r"(\d+)")


# ------------------------------------------------------------------ files

def profiler_db(out_dir: Path) -> Path | None:
    """The per-rank profiler database in ``out_dir``, if any."""
    for pattern in PROFILER_DB_GLOBS:
        found = listing.glob(out_dir, pattern)
        if found:
            return found[0]
    return None


def analysis_db(out_dir: Path) -> Path | None:
    for name in ANALYSIS_DBS:
        path = Path(out_dir) / name
        if listing.is_file(path):
            return path
    return None


def has_db(out_dir: Path) -> bool:
    return profiler_db(out_dir) is not None or analysis_db(out_dir) is not None


def rank_of(out_dir: Path) -> int | None:
    """Rank from ``..._profiler_{rank}.db``, else RANK_DEVICE_MAP's single rankId."""
    path = profiler_db(out_dir)
    if path is None:
        return None
    m = _RANK_IN_NAME.search(path.name)
    if m:
        return int(m.group(1))
    try:
        with _connect(path) as con:
            if _has_table(con, "RANK_DEVICE_MAP"):
                ranks = {r for (r,) in con.execute("SELECT rankId FROM RANK_DEVICE_MAP") if r is not None}
                if len(ranks) == 1 and next(iter(ranks)) >= 0:
                    return int(next(iter(ranks)))
    except InputError:
        pass
    return None


def parallel_group_info(out_dir: Path) -> dict | None:
    """``parallel_group_info`` from the profiler database's META_DATA table
    (a JSON or Python-literal dict, as msprof-analyze reads it), if any."""
    path = profiler_db(out_dir)
    if path is None:
        return None
    try:
        with _connect(path) as con:
            if not _has_table(con, "META_DATA"):
                return None
            rows = con.execute("SELECT value FROM META_DATA WHERE name = 'parallel_group_info'").fetchall()
    except InputError:
        return None  # the read proper reports a broken database
    for (value,) in rows:
        for parse in (json.loads, ast.literal_eval):
            try:
                info = parse(value)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(info, dict):
                return info
    return None


class _Con:
    """A read-only sqlite3 connection that turns SQLite errors into InputError."""

    def __init__(self, path: Path):
        self.path = Path(path)
        check_regular(self.path)  # SQLite would wait forever on a FIFO
        uri = self.path.absolute().as_uri() + "?mode=ro&immutable=1"
        try:
            self.con = sqlite3.connect(uri, uri=True)
            self.tables = {name for (name,) in self.con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.Error as exc:
            raise InputError(path, f"not a readable SQLite database ({exc})") from None

    def execute(self, sql: str, params=()):
        try:
            return self.con.execute(sql, params)
        except sqlite3.Error as exc:
            raise InputError(self.path, f"unexpected database schema ({exc})") from None

    def columns(self, sql: str) -> dict[str, list]:
        """The result of ``sql`` as columns: name -> list of cell values."""
        cur = self.execute(sql)
        names = [d[0] for d in cur.description]
        try:
            rows = cur.fetchall()
        except sqlite3.Error as exc:
            raise InputError(self.path, f"unreadable table ({exc})") from None
        values = list(zip(*rows)) if rows else [()] * len(names)
        return {name: list(col) for name, col in zip(names, values)}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.con.close()


def _any_rank(path: Path) -> str:
    """``path``'s name with its rank as ``{rank}``: one note for every rank."""
    return _RANK_IN_NAME.sub("_{rank}.db", path.name)


def _connect(path: Path) -> _Con:
    return _Con(path)


def _has_table(con: _Con, name: str) -> bool:
    return name in con.tables


def _columns(con: _Con, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info({table})")}


# ------------------------------------------------------------------ cells

def _floats(values: list) -> np.ndarray:
    """Cells -> float64, NaN where a cell is empty or not a number."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([_float(v) for v in values], dtype=np.float64)


def _ns(values: list) -> tuple[np.ndarray, np.ndarray]:
    """Integer nanosecond cells -> (int64 values, which cells are usable):
    a cell that is empty, text or beyond int64 is not (0 in the values)."""
    try:
        return np.array(values, dtype=np.int64), np.ones(len(values), dtype=bool)
    except (TypeError, ValueError, OverflowError):
        ok = [isinstance(v, (int, float)) and -2**63 <= v < 2**63 for v in values]  # NaN compares false
        return (np.array([v if k else 0 for v, k in zip(values, ok)], dtype=np.int64),
                np.array(ok, dtype=bool))


def _float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return np.nan


def _per_value(values: list, func) -> list:
    """``func`` of each cell, computed once per distinct cell (a column of
    a rank's database repeats a few step ids, names and transports)."""
    found = {v: func(v) for v in set(values)}
    return [found[v] for v in values]


def _step_number(value) -> int | None:
    """"step12" / "12" / 12 -> 12; None where a cell holds no number."""
    m = _DIGITS.search(str(value)) if value is not None else None
    return int(m.group(1)) if m else None


def _step_numbers(values: list) -> list[int | None]:
    return _per_value(values, _step_number)


def _text(value) -> str | None:
    return None if value is None else str(value)


def _texts(values: list) -> list[str | None]:
    return _per_value(values, _text)


def _upper_texts(values: list) -> list[str | None]:
    return _per_value(values, lambda v: None if v is None else str(v).upper())


def _kinds(names: list[str | None]) -> list[str | None]:
    return _per_value(names, lambda n: None if n is None else collective_kind(n))


def _text_array(values: list) -> pa.Array:
    """Text cells as an Arrow string array (non-text cells as their str)."""
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array(_texts(values), pa.string())


# ------------------------------------------------------------------ steps

#: StepTraceTime column -> steps column (``ascend.fields``).
_STEP_TRACE_COLUMNS = fields.db("StepTraceTime").by_raw()


def read_step_trace(con: _Con, rank: int) -> PendingTable | None:
    """analysis.db ``StepTraceTime`` -> steps, left to build like the text
    layout's (``ascend_tables.step_columns``); None when the table is absent
    or holds only the all-zero row torch_npu writes when there were no steps."""
    if not _has_table(con, "StepTraceTime"):
        return None
    have = _columns(con, "StepTraceTime")
    cols = [c for c in _STEP_TRACE_COLUMNS if c in have]
    if "computing_us" not in {_STEP_TRACE_COLUMNS[c] for c in cols}:
        raise InputError(con.path, "StepTraceTime has no computing column")
    raw = {_STEP_TRACE_COLUMNS[c]: v for c, v in con.columns(f"SELECT {', '.join(cols)} FROM StepTraceTime").items()}
    col = {c: _floats(v) for c, v in raw.items() if c != "step"}
    used = np.nansum(np.abs(np.vstack(list(col.values()))), axis=0) > 0
    if not used.any():
        return None
    col = {c: v[used] for c, v in col.items()}
    if "step" in raw:
        steps = _step_numbers(raw["step"])
        col["step"] = np.array([np.nan if s is None else s for s in steps], dtype=np.float64)[used]
    return tables.step_columns(col, np.full(int(used.sum()), rank, dtype=np.int64))


def _union(starts: np.ndarray, ends: np.ndarray) -> list[tuple[float, float]]:
    """Merged intervals of [start, end) pairs."""
    if len(starts) == 0:
        return []
    order = np.argsort(starts, kind="stable")
    out: list[list[float]] = []
    for s, e in zip(starts[order], ends[order]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(a, b) for a, b in out]


def _length(blocks: list[tuple[float, float]]) -> float:
    return float(sum(b - a for a, b in blocks))


def _minus(blocks, holes) -> float:
    """Length of ``blocks`` not covered by ``holes`` (both merged)."""
    total, j = 0.0, 0
    for a, b in blocks:
        cur = a
        while j < len(holes) and holes[j][1] <= cur:
            j += 1
        k = j
        while k < len(holes) and holes[k][0] < b:
            ha, hb = holes[k]
            if ha > cur:
                total += ha - cur
            cur = max(cur, hb)
            if cur >= b:
                break
            k += 1
        if cur < b:
            total += b - cur
    return total


class _Windows:
    """STEP_TIME: step ids and their [start, end) in ns, by start."""

    def __init__(self, start: np.ndarray, end: np.ndarray, step: np.ndarray):
        order = np.argsort(start, kind="stable")
        self.start, self.end, self.step = start[order], end[order], step[order]

    def assign(self, start_ns: np.ndarray) -> pa.Array:
        """Step id of each start time (the window it falls in), null outside all."""
        idx = np.searchsorted(self.start, start_ns, side="right") - 1
        ok = (idx >= 0) & (start_ns < self.end[np.clip(idx, 0, None)])
        return pa.array(np.where(ok, self.step[np.clip(idx, 0, None)], 0), mask=~ok)


def _step_windows(con: _Con) -> _Windows | None:
    if not _has_table(con, "STEP_TIME"):
        return None
    cols = con.columns("SELECT id AS step, startNs, endNs FROM STEP_TIME")
    if not cols["step"]:
        return None
    (step, ok_step), (start, ok_start), (end, ok_end) = (_ns(cols[c]) for c in ("step", "startNs", "endNs"))
    if not (ok_step.all() and ok_start.all() and ok_end.all()):  # a window without numbers: none is trusted
        return None
    return _Windows(start, end, step)


def _assign_steps(start_ns: np.ndarray, windows: _Windows | None) -> pa.Array:
    if windows is None:
        return pa.nulls(len(start_ns), pa.int64())
    return windows.assign(start_ns)


def steps_from_tasks(kernels: _Kernels, windows: _Windows, rank: int) -> PendingTable | None:
    """Step breakdown from task intervals (see module doc)."""
    step = kernels.table.column("step").to_numpy(zero_copy_only=False)
    start_all = kernels.table.column("start_us").to_numpy()
    end_all = start_all + kernels.table.column("duration_us").to_numpy()
    rows: dict[str, list] = {}
    for sid, w_start, w_end in zip(windows.step, windows.start, windows.end):
        mine = step == sid
        start, end = start_all[mine], end_all[mine]
        is_comm, is_recv = kernels.is_comm[mine], kernels.is_recv[mine]
        compute = _union(start[~is_comm], end[~is_comm])
        comm = _union(start[is_comm], end[is_comm])
        bubble = _length(_union(start[is_recv], end[is_recv]))
        exposed = _minus(comm, compute)
        computing, communication = _length(compute), _length(comm)
        window = int(w_end - w_start) / NS_PER_US
        span = float(end.max() - start.min()) if len(start) else 0.0
        for key, value in (("step", float(sid)), ("computing_us", computing), ("exposed_comm_us", exposed),
                           ("overlapped_us", communication - exposed), ("communication_us", communication),
                           ("free_us", max(window - computing - exposed, 0.0)), ("stage_us", span - bubble),
                           ("bubble_us", bubble), ("_exposed_no_recv", exposed - bubble)):
            rows.setdefault(key, []).append(value)
    if not rows:
        return None
    col = {k: np.array(v, dtype=np.float64) for k, v in rows.items()}
    return tables.step_columns(col, np.full(len(col["step"]), rank, dtype=np.int64))


# -------------------------------------------------------------------- ops

def _text_sql(table: str, alias: str, tail: str, strings: bool = True, only: tuple[str, ...] | None = None) -> str:
    """``SELECT`` of ``table``'s text columns (``ascend.fields``; ``only``
    these when given), named as the Profile's, then ``tail`` (more columns,
    ``FROM`` and joins); each text looked up in STRING_IDS, or with
    ``strings=False`` left as its id."""
    source = fields.db(table)
    chosen = [c for c in source.fields if only is None or c in only]
    names = [f'{alias}.{source.raw(c)} AS "{c}"' if not strings else f's{i}.value AS "{c}"'
             for i, c in enumerate(chosen)]
    joins = "".join(f"LEFT JOIN STRING_IDS s{i} ON s{i}.id = {alias}.{source.raw(c)}\n"
                    for i, c in enumerate(chosen)) if strings else ""
    return f"SELECT {', '.join(names)}, {tail}\n{joins}"


_TASKS_FROM = "t.startNs, t.endNs\nFROM COMPUTE_TASK_INFO c\nJOIN TASK t ON t.globalTaskId = c.globalTaskId"
_KERNEL_SQL = _text_sql("COMPUTE_TASK_INFO", "c", _TASKS_FROM)
_COMM_OP_SQL = _text_sql("COMMUNICATION_OP", "o", "o.startNs, o.endNs\nFROM COMMUNICATION_OP o")
#: ``_COMM_OP_SQL`` with the message's dtype id and element count (``hccl_rows.count_mb``).
_COMM_OP_SIZE_SQL = _text_sql("COMMUNICATION_OP", "o", "o.startNs, o.endNs, o.dataType, o.count\nFROM COMMUNICATION_OP o")
#: Kernel text columns, as ``kernel_details.csv`` names them.
_KERNEL_TEXT = tuple(fields.db("COMPUTE_TASK_INFO").fields)
#: ``_KERNEL_SQL`` with the texts left as their STRING_IDS ids (``_compute_arrow``).
_KERNEL_IDS_SQL = _text_sql("COMPUTE_TASK_INFO", "c", _TASKS_FROM, strings=False)
#: Kernel text columns older databases lack (opState: CANN 8.0 and later), read when present.
_OPTIONAL_KERNEL_TEXT = ("op_state",)
#: Kernel number columns (the cores a kernel was launched on), read where COMPUTE_TASK_INFO has them.
_KERNEL_NUMBERS = fields.db("COMPUTE_TASK_INFO numbers")


def _kernel_numbers(con: _Con) -> tuple[str, ...]:
    """The kernel number columns (``_KERNEL_NUMBERS``) this database's COMPUTE_TASK_INFO has."""
    present = _columns(con, "COMPUTE_TASK_INFO")
    return tuple(c for c in _KERNEL_NUMBERS.fields if _KERNEL_NUMBERS.raw(c) in present)


def _tasks_from(numbers: tuple[str, ...]) -> str:
    """``_TASKS_FROM`` with the kernel number columns ``numbers``, named as the Profile's."""
    if not numbers:
        return _TASKS_FROM
    picked = "".join(f', c.{_KERNEL_NUMBERS.raw(c)} AS "{c}"' for c in numbers)
    return _TASKS_FROM.replace("t.startNs, t.endNs", f"t.startNs, t.endNs{picked}", 1)


def _kernel_text(con: _Con) -> tuple[str, ...]:
    """The kernel text columns this database's COMPUTE_TASK_INFO has."""
    optional = [c for c in _OPTIONAL_KERNEL_TEXT if c in _KERNEL_TEXT]
    if not optional:
        return _KERNEL_TEXT
    present = _columns(con, "COMPUTE_TASK_INFO")
    source = fields.db("COMPUTE_TASK_INFO")
    return tuple(c for c in _KERNEL_TEXT if c not in optional or source.raw(c) in present)


@dataclass(frozen=True)
class _Kernels:
    """A profiler database's tasks as the text layout's kernels table
    (``ascend_tables.kernel_table``: raw text, ``step``, ``start_us``
    relative to the first step, ``duration_us``), in start order, with
    which rows are communication (core HCCL) and receives; ``origin_us``
    is the absolute time (us, the profiler's clock) of ``start_us`` 0."""

    table: pa.Table
    is_comm: np.ndarray
    is_recv: np.ndarray
    origin_us: float = 0.0


def _times(cols: dict[str, list]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows with both times, their start ns, end ns): integer ns until after
    subtraction, as a float64 epoch-ns time is only exact to ~256 ns."""
    (start, ok_start), (end, ok_end) = _ns(cols["startNs"]), _ns(cols["endNs"])
    keep = ok_start & ok_end
    return keep, start[keep], end[keep]


def _compute_arrow(path: Path, wanted: tuple[str, ...] = _KERNEL_TEXT, numbers: tuple[str, ...] = ()
                   ) -> tuple[dict[str, pa.Array], np.ndarray, np.ndarray, dict[str, np.ndarray]] | None:
    """The compute tasks as (texts, start ns, end ns, numbers) of the rows
    with both times, through ADBC (module doc); None where that path is not
    taken. ``wanted``: the text columns the database has (``_kernel_text``);
    the others are null. ``numbers``: the number columns it has
    (``_kernel_numbers``), as float arrays (NaN where empty)."""
    try:
        import adbc_driver_sqlite.dbapi as adbc
    except ImportError:
        return None
    try:
        with adbc.connect(Path(path).absolute().as_uri() + "?mode=ro&immutable=1") as con:
            with con.cursor() as cur:
                cur.execute(_KERNEL_IDS_SQL if wanted == _KERNEL_TEXT and not numbers else
                            _text_sql("COMPUTE_TASK_INFO", "c", _tasks_from(numbers), strings=False, only=wanted))
                tasks = cur.fetch_arrow_table()
                cur.execute("SELECT id, value FROM STRING_IDS")
                strings = cur.fetch_arrow_table()
    except Exception:  # noqa: BLE001 -- any driver error: the sqlite3 path reads it or says what is wrong
        return None
    ints = [tasks.schema.field(c).type for c in (*wanted, "startNs", "endNs")]
    if not all(pa.types.is_integer(t) or pa.types.is_null(t) for t in ints):
        return None
    value = strings.column("value")
    if not (pa.types.is_string(value.type) or pa.types.is_large_string(value.type) or pa.types.is_null(value.type)):
        return None
    try:
        keep = pc.and_(pc.is_valid(tasks.column("startNs")), pc.is_valid(tasks.column("endNs")))
        if not pc.all(keep).as_py():
            tasks = tasks.filter(keep)
        ids = strings.column("id").combine_chunks()
        value = value.cast(pa.string()).combine_chunks()
        text = {c: pc.take(value, pc.index_in(tasks.column(c), value_set=ids)).combine_chunks()
                if c in wanted else pa.nulls(tasks.num_rows, pa.string()) for c in _KERNEL_TEXT}
        start = tasks.column("startNs").to_numpy().astype(np.int64)
        end = tasks.column("endNs").to_numpy().astype(np.int64)
        nums = {c: _floats(tasks.column(c).to_pylist()) for c in numbers}
    except (pa.ArrowException, ValueError, TypeError):  # an odd column: the sqlite3 path handles it
        return None
    return text, start, end, nums


def read_kernels(path: Path, kernels: bool = True
                 ) -> tuple[_Kernels | None, dict[str, list] | None, _Windows | None]:
    """Profiler db -> (kernels, COMMUNICATION_OP columns, step windows).

    Kernels are compute tasks plus communication operators (core HCCL), as
    kernel_details.csv lists them; times in us, ``step`` from STEP_TIME.
    ``kernels=False``: None for them, the tasks not queried.
    """
    with _connect(path) as con:
        if not _has_table(con, "STRING_IDS"):
            raise InputError(path, "no STRING_IDS table (not an Ascend profiler database?)")
        windows = _step_windows(con)
        has_compute = kernels and _has_table(con, "COMPUTE_TASK_INFO") and _has_table(con, "TASK")
        wanted = _kernel_text(con) if has_compute else _KERNEL_TEXT
        numbers = _kernel_numbers(con) if has_compute else ()
        fast = _compute_arrow(path, wanted, numbers) if has_compute else None
        sql = (_KERNEL_SQL if wanted == _KERNEL_TEXT and not numbers
               else _text_sql("COMPUTE_TASK_INFO", "c", _tasks_from(numbers), only=wanted))
        compute = con.columns(sql) if has_compute and fast is None else None
        comm = _comm_ops(con) if _has_table(con, "COMMUNICATION_OP") else None
    if not kernels:
        return None, comm, windows
    parts = [(*fast[:3], False, fast[3])] if fast is not None and len(fast[1]) else []
    for cols, is_comm in ((compute, False), (comm, True)):
        if cols is None or not cols["startNs"]:
            continue
        keep, start, end = _times(cols)
        text = {c: (pa.array(np.full(len(keep), "HCCL", dtype=object), pa.string()) if c == "core" and is_comm
                    else _text_array(cols[c]) if c in cols else pa.nulls(len(keep), pa.string()))
                for c in _KERNEL_TEXT}
        if not keep.all():
            text = {c: a.filter(pa.array(keep)) for c, a in text.items()}
        parts.append((text, start, end, is_comm, {c: _floats(cols[c])[keep] for c in numbers if c in cols}))
    if not parts:
        return None, comm, windows
    text = {c: pa.concat_arrays([p[0][c] for p in parts]) for c in _KERNEL_TEXT}
    start = np.concatenate([p[1] for p in parts])
    end = np.concatenate([p[2] for p in parts])
    comm_rows = np.concatenate([np.full(len(p[1]), p[3]) for p in parts])
    nums = {c: np.concatenate([p[4].get(c, np.full(len(p[1]), np.nan)) for p in parts]) for c in numbers}
    order = np.argsort(start, kind="stable")
    start, end, comm_rows = start[order], end[order], comm_rows[order]
    nums = {c: v[order] for c, v in nums.items() if not np.isnan(v).all()}
    take = pa.array(order)
    text = {c: a.take(take) for c, a in text.items()}
    base = int(windows.start.min()) if windows is not None else int(start.min())
    table = pa.table({
        "step": _assign_steps(start, windows),
        **{c: text[c] for c in ("name", "type", "core")},
        "start_us": (start - base) / NS_PER_US,
        "duration_us": (end - start) / NS_PER_US,
        **{c: text[c] for c in ("input_shapes", "input_dtypes")},
        **{c: text[c] for c in _OPTIONAL_KERNEL_TEXT if c in text and text[c].null_count < len(text[c])},
        **{c: pa.array(v, mask=np.isnan(v)) for c, v in nums.items()},
    })
    core = pc.equal(pc.utf8_upper(pc.utf8_trim_whitespace(text["core"])), "HCCL")
    core = core.fill_null(False).to_numpy(zero_copy_only=False)
    recv = pc.starts_with(text["name"], "hcom_receive").fill_null(False).to_numpy(zero_copy_only=False)
    return _Kernels(table, comm_rows | core, recv, base / NS_PER_US), comm, windows


def _comm_ops(con: _Con) -> dict[str, list]:
    """COMMUNICATION_OP columns; with ``dataType`` and ``count`` where the
    table has them, the dtype ids named (``ENUM_HCCL_DATA_TYPE``, else
    ``vocab.HCCL_DATA_TYPES``) in ``dtype``."""
    if not {"dataType", "count"} <= _columns(con, "COMMUNICATION_OP"):
        return con.columns(_COMM_OP_SQL)
    cols = con.columns(_COMM_OP_SIZE_SQL)
    names = dict(HCCL_DATA_TYPES)
    if _has_table(con, "ENUM_HCCL_DATA_TYPE"):
        names.update((row[0], row[1]) for row in con.execute("SELECT id, name FROM ENUM_HCCL_DATA_TYPE"))
    cols["dtype"] = [names.get(i) for i in cols.pop("dataType")]
    return cols


def comm_from_ops(comm: dict[str, list] | None, windows: _Windows | None, rank: int) -> PendingTable | None:
    """COMMUNICATION_OP rows -> comm table (no wait/transit split: that needs
    analysis.db); ``size_mb`` where the rows carry a dtype and count."""
    if comm is None or not comm["startNs"]:
        return None
    keep, start, end = _times(comm)
    names = [n for n, k in zip(_texts(comm["name"]), keep) if k]
    cols = {"step": _assign_steps(start, windows).to_pylist(), "name": names,
            "kind": _kinds(names),
            "group": [g for g, k in zip(_texts(comm["group"]), keep) if k],
            "start_us": start / NS_PER_US, "elapse_us": (end - start) / NS_PER_US}
    if "dtype" in comm:
        sizes = [mb for mb, k in zip(level0.count_mb(comm["dtype"], comm["count"]), keep) if k]
        if any(mb is not None for mb in sizes):
            cols["size_mb"] = sizes
    return comm_io.pending_columns(cols, rank, comm_io.COMM_COLUMNS)


# ------------------------------------------------------------ communication

def _not_total(cols: dict[str, list]) -> dict[str, list]:
    """Rows other than the "Total Op Info" summaries (sums of the others)."""
    keep = _per_value(cols["name"], lambda n: not (isinstance(n, str) and n.startswith("Total")))
    return select_rows(cols, np.array(keep, dtype=bool))


def read_comm_analysis(con: _Con, rank: int):
    """analysis.db CommAnalyzer* -> (comm, bandwidth, links), each left to
    build like the text layout's (``ascend_comm``); None when absent."""
    found = {table: con.columns(f"SELECT * FROM {table}") if _has_table(con, table) else None
             for table in ("CommAnalyzerTime", "CommAnalyzerBandwidth", "CommAnalyzerMatrix")}
    return (_time_columns(found["CommAnalyzerTime"], rank), _band_columns(found["CommAnalyzerBandwidth"], rank),
            _matrix_columns(found["CommAnalyzerMatrix"], rank))


def _as_columns(cols: dict[str, list] | None, table: str) -> dict[str, list] | None:
    """A CommAnalyzer table's columns under the Profile's names
    (``ascend.fields``; the first spelling present), values as stored."""
    if cols is None:
        return None
    out = {}
    for col, raws in fields.db(table).fields.items():
        raw = next((r for r in raws if r in cols), None)
        if raw is not None:
            out[col] = cols[raw]
    return out


def _base(cols: dict[str, list]) -> dict[str, list]:
    """step, name, kind and group of CommAnalyzer rows."""
    names = _texts(cols["name"])
    n = len(names)
    return {"step": _step_numbers(cols["step"]) if "step" in cols else [None] * n,
            "name": names, "kind": _kinds(names),
            "group": _texts(cols["group"]) if "group" in cols else [None] * n}


def _transports(cols: dict[str, list]) -> list:
    """The rows' link types in upper case (None where the table has none)."""
    return _upper_texts(cols["transport"]) if "transport" in cols else [None] * len(cols["name"])


def _num(cols: dict[str, list], col: str, scale: float = 1.0) -> np.ndarray:
    n = len(next(iter(cols.values())))
    return _floats(cols[col]) * scale if col in cols else np.full(n, np.nan)


def _time_columns(cols: dict[str, list] | None, rank: int) -> PendingTable | None:
    cols = _as_columns(cols, "CommAnalyzerTime")
    if not cols or not cols.get("name"):
        return None
    cols = _not_total(cols)
    scale = fields.db("CommAnalyzerTime").scale
    out = {**_base(cols), **{c: _num(cols, c, scale.get(c, 1.0))
                             for c in ("start_us", "elapse_us", "transit_us", "wait_us", "sync_us", "idle_us")}}
    return comm_io.pending_columns(select_rows(out, ~np.isnan(out["elapse_us"])), rank, comm_io.COMM_COLUMNS)


def _first_of_each(keys: list[tuple]) -> np.ndarray:
    """Which rows are the first with their key."""
    seen: set = set()
    first = np.zeros(len(keys), dtype=bool)
    for i, k in enumerate(keys):
        if k not in seen:
            seen.add(k)
            first[i] = True
    return first


def _band_columns(cols: dict[str, list] | None, rank: int) -> PendingTable | None:
    cols = _as_columns(cols, "CommAnalyzerBandwidth")
    if not cols or not cols.get("name"):
        return None
    cols = _not_total(cols)
    key = [cols[c] for c in ("step", "name", "group", "transport") if c in cols]
    cols = select_rows(cols, _first_of_each(list(zip(*key))))  # a row per packet size: the first of each
    out = {**_base(cols), "transport": _transports(cols),
           **{c: _num(cols, c) for c in ("size_mb", "time_ms", "bandwidth_gbps", "large_packet_ratio")}}
    used = (np.nan_to_num(out["size_mb"]) != 0) | (np.nan_to_num(out["time_ms"]) != 0)
    return comm_io.pending_columns(select_rows(out, used), rank, comm_io.BANDWIDTH_COLUMNS)


def _matrix_columns(cols: dict[str, list] | None, rank: int) -> PendingTable | None:
    cols = _as_columns(cols, "CommAnalyzerMatrix")
    if not cols or not cols.get("name"):
        return None
    cols = _not_total(cols)
    if "src" not in cols or "dst" not in cols:  # links without their two ends
        return None
    src, dst = _floats(cols["src"]), _floats(cols["dst"])
    ends = ~np.isnan(src) & ~np.isnan(dst)
    if not ends.any():
        return None
    cols = select_rows(cols, ends)
    base = _base(cols)
    out = {"step": base["step"], "src": src[ends].astype(np.int64), "dst": dst[ends].astype(np.int64),
           "transport": _transports(cols),
           "name": base["name"], "group": base["group"],
           **{c: _num(cols, c) for c in ("size_mb", "time_ms", "bandwidth_gbps")}}
    repeated = comm_io.repeated_links(out["name"], out["group"], out["step"], None)
    if repeated is not None:
        out = select_rows(out, ~np.array(repeated, dtype=bool))
    return comm_io.pending_columns(out, rank, comm_io.LINK_COLUMNS)


# ----------------------------------------------------------------- wiring

def read_into(reader, out_dir: Path, rank: int) -> None:
    """Fill ``reader.profile``'s steps, comm, bandwidth and links (left to
    build, as the text layout's) and ``reader.kernels`` from the databases
    in ``out_dir``; a broken database becomes a skip (``reader.attempt``)."""
    profile = reader.profile
    prof_db, ana_db = profiler_db(out_dir), analysis_db(out_dir)
    con = reader.attempt(ana_db, _connect) if ana_db is not None else None
    if con is not None:
        with con:  # one connection for its tables: each one that fails is a skip of its own
            profile.steps = reader.attempt(ana_db, lambda _: read_step_trace(con, rank))
            got = reader.attempt(ana_db, lambda _: read_comm_analysis(con, rank))
        if got is not None:
            profile.comm, profile.bandwidth, profile.links = got
            if profile.comm is not None:
                profile.meta.comm_source[rank] = level0.LEVEL1
    kernels = comm_ops = windows = None
    if prof_db is not None and not (reader.skips_kernels() and profile.comm is not None):
        got = reader.attempt(prof_db, read_kernels, not reader.skips_kernels())
        if got is not None:
            kernels, comm_ops, windows = got
    if kernels is not None:
        reader.kernels = kernels.table
        reader.kernels_origin_us = kernels.origin_us
        if profile.steps is None and windows is not None:
            profile.steps = steps_from_tasks(kernels, windows, rank)
            if profile.steps is not None:
                profile.meta.notes.append(
                    f"steps computed from STEP_TIME and task intervals of {_any_rank(prof_db)} "
                    "(no StepTraceTime table in analysis.db)")
    if profile.comm is None:
        profile.comm = comm_from_ops(comm_ops, windows, rank)
        if profile.comm is not None:
            profile.meta.comm_source[rank] = level0.LEVEL0
    if prof_db is not None:
        profile.device_freq = reader.attempt(prof_db, lambda path: read_freq(path, rank))
        profile.hccl_tasks = reader.attempt(prof_db, lambda path: hccl_tasks.read_db(path, rank))
    names = [_any_rank(p) for p in (prof_db, ana_db) if p is not None]
    profile.meta.notes.append(f"read from the database layout ({', '.join(names)})")


def read_freq(path: Path, rank: int):
    """``AICORE_FREQ(deviceId, timestampNs, freq)`` -> the ``device_freq``
    table (the AI Core clock, one row per change); None without the table."""
    with _connect(path) as con:
        if not _has_table(con, "AICORE_FREQ"):
            return None
        cols = con.columns("SELECT timestampNs, freq FROM AICORE_FREQ")
    times, freqs = _floats(cols["timestampNs"]), _floats(cols["freq"])
    samples = [(t / NS_PER_US, f) for t, f in zip(times.tolist(), freqs.tolist()) if np.isfinite(t) and np.isfinite(f)]
    return tables.freq_table(samples, rank)
