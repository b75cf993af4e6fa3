"""The dataset pipeline -> ``data_ops``: ``minddata_pipeline_raw_{rank}.csv``,
else ``pipeline_profiling_{rank}.json`` (per op its type, workers, output
connector queue and tree links)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from advisor.collectors.io.csv_files import read_columns
from advisor.collectors.io.files import load_json
from advisor.collectors.mindinsight import cpu_util
from advisor.collectors.mindinsight.frames import drop_empty, put_float, put_int
from advisor.collectors.mindinsight.layout import PIPELINE_CSV_FILE, PIPELINE_JSON_FILE
from advisor.errors import InputError
from advisor.profile import Profile


def data_ops(profile: Profile, folder: Path, fid: int, rank: int) -> pd.DataFrame | None:
    """``data_ops`` from the pipeline CSV, else the pipeline JSON, with each
    op's CPU use from ``minddata_cpu_utilization`` (``cpu_util``)."""
    ops = _pipeline(profile, folder, fid, rank)
    cpu_path = folder / cpu_util.FILE.format(fid)
    if ops is None or not cpu_path.is_file():
        return ops
    try:
        return cpu_util.add_cpu(ops, cpu_util.op_cpu(cpu_path))
    except InputError as exc:
        profile.skip(exc.path, exc.problem)
        return ops


def _pipeline(profile: Profile, folder: Path, fid: int, rank: int) -> pd.DataFrame | None:
    """``data_ops`` from the pipeline CSV, else the pipeline JSON."""
    csv_path = folder / PIPELINE_CSV_FILE.format(fid)
    json_path = folder / PIPELINE_JSON_FILE.format(fid)
    if csv_path.is_file():
        try:
            return _data_ops_from_csv(csv_path, rank)
        except InputError as exc:
            if not json_path.is_file():
                raise
            profile.skip(exc.path, exc.problem + "; used " + json_path.name)
    if json_path.is_file():
        return _data_ops_from_json(json_path, rank)
    return None


def _data_ops_from_csv(path: Path, rank: int) -> pd.DataFrame:
    """``minddata_pipeline_raw_{rank}.csv`` -> ``data_ops``."""
    wanted = {
        "op_id": ("op_id",),
        "op_type": ("op_type",),
        "num_workers": ("num_workers",),
        "avg": ("output_queue_average_size",),
        "length": ("output_queue_length",),
        "usage": ("output_queue_usage_rate",),
        "parent_id": ("parent_id",),
    }
    frame = read_columns(
        path,
        wanted,
        numeric=("op_id", "num_workers", "avg", "length", "usage", "parent_id"),
        required=("op_id", "op_type"),
    )
    frame = frame[frame["op_id"].notna()]
    if frame.empty:
        raise InputError(path, "no pipeline operators")
    out = pd.DataFrame({"rank": rank, "op_id": frame["op_id"].astype("int64").to_numpy()})
    out["name"] = frame["op_type"].astype("string").to_numpy()
    put_int(out, "workers", frame.get("num_workers"))
    usage = frame.get("usage")
    if usage is None and "avg" in frame and "length" in frame:
        usage = frame["avg"] / frame["length"].where(frame["length"] > 0)
    elif usage is not None and "length" in frame:
        # The root op feeds the training loop, not a connector queue: its
        # queue cells are empty and its usage rate a placeholder 0.
        usage = usage.where(frame["length"].notna())
    put_float(out, "output_queue_usage", usage)
    put_float(out, "output_queue_size", frame.get("avg"))
    put_float(out, "output_queue_capacity", frame.get("length"))
    put_int(out, "parent_id", frame.get("parent_id"), keep_all_na=True)
    return out


def _data_ops_from_json(path: Path, rank: int) -> pd.DataFrame:
    """``pipeline_profiling_{rank}.json`` (``sampling_interval``, ``op_info``
    with ``metrics.output_queue.{size,length}`` and ``children``) -> ``data_ops``."""
    data = load_json(path)
    ops = data.get("op_info") if isinstance(data, dict) else None
    if not isinstance(ops, list) or not ops:
        raise InputError(path, "no 'op_info' list of pipeline operators")
    parent: dict[int, int] = {}
    rows = []
    for op in ops:
        if not isinstance(op, dict) or not isinstance(op.get("op_id"), int):
            raise InputError(path, "an 'op_info' entry lacks an integer 'op_id'")
        for child in op.get("children") or []:
            if isinstance(child, int):
                parent[child] = op["op_id"]
        rows.append(_json_op_row(op))
    out = pd.DataFrame(rows)
    out.insert(0, "rank", rank)
    out["parent_id"] = pd.array([parent.get(i) for i in out["op_id"]], dtype="Int64")
    out["workers"] = pd.array(out["workers"], dtype="Int64")
    return drop_empty(out)


def _json_op_row(op: dict) -> dict:
    """One pipeline op of the JSON as a ``data_ops`` row (queue stats computed)."""
    queue = (op.get("metrics") or {}).get("output_queue") or {}
    sizes = [s for s in queue.get("size") or [] if isinstance(s, (int, float))]
    length = queue.get("length")
    avg = float(np.mean(sizes)) if sizes else np.nan
    cap = float(length) if isinstance(length, (int, float)) and length > 0 else np.nan
    return {
        "op_id": op["op_id"],
        "name": str(op.get("op_type", "")),
        "workers": op.get("num_workers") if isinstance(op.get("num_workers"), int) else None,
        "output_queue_usage": avg / cap if sizes and cap == cap else np.nan,
        "output_queue_size": avg,
        "output_queue_capacity": cap,
    }


