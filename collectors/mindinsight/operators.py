"""Operators -> ``ops``: per-operator AI Core time
(``aicore_intermediate_{rank}_detail.csv``, counts from
``output_op_compute_time_{rank}.txt``), typed and dtyped by
``framework_raw_{rank}.csv``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from advisor.collectors import vocab
from advisor.collectors.io.csv_files import read_columns
from advisor.collectors.mindinsight.frames import read_space_table
from advisor.collectors.mindinsight.layout import FRAMEWORK_FILE, OP_COMPUTE_FILE, OP_DETAIL_FILE
from advisor.errors import InputError
from advisor.profile import Profile


def ops(profile: Profile, folder: Path, fid: int, rank: int, framework) -> pd.DataFrame | None:
    """``ops`` from the AI Core detail file, typed and dtyped by framework_raw."""
    detail_path = folder / OP_DETAIL_FILE.format(fid)
    if not detail_path.is_file():
        return None
    detail = _op_detail(detail_path)
    counts = _op_counts(profile, folder / OP_COMPUTE_FILE.format(fid))
    if "count" not in detail:
        if counts is not None:
            detail = detail.merge(counts, on="full_op_name", how="left")
        else:
            profile.meta.notes.append(
                "ops: the operator detail file has per-execution averages only; "
                "count unknown, total_us is the average per execution"
            )
            detail["count"] = pd.NA
    detail["total_us"] = detail["avg_us"] * detail["count"].astype("Float64").fillna(1.0).to_numpy(dtype="float64")
    if framework is not None:
        detail = detail.merge(framework, on="full_op_name", how="left")
    return _ops_rows(detail, rank)


def _op_detail(path: Path) -> pd.DataFrame:
    """The AI Core detail file of either era.

    1.x: ``full_op_name, execution_time`` (average ms per execution).
    2.x: ``full_op_name, task_duration`` (average us), ``execution_frequency``,
    ``task_type``.
    """
    wanted = {
        "full_op_name": ("full_op_name", "op_name"),
        "execution_time": ("execution_time",),
        "task_duration": ("task_duration",),
        "count": ("execution_frequency",),
        "task_type": ("task_type",),
    }
    frame = read_columns(path, wanted, numeric=("execution_time", "task_duration", "count"), required=("full_op_name",))
    if "task_duration" in frame:
        avg = frame["task_duration"]
    elif "execution_time" in frame:
        avg = frame["execution_time"] * 1000.0
    else:
        raise InputError(path, "missing required column(s): execution_time or task_duration")
    out = pd.DataFrame({"full_op_name": frame["full_op_name"], "avg_us": avg.astype("float64")})
    if "count" in frame:
        out["count"] = pd.array(np.round(frame["count"].to_numpy(dtype="float64")), dtype="Float64").astype("Int64")
    out["core"] = frame["task_type"] if "task_type" in frame else "AI_CORE"
    out = out[out["full_op_name"].notna() & out["avg_us"].notna()]
    if out.empty:
        raise InputError(path, "no operator rows with a time")
    return out


def _op_counts(profile: Profile, path: Path) -> pd.DataFrame | None:
    """Executions per op from ``output_op_compute_time`` (1.x):
    ``op_name compute_time(ms) stream_id execution_times`` lines."""
    if not path.is_file():
        return None
    try:
        raw = read_space_table(path, 1)
    except InputError as exc:
        profile.skip(exc.path, exc.problem)
        return None
    if raw.shape[1] < 4:
        profile.skip(str(path), "no 'op_name time stream count' lines")
        return None
    count = pd.to_numeric(raw[3], errors="coerce")
    time_ok = pd.to_numeric(raw[1], errors="coerce").notna()
    keep = count.notna() & time_ok & (raw[0] != "total")
    if not keep.any():
        profile.skip(str(path), "no 'op_name time stream count' lines")
        return None
    return pd.DataFrame({"full_op_name": raw.loc[keep, 0], "count": count[keep].astype("int64").to_numpy()})


def framework_ops(profile: Profile, folder: Path, fid: int) -> pd.DataFrame | None:
    """framework_raw -> per full op name: type, input dtypes/shapes, tensor count."""
    path = folder / FRAMEWORK_FILE.format(fid)
    if not path.is_file():
        return None
    try:
        return _framework(path)
    except InputError as exc:
        profile.skip(exc.path, exc.problem)
        return None


def _framework(path: Path) -> pd.DataFrame:
    """``framework_raw_{rank}.csv``: ``full_op_name, op_type, op_info``."""
    wanted = {"full_op_name": ("full_op_name",), "op_type": ("op_type",), "op_info": ("op_info",)}
    frame = read_columns(path, wanted, required=("full_op_name", "op_type"))
    frame = frame[frame["full_op_name"].notna()].drop_duplicates("full_op_name")
    infos = [_inputs(v) for v in frame.get("op_info", pd.Series([None] * len(frame)))]
    out = pd.DataFrame({"full_op_name": frame["full_op_name"].to_numpy(), "type": frame["op_type"].to_numpy()})
    out["input_dtypes"] = [i[0] for i in infos]
    out["input_shapes"] = [i[1] for i in infos]
    out["tensor_count"] = pd.array([i[2] for i in infos], dtype="Int64")
    return out


def _inputs(op_info) -> tuple[str | None, str | None, int | None]:
    """(dtypes ';'-joined, shapes ';'-joined, number of inputs) from op_info JSON."""
    if op_info is None or pd.isna(op_info) or not str(op_info).strip():
        return None, None, None
    try:
        info = orjson.loads(str(op_info))
    except orjson.JSONDecodeError:
        return None, None, None
    if not isinstance(info, dict):
        return None, None, None
    keys = sorted(
        (k for k in info if k.lower().startswith("input_")),
        key=lambda k: int(k.split("_", 1)[1]) if k.split("_", 1)[1].isdigit() else 0,
    )
    if not keys:
        return None, None, 0
    dtypes, shapes = [], []
    for key in keys:
        item = info[key] if isinstance(info[key], dict) else {}
        dtypes.append(vocab.dtype(item.get("data_type", "UNKNOWN")) or "UNKNOWN")
        shapes.append(_shape_text(item.get("shape")))
    return ";".join(dtypes), ";".join(shapes), len(keys)


def _shape_text(shape) -> str:
    """``[32, 3, 224, 224]`` or ``"32,3,224,224"`` -> ``32,3,224,224``."""
    if isinstance(shape, (list, tuple)):
        return ",".join(str(int(d)) for d in shape)
    return str(shape or "").strip().strip('"[]').replace(" ", "")


def _ops_rows(detail: pd.DataFrame, rank: int) -> pd.DataFrame:
    """Final ``ops`` table (aggregated per name/type/core/dtypes/shapes)."""
    name = detail["full_op_name"].astype("string").str.rsplit("/", n=1).str[-1]
    type_ = detail["type"] if "type" in detail else pd.Series(pd.NA, index=detail.index)
    type_ = type_.astype("string").fillna(name.str.split("-op", n=1).str[0])
    out = pd.DataFrame(
        {
            "rank": rank,
            "name": name.to_numpy(),
            "type": type_.to_numpy(),
            "core": detail["core"].astype("string").to_numpy(),
            "count": pd.array(detail["count"], dtype="Int64"),
            "total_us": detail["total_us"].to_numpy(dtype="float64"),
        }
    )
    for col in ("input_dtypes", "input_shapes"):
        if col in detail and detail[col].notna().any():
            out[col] = detail[col].astype("string").to_numpy()
    return out.reset_index(drop=True)

