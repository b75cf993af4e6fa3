"""Data queue samples -> ``data_queue``: the host queue
(``device_queue_profiling`` / ``dataset_iterator_profiling`` type-1
records) and the device queue (GetNext in ``minddata_aicpu``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from advisor.collectors.mindinsight.frames import drop_empty, read_space_table
from advisor.collectors.mindinsight.layout import AICPU_QUEUE_FILE, DEVICE_QUEUE_FILE, ITERATOR_FILE
from advisor.errors import InputError
from advisor.profile import Profile


def data_queue(profile: Profile, folder: Path, fid: int, rank: int) -> pd.DataFrame | None:
    """``data_queue`` rows: host queue (device_queue / dataset_iterator
    tracing) and device queue (GetNext in minddata_aicpu)."""
    parts = []
    host = folder / DEVICE_QUEUE_FILE.format(fid)
    if not host.is_file():
        host = folder / ITERATOR_FILE.format(fid)
    for path, fn in ((host, _host_queue), (folder / AICPU_QUEUE_FILE.format(fid), _device_queue)):
        if not path.is_file():
            continue
        try:
            parts.append(fn(path))
        except InputError as exc:
            profile.skip(exc.path, exc.problem)
    parts = [p for p in parts if len(p)]
    if not parts:
        return None
    out = pd.concat(parts, ignore_index=True)
    out.insert(0, "rank", rank)
    return drop_empty(out)



def _host_queue(path: Path) -> pd.DataFrame:
    """``device_queue_profiling`` / ``dataset_iterator_profiling`` type-1
    records (``1 capacity batch size [time_ms]``) -> host queue samples."""
    raw = read_space_table(path, 4)
    num = raw.apply(pd.to_numeric, errors="coerce")
    if num[[0, 1, 2, 3]].isna().any(axis=None):
        raise InputError(path, "non-numeric field in 'type extra batch value [time]' records")
    conn = num[num[0] == 1]
    out = pd.DataFrame(
        {
            "queue": "host",
            "index": conn[2].astype("int64").to_numpy(),
            "size": conn[3].to_numpy(dtype="float64"),
            "capacity": conn[1].to_numpy(dtype="float64"),
        }
    )
    if 4 in conn and conn[4].notna().all() and len(conn):
        out["time_us"] = conn[4].to_numpy(dtype="float64") * 1000.0
    return out.sort_values("index", kind="stable").reset_index(drop=True)


def _device_queue(path: Path) -> pd.DataFrame:
    """``minddata_aicpu`` ``GetNext* start_us end_us queue_size`` -> device
    queue samples, numbered in file order."""
    raw = read_space_table(path, 1)
    rows = raw[raw[0].str.startswith("GetNext", na=False)]
    if rows.empty:
        raise InputError(path, "no GetNext records")
    if rows.shape[1] < 4 or rows[3].isna().any():
        raise InputError(path, "GetNext record without a queue size (truncated?)")
    size = pd.to_numeric(rows[3], errors="coerce")
    if size.isna().any():
        raise InputError(path, "non-numeric queue size in a GetNext record")
    out = pd.DataFrame({"queue": "device", "index": np.arange(1, len(rows) + 1), "size": size.to_numpy(dtype="float64")})
    start = pd.to_numeric(rows[1], errors="coerce")
    if start.notna().all():
        out["time_us"] = start.to_numpy(dtype="float64")
    return out

