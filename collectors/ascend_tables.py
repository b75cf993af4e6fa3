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

from advisor.errors import InputError

from .csvio import read_columns

# --------------------------------------------------------------------- steps

_STEP_TRACE = {
    "step": ("Step", "Step ID", "Step Id"),
    "computing_us": ("Computing",),
    "exposed_comm_us": ("Communication(Not Overlapped)",),
    "overlapped_us": ("Overlapped",),
    "communication_us": ("Communication",),
    "free_us": ("Free",),
    "stage_us": ("Stage",),
    "bubble_us": ("Bubble",),
    "_exposed_no_recv": ("Communication(Not Overlapped and Exclude Receive)",),
}
_STEP_NUMERIC = tuple(_STEP_TRACE)


def _step_ids(col: pd.Series) -> pd.Series:
    """Step labels read as numbers (3.0, NaN) -> nullable Int64."""
    return col.round().astype("Int64")


def _finish_steps(df: pd.DataFrame, rank: int | pd.Series) -> pd.DataFrame:
    """Derive duration/receive columns from step_trace columns; add rank.

    duration_us = computing + exposed communication + free (Free is defined
    as step time minus computing and communication); when a part is absent
    the stage time stands in. receive_us = exposed communication minus the
    "exclude receive" variant.
    """
    parts = ["computing_us", "exposed_comm_us", "free_us"]
    if all(p in df for p in parts):
        df["duration_us"] = df[parts].sum(axis=1, min_count=3)
    if "stage_us" in df:
        stage = df["stage_us"].where(df["stage_us"] > 0)
        df["duration_us"] = df["duration_us"].fillna(stage) if "duration_us" in df else stage
    if "_exposed_no_recv" in df:
        if "exposed_comm_us" in df:
            df["receive_us"] = (df["exposed_comm_us"] - df["_exposed_no_recv"]).clip(lower=0.0)
        df = df.drop(columns="_exposed_no_recv")
    df.insert(0, "rank", rank)
    df["rank"] = df["rank"].astype("int64")
    df = df.dropna(axis=1, how="all")
    if "step" not in df:
        df.insert(1, "step", pd.array([pd.NA] * len(df), dtype="Int64"))
    return df.reset_index(drop=True)


def read_step_trace(path: Path, rank: int) -> pd.DataFrame:
    """``step_trace_time.csv`` -> steps (one row per step, times in us).

    Some versions lead with ``Device_id``; it is not read (the rank comes
    from the profiler metadata).
    """
    df = require_rows(path, read_columns(path, _STEP_TRACE, numeric=_STEP_NUMERIC,
                                         required=("computing_us",)), "step")
    if "step" in df:
        df["step"] = _step_ids(df["step"])
    df = _finish_steps(df, rank)
    if "duration_us" not in df:
        raise InputError(path, "no step has a duration (Computing/Free/Stage all empty)")
    return df


_CLUSTER_STEP = {"type": ("Type",), "index": ("Index",), **_STEP_TRACE}


def read_cluster_step_trace(path: Path) -> pd.DataFrame:
    """msprof-analyze ``cluster_step_trace_time.csv`` -> steps with rank = Index.

    Only ``Type == rank`` rows are read (``stage`` rows aggregate ranks).
    """
    df = read_columns(path, _CLUSTER_STEP, numeric=_STEP_NUMERIC,
                      required=("type", "index", "computing_us"))
    df = df[df["type"].str.lower() == "rank"]
    ranks = pd.to_numeric(df["index"], errors="coerce")
    df = require_rows(path, df[ranks.notna()].drop(columns=["type", "index"]), "Type=rank")
    df["step"] = _step_ids(df["step"]) if "step" in df else pd.NA
    return _finish_steps(df, ranks[ranks.notna()].astype("int64").to_numpy())


# ----------------------------------------------------------------------- ops

_KERNELS = {
    "step": ("Step Id", "Step ID"),
    "name": ("Name", "Op Name"),
    "type": ("Type", "OP Type"),
    "core": ("Accelerator Core", "Task Type"),
    "start_us": ("Start Time(us)",),
    "duration_us": ("Duration(us)",),
    "wait_us": ("Wait Time(us)",),
    "input_shapes": ("Input Shapes",),
    "input_dtypes": ("Input Data Types",),
}
_DTYPE_ALIASES = {
    "BFLOAT16": "BF16", "FLOAT32": "FLOAT", "FP32": "FLOAT", "FP16": "FLOAT16",
    "HALF": "FLOAT16", "DOUBLE": "FLOAT64", "FP64": "FLOAT64",
}


def normalize_dtypes(col: pd.Series) -> pd.Series:
    """"DT_BF16;DT_BF16" -> "BF16;BF16": upper case, no DT_ prefix, aliases unified."""
    def one(text):
        if text is None or text is pd.NA:
            return pd.NA
        parts = []
        for part in str(text).split(";"):
            p = part.strip().upper()
            p = p[3:] if p.startswith("DT_") else p
            parts.append(_DTYPE_ALIASES.get(p, p))
        return ";".join(parts)

    values = col.dropna().unique()
    mapping = {v: one(v) for v in values}
    return col.map(mapping).astype("string")


def read_kernel_details(path: Path) -> pd.DataFrame:
    """``kernel_details.csv`` -> one row per kernel (our column names, us).

    Columns that the file's version lacks are simply absent. Start times
    with a trailing TAB parse as floats.
    """
    df = read_columns(path, _KERNELS, numeric=("step", "start_us", "duration_us", "wait_us"),
                      required=("name", "duration_us"))
    if "step" in df:
        df["step"] = _step_ids(df["step"])
    if "input_dtypes" in df:
        df["input_dtypes"] = normalize_dtypes(df["input_dtypes"])
    if "core" in df:
        df["core"] = df["core"].str.upper()
    df = df.dropna(subset=["duration_us"]).reset_index(drop=True)
    return require_rows(path, df, "kernel")


_OP_KEYS = ("name", "type", "core", "input_dtypes", "input_shapes")


def aggregate_kernels(kernels: pd.DataFrame, rank: int) -> pd.DataFrame | None:
    """Per-kernel rows -> ops table: one row per (name, type, core, dtypes, shapes)."""
    if kernels.empty:
        return None
    keys = [k for k in _OP_KEYS if k in kernels]
    agg = {"count": ("duration_us", "size"), "total_us": ("duration_us", "sum"),
           "max_us": ("duration_us", "max"), "min_us": ("duration_us", "min")}
    if "wait_us" in kernels and kernels["wait_us"].notna().any():
        agg["wait_us"] = ("wait_us", "sum")
    ops = kernels.groupby(keys, dropna=False, sort=False).agg(**agg).reset_index()
    ops.insert(0, "rank", rank)
    ops["rank"] = ops["rank"].astype("int64")
    ops["count"] = ops["count"].astype("int64")
    return ops.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


def device_busy(kernels: pd.DataFrame) -> pd.DataFrame | None:
    """Union length of all kernel intervals per step (``device_busy_us``).

    Needs ``step`` and ``start_us``; None when the file lacks them.
    """
    if not {"step", "start_us"} <= set(kernels) or kernels["step"].isna().all():
        return None
    rows = []
    for step, grp in kernels.dropna(subset=["start_us", "duration_us"]).groupby("step"):
        start = grp["start_us"].to_numpy()
        order = np.argsort(start, kind="stable")
        start = start[order]
        end = start + grp["duration_us"].to_numpy()[order]
        reach = np.maximum.accumulate(end)
        # A new busy block starts where a kernel begins after everything before ended.
        new = np.r_[True, start[1:] > reach[:-1]]
        block_end = np.maximum.reduceat(end, np.flatnonzero(new))
        rows.append({"step": int(step), "device_busy_us": float(np.sum(block_end - start[new]))})
    if not rows:
        return None
    out = pd.DataFrame(rows)
    out["step"] = out["step"].astype("Int64")
    return out


_OP_STATISTIC = {
    "type": ("OP Type",),
    "core": ("Core Type",),
    "count": ("Count",),
    "total_us": ("Total Time(us)",),
    "min_us": ("Min Time(us)",),
    "max_us": ("Max Time(us)",),
}


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


_CPU_DETAIL = {
    "name": ("full_op_name", "op_name"),
    "type": ("op_type",),
    "count": ("op_occurrences",),
    "total_ms": ("op_total_time(ms)",),
}
_CPU_TYPE = {
    "type": ("op_type",),
    "count": ("type_occurrences",),
    "total_ms": ("total_compute_time", "total_compute_time(ms)", "total_time(ms)"),
}


def read_cpu_ops(path: Path, rank: int) -> pd.DataFrame:
    """MindSpore ``FRAMEWORK/cpu_op_detail_info_*.csv`` (or ``cpu_op_type_info_*``)
    -> ops with core "CPU"; times there are milliseconds."""
    detail = path.name.startswith("cpu_op_detail_info")
    df = read_columns(path, _CPU_DETAIL if detail else _CPU_TYPE,
                      numeric=("count", "total_ms"), required=("type", "count", "total_ms"))
    df = require_rows(path, df.dropna(subset=["type", "total_ms"]), "operator")
    if "name" not in df:
        df.insert(0, "name", df["type"])
    out = pd.DataFrame({
        "rank": np.full(len(df), rank, dtype="int64"),
        "name": df["name"].fillna(df["type"]),
        "type": df["type"],
        "core": "CPU",
        "count": df["count"].fillna(0).astype("int64"),
        "total_us": df["total_ms"] * 1000.0,
    })
    return out.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


# ------------------------------------------------------------------ data_ops

_DATASET = {
    "name": ("Operation",),
    "stage": ("Stage",),
    "count": ("Occurrences",),
    "avg_time_us": ("Avg. time(us)", "Avg time(us)"),
}


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
