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
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import numpy as np
import pyarrow as pa
import pandas as pd

from advisor.errors import InputError

from . import ascend_comm as comm_io
from . import comm_rollup, listing
from . import ascend_tables as tables

PROFILER_DB_GLOBS = ("ascend_pytorch_profiler*.db", "ascend_mindspore_profiler*.db")
ANALYSIS_DBS = ("analysis.db", "communication_analyzer.db")
NS_PER_US = 1000.0
US_PER_MS = 1000.0
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


class _Con:
    """A read-only sqlite3 connection that turns SQLite errors into InputError."""

    def __init__(self, path: Path):
        self.path = Path(path)
        uri = self.path.absolute().as_uri() + "?mode=ro&immutable=1"
        try:
            self.con = sqlite3.connect(uri, uri=True)
            self.con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            raise InputError(path, f"not a readable SQLite database ({exc})") from None

    def execute(self, sql: str, params=()):
        try:
            return self.con.execute(sql, params)
        except sqlite3.Error as exc:
            raise InputError(self.path, f"unexpected database schema ({exc})") from None

    def frame(self, sql: str) -> pd.DataFrame:
        cur = self.execute(sql)
        cols = [d[0] for d in cur.description]
        return pd.DataFrame(cur.fetchall(), columns=cols)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.con.close()


def _connect(path: Path) -> _Con:
    return _Con(path)


def _readable(path: Path) -> bool:
    """True, or InputError when ``path`` is not a SQLite database."""
    with _connect(path):
        return True


def _has_table(con: _Con, name: str) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None


def _columns(con: _Con, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info({table})")}


def _step_number(col: pd.Series) -> pd.Series:
    """"step12" / "12" / None -> nullable Int64."""
    text = col.astype("string").str.extract(_DIGITS, expand=False)
    return pd.to_numeric(text, errors="coerce").astype("Int64")


# ------------------------------------------------------------------ steps

_STEP_TRACE_COLUMNS = {
    "step": "step",
    "computing": "computing_us",
    "communication_not_overlapped": "exposed_comm_us",
    "overlapped": "overlapped_us",
    "communication": "communication_us",
    "free": "free_us",
    "stage": "stage_us",
    "bubble": "bubble_us",
    "communication_not_overlapped_and_exclude_receive": "_exposed_no_recv",
}


def read_step_trace(path: Path, rank: int) -> pd.DataFrame | None:
    """analysis.db ``StepTraceTime`` -> steps (None when the table is absent)."""
    with _connect(path) as con:
        if not _has_table(con, "StepTraceTime"):
            return None
        have = _columns(con, "StepTraceTime")
        cols = [c for c in _STEP_TRACE_COLUMNS if c in have]
        if "computing" not in cols:
            raise InputError(path, "StepTraceTime has no computing column")
        df = con.frame(f"SELECT {', '.join(cols)} FROM StepTraceTime")
    df = df.rename(columns=_STEP_TRACE_COLUMNS)
    for col in df.columns:
        if col != "step":
            df[col] = pd.to_numeric(df[col], errors="coerce")
    numeric = [c for c in df.columns if c != "step"]
    df = df[df[numeric].fillna(0).abs().sum(axis=1) > 0]  # torch_npu writes an all-zero row when no steps
    if df.empty:
        return None
    if "step" in df:
        df["step"] = _step_number(df["step"])
    return tables.finish_steps(df.reset_index(drop=True), rank)


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


def _step_windows(con: _Con) -> pd.DataFrame | None:
    if not _has_table(con, "STEP_TIME"):
        return None
    df = con.frame("SELECT id AS step, startNs, endNs FROM STEP_TIME ORDER BY startNs")
    return df if not df.empty else None


def _assign_steps(start_ns: np.ndarray, windows: pd.DataFrame | None) -> pd.Series:
    """Step id of each start time (the window it falls in), NA outside all."""
    if windows is None:
        return pd.Series(pd.array([pd.NA] * len(start_ns), dtype="Int64"))
    w_start = windows["startNs"].to_numpy(dtype="int64")
    w_end = windows["endNs"].to_numpy(dtype="int64")
    idx = np.searchsorted(w_start, start_ns, side="right") - 1
    ok = (idx >= 0) & (start_ns < w_end[np.clip(idx, 0, None)])
    ids = windows["step"].to_numpy()
    out = pd.array([pd.NA] * len(start_ns), dtype="Int64")
    out[ok] = ids[idx[ok]].astype("int64")
    return pd.Series(out)


def steps_from_tasks(kernels: pd.DataFrame, windows: pd.DataFrame, rank: int) -> pd.DataFrame | None:
    """Step breakdown from task intervals (see module doc); ``kernels`` carries
    step, start_us, duration_us and core (HCCL = communication)."""
    rows = []
    for _, w in windows.iterrows():
        step = int(w["step"])
        grp = kernels[kernels["step"] == step]
        start = grp["start_us"].to_numpy()
        end = start + grp["duration_us"].to_numpy()
        is_comm = (grp["core"] == "HCCL").to_numpy()
        is_recv = grp["name"].str.startswith("hcom_receive").fillna(False).to_numpy()
        compute = _union(start[~is_comm], end[~is_comm])
        comm = _union(start[is_comm], end[is_comm])
        bubble = _length(_union(start[is_recv], end[is_recv]))
        exposed = _minus(comm, compute)
        computing, communication = _length(compute), _length(comm)
        window = (int(w["endNs"]) - int(w["startNs"])) / NS_PER_US
        span = float(end.max() - start.min()) if len(start) else 0.0
        rows.append({
            "step": step, "computing_us": computing, "exposed_comm_us": exposed,
            "overlapped_us": communication - exposed, "communication_us": communication,
            "free_us": max(window - computing - exposed, 0.0), "stage_us": span - bubble,
            "bubble_us": bubble, "_exposed_no_recv": exposed - bubble,
        })
    if not rows:
        return None
    df = pd.DataFrame(rows)
    df["step"] = df["step"].astype("Int64")
    return tables.finish_steps(df, rank)


# -------------------------------------------------------------------- ops

_KERNEL_SQL = """
SELECT n.value AS name, ot.value AS type, tt.value AS core,
       dt.value AS input_dtypes, sh.value AS input_shapes, t.startNs, t.endNs
FROM COMPUTE_TASK_INFO c
JOIN TASK t ON t.globalTaskId = c.globalTaskId
LEFT JOIN STRING_IDS n ON n.id = c.name
LEFT JOIN STRING_IDS ot ON ot.id = c.opType
LEFT JOIN STRING_IDS tt ON tt.id = c.taskType
LEFT JOIN STRING_IDS dt ON dt.id = c.inputDataTypes
LEFT JOIN STRING_IDS sh ON sh.id = c.inputShapes
"""
_COMM_OP_SQL = """
SELECT n.value AS name, ot.value AS type, g.value AS "group", o.startNs, o.endNs
FROM COMMUNICATION_OP o
LEFT JOIN STRING_IDS n ON n.id = o.opName
LEFT JOIN STRING_IDS ot ON ot.id = o.opType
LEFT JOIN STRING_IDS g ON g.id = o.groupName
"""
_NA_TEXT = {"N/A", "NA", ""}


def read_kernels(path: Path) -> tuple[pd.DataFrame | None, pd.DataFrame | None, pd.DataFrame | None]:
    """Profiler db -> (kernels like kernel_details.csv, comm operators, step windows).

    Kernels are compute tasks plus communication operators (core HCCL), as
    kernel_details.csv lists them; times in us, ``step`` from STEP_TIME.
    """
    with _connect(path) as con:
        if not _has_table(con, "STRING_IDS"):
            raise InputError(path, "no STRING_IDS table (not an Ascend profiler database?)")
        windows = _step_windows(con)
        parts = []
        if _has_table(con, "COMPUTE_TASK_INFO") and _has_table(con, "TASK"):
            parts.append(con.frame(_KERNEL_SQL))
        comm = con.frame(_COMM_OP_SQL) if _has_table(con, "COMMUNICATION_OP") else None
    if comm is not None and not comm.empty:
        parts.append(comm.drop(columns="group").assign(core="HCCL"))
    parts = [p for p in parts if not p.empty]
    if not parts:
        return None, None, windows
    kernels = pd.concat(parts, ignore_index=True)
    # Integer ns until after subtraction: a float64 epoch-ns time is only
    # exact to ~256 ns. start_us is relative to the first step (or task).
    start = kernels["startNs"].to_numpy(dtype="int64")
    base = int(windows["startNs"].min()) if windows is not None else int(start.min())
    kernels["step"] = _assign_steps(start, windows)
    kernels["start_us"] = (start - base) / NS_PER_US
    kernels["duration_us"] = (kernels["endNs"].to_numpy(dtype="int64") - start) / NS_PER_US
    kernels = kernels.drop(columns=["startNs", "endNs"])
    kernels.attrs["base_ns"] = base
    for col in ("name", "type", "core", "input_dtypes", "input_shapes"):
        if col in kernels:
            kernels[col] = kernels[col].astype("string").mask(kernels[col].isin(_NA_TEXT))
    kernels["core"] = kernels["core"].str.upper()
    if "input_dtypes" in kernels:
        kernels["input_dtypes"] = tables.normalize_dtypes(kernels["input_dtypes"])
    kernels = kernels.sort_values("start_us", kind="stable").reset_index(drop=True)
    return kernels, comm, windows


def comm_from_ops(comm: pd.DataFrame, windows, rank: int) -> pd.DataFrame | None:
    """COMMUNICATION_OP rows -> comm table (no wait/transit split: that needs analysis.db)."""
    if comm is None or comm.empty:
        return None
    start = comm["startNs"].to_numpy(dtype="int64")
    rows = pd.DataFrame({
        "rank": rank, "step": _assign_steps(start, windows), "name": comm["name"],
        "kind": comm["name"].map(comm_io.comm_kind), "group": comm["group"],
        "start_us": start / NS_PER_US,
        "elapse_us": (comm["endNs"].to_numpy(dtype="int64") - start) / NS_PER_US,
    })
    rows["rank"] = rows["rank"].astype("int64")
    return rows.dropna(axis=1, how="all").reset_index(drop=True)


# ------------------------------------------------------------ communication

def _not_total(df: pd.DataFrame) -> pd.DataFrame:
    return df[~df["hccl_op_name"].astype("string").str.startswith("Total").fillna(False)]


def read_comm_analysis(path: Path, rank: int):
    """analysis.db CommAnalyzer* -> (comm, bandwidth, links); each None when absent."""
    with _connect(path) as con:
        time = con.frame("SELECT * FROM CommAnalyzerTime") if _has_table(con, "CommAnalyzerTime") else None
        band = (con.frame("SELECT * FROM CommAnalyzerBandwidth")
                if _has_table(con, "CommAnalyzerBandwidth") else None)
        matrix = (con.frame("SELECT * FROM CommAnalyzerMatrix")
                  if _has_table(con, "CommAnalyzerMatrix") else None)
    return _time_frame(time, rank), _band_frame(band, rank), _matrix_frame(matrix, rank)


def _base(df: pd.DataFrame, rank: int) -> dict:
    name = df["hccl_op_name"].astype("string")
    return {"rank": np.full(len(df), rank, dtype="int64"),
            "step": _step_number(df["step"]) if "step" in df else pd.NA,
            "name": name, "kind": name.map(comm_io.comm_kind),
            "group": df["group_name"].astype("string") if "group_name" in df else pd.NA}


def _num(df: pd.DataFrame, col: str, scale: float = 1.0):
    return pd.to_numeric(df[col], errors="coerce") * scale if col in df else np.nan


def _time_frame(df: pd.DataFrame | None, rank: int) -> pd.DataFrame | None:
    if df is None or df.empty:
        return None
    df = _not_total(df).reset_index(drop=True)
    out = pd.DataFrame({
        **_base(df, rank),
        "start_us": _num(df, "start_timestamp"),
        "elapse_us": _num(df, "elapse_time", US_PER_MS),
        "transit_us": _num(df, "transit_time", US_PER_MS),
        "wait_us": _num(df, "wait_time", US_PER_MS),
        "sync_us": _num(df, "synchronization_time", US_PER_MS),
        "idle_us": _num(df, "idle_time", US_PER_MS),
    })
    out = out.dropna(subset=["elapse_us"]).dropna(axis=1, how="all")
    return out.reset_index(drop=True) if not out.empty else None


def _band_frame(df: pd.DataFrame | None, rank: int) -> pd.DataFrame | None:
    if df is None or df.empty:
        return None
    df = _not_total(df)
    key = [c for c in ("step", "hccl_op_name", "group_name", "transport_type") if c in df]
    df = df.drop_duplicates(subset=key, keep="first").reset_index(drop=True)  # one row per packet size
    out = pd.DataFrame({
        **_base(df, rank),
        "transport": df["transport_type"].astype("string").str.upper(),
        "size_mb": _num(df, "transit_size"), "time_ms": _num(df, "transit_time"),
        "bandwidth_gbps": _num(df, "bandwidth"), "large_packet_ratio": _num(df, "large_packet_ratio"),
    })
    used = (out["size_mb"].fillna(0) != 0) | (out["time_ms"].fillna(0) != 0)
    out = out[used].dropna(axis=1, how="all")
    return out.reset_index(drop=True) if not out.empty else None


def _matrix_frame(df: pd.DataFrame | None, rank: int) -> pd.DataFrame | None:
    if df is None or df.empty:
        return None
    df = _not_total(df).reset_index(drop=True)
    src = pd.to_numeric(df["src_rank"], errors="coerce")
    dst = pd.to_numeric(df["dst_rank"], errors="coerce")
    df = df[src.notna() & dst.notna()].reset_index(drop=True)
    if df.empty:
        return None
    out = pd.DataFrame({
        "rank": np.full(len(df), rank, dtype="int64"),
        "step": _step_number(df["step"]) if "step" in df else pd.NA,
        "src": pd.to_numeric(df["src_rank"]).astype("int64"),
        "dst": pd.to_numeric(df["dst_rank"]).astype("int64"),
        "transport": df["transport_type"].astype("string").str.upper(),
        "name": df["hccl_op_name"].astype("string"),
        "group": df["group_name"].astype("string") if "group_name" in df else pd.NA,
        "size_mb": _num(df, "transit_size"), "time_ms": _num(df, "transit_time"),
        "bandwidth_gbps": _num(df, "bandwidth"),
    })
    repeated = comm_io.repeated_links(out["name"].tolist(), out["group"].tolist(), out["step"].tolist(), None)
    if repeated is not None:
        out = out[[not r for r in repeated]]
    return out.dropna(axis=1, how="all").reset_index(drop=True)


# ----------------------------------------------------------------- wiring

def read_into(reader, out_dir: Path, rank: int) -> None:
    """Fill ``reader.profile``'s steps, ops, comm, bandwidth and links from the
    databases in ``out_dir``; a broken database becomes a skip (``reader.attempt``)."""
    profile = reader.profile
    prof_db, ana_db = profiler_db(out_dir), analysis_db(out_dir)
    kernels = comm_ops = windows = None
    if prof_db is not None:
        got = reader.attempt(prof_db, read_kernels)
        if got is not None:
            kernels, comm_ops, windows = got
    if ana_db is not None and reader.attempt(ana_db, _readable) is not None:
        profile.steps = reader.attempt(ana_db, read_step_trace, rank)
        got = reader.attempt(ana_db, read_comm_analysis, rank)
        if got is not None:
            comm, bandwidth, links = got
            profile.comm = _rolled_up("comm", comm)
            profile.bandwidth, profile.links = _rolled_up("bandwidth", bandwidth), _rolled_up("links", links)
    if kernels is not None and not kernels.empty:
        profile.ops = tables.aggregate_kernels(kernels, rank)
        if profile.steps is None and windows is not None:
            profile.steps = steps_from_tasks(kernels, windows, rank)
            if profile.steps is not None:
                profile.meta.notes.append(
                    f"steps computed from STEP_TIME and task intervals of {prof_db.name} "
                    "(no StepTraceTime table in analysis.db)")
        _add_device_busy(profile, kernels)
    if profile.comm is None and comm_ops is not None:
        profile.comm = _rolled_up("comm", comm_from_ops(comm_ops, windows, rank))
    profile.meta.notes.append("read from the database layout (" + ", ".join(
        p.name for p in (prof_db, ana_db) if p is not None) + ")")


def _rolled_up(name: str, frame: pd.DataFrame | None) -> pa.Table | None:
    """A comm, bandwidth or links frame as the collectors keep it (``comm_rollup``)."""
    if frame is None:
        return None
    return comm_rollup.rollup(name, pa.Table.from_pandas(frame, preserve_index=False))


def _add_device_busy(profile, kernels: pd.DataFrame) -> None:
    """Add per-step device busy time (``ascend_tables.busy_for_steps``) to the steps table."""
    steps = profile.steps
    if steps is None or steps["step"].isna().all():
        return
    busy = tables.busy_for_steps(steps["step"].to_numpy(dtype=np.float64, na_value=np.nan),
                                 pa.Table.from_pandas(kernels[["step", "start_us", "duration_us"]],
                                                      preserve_index=False))
    if busy is not None:
        profile.steps = steps.assign(device_busy_us=busy)
