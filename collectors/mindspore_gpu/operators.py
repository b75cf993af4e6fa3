"""Operators of a MindSpore GPU profile -> ``ops``.

Three files hold them, each aggregated over the profiled window by
MindSpore's ``GpuDataSaver`` (``gpu_data_saver.h`` / ``data_saver.h``):

``gpu_activity_data_{dev}.csv`` (preferred)
    One row per CUDA kernel name (CUPTI activity records):
    ``name,type,op_full_name,stream_id,block_dim,grid_dim,occurrences,
    total_duration(us),avg_duration(us),max_duration(us),min_duration(us)``;
    ``type`` is the launch API (``cuLaunchKernel``), ``op_full_name`` the
    framework op of the kernel's first launch. Rows become device kernels
    as the Kineto collector writes them (name = kernel, type ``compute`` or
    ``communication``, core ``GPU``), so the GPU kernel metrics (tensor-core
    use from kernel names) read them alike.

``gpu_op_detail_info_{dev}.csv``
    One row per framework op: ``op_side,op_type,op_name,op_full_name,
    op_occurrences,op_total_time(us),op_avg_time(us),total_proportion,
    cuda_activity_cost_time(us),cuda_activity_call_count``. ``op_total_time``
    is measured on the host around the op (with ``sync_enable`` the launch
    and the wait for its kernels, without it the launch only);
    ``cuda_activity_cost_time`` is the device time of the op's kernels, and
    is what ``total_us`` takes.

``gpu_op_type_info_{dev}.csv``
    The same per op type: ``op_type,type_occurrences,total_time(us),
    total_proportion,avg_time(us)``, host-measured only.

Host ``cpu_op_detail_info_{dev}.csv`` / ``cpu_op_type_info_{dev}.csv`` (ops
MindSpore ran on the CPU, times in ms) are read by the Ascend collector's
reader and used only when no GPU operator file is readable.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from advisor.collectors import vocab
from advisor.collectors.ascend.tables import read_cpu_ops
from advisor.collectors.io.csv_files import read_columns
from advisor.collectors.mindspore_gpu import layout
from advisor.errors import InputError
from advisor.profile import Profile

_ACTIVITY = {
    "name": ("name",),
    "launch": ("type",),
    "count": ("occurrences",),
    "total_us": ("total_duration(us)",),
    "max_us": ("max_duration(us)",),
    "min_us": ("min_duration(us)",),
}
_OP_DETAIL = {
    "name": ("op_name",),
    "full_name": ("op_full_name",),
    "type": ("op_type",),
    "count": ("op_occurrences",),
    "host_us": ("op_total_time(us)",),
    "device_us": ("cuda_activity_cost_time(us)",),
}
_OP_TYPE = {
    "type": ("op_type",),
    "count": ("type_occurrences",),
    "host_us": ("total_time(us)",),
}


def ops(profile: Profile, folder: Path, dev: int, rank: int) -> pd.DataFrame | None:
    """``ops`` from the first readable operator file (module doc); a file
    that cannot be read is skipped with its reason and the next one tried."""
    readers = (
        (layout.ACTIVITY_FILE, _kernels, None),
        (layout.OP_DETAIL_FILE, _op_detail, None),
        (layout.OP_TYPE_FILE, _op_type,
         "ops: per op type from gpu_op_type_info, times measured on the host around each op "
         "(no device kernel times were readable)"),
        (layout.CPU_OP_DETAIL_FILE, read_cpu_ops, "ops: host CPU operators only (core CPU)"),
        (layout.CPU_OP_TYPE_FILE, read_cpu_ops, "ops: host CPU operator types only (core CPU)"),
    )
    for template, read, note in readers:
        path = folder / template.format(dev)
        if not path.is_file():
            continue
        try:
            table = read(path, rank)
        except InputError as exc:
            profile.skip(exc.path, exc.problem)
            continue
        if note:
            profile.meta.notes.append(note)
        return table
    return None


def _kernels(path: Path, rank: int) -> pd.DataFrame:
    """``gpu_activity_data`` -> device kernels (module doc)."""
    frame = read_columns(path, _ACTIVITY, numeric=("count", "total_us", "max_us", "min_us"),
                         required=("name", "count", "total_us"))
    frame = frame[frame["name"].notna() & frame["total_us"].notna()]
    if frame.empty:
        raise InputError(path, "no kernel rows with a time")
    _check_times(path, frame["total_us"])
    names = frame["name"].astype(str)
    comm = np.array([_is_collective(n) for n in names])
    out = pd.DataFrame({
        "rank": np.full(len(frame), rank, dtype="int64"),
        "name": names.to_numpy(dtype=object),
        "type": np.where(comm, "communication", "compute").astype(object),
        "core": "GPU",
        "count": frame["count"].fillna(0).round().astype("int64").to_numpy(),
        "total_us": frame["total_us"].to_numpy(dtype="float64"),
    })
    for col in ("max_us", "min_us"):
        if col in frame and frame[col].notna().any():
            out[col] = frame[col].to_numpy(dtype="float64")
    return out.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


def _is_collective(kernel: str) -> bool:
    """NCCL kernels (``ncclKernel_AllReduce_RING_LL_Sum_float``, ...) and
    other kernels whose name says a collective."""
    return "nccl" in kernel.lower() or vocab.collective_kind(kernel) != vocab.OTHER


def _op_detail(path: Path, rank: int) -> pd.DataFrame:
    """``gpu_op_detail_info`` -> one row per framework op, timed by its
    kernels' device time (``cuda_activity_cost_time``)."""
    frame = read_columns(path, _OP_DETAIL, numeric=("count", "host_us", "device_us"),
                         required=("type", "count"))
    if "device_us" not in frame:
        raise InputError(path, "missing required column(s): cuda_activity_cost_time(us)")
    frame = frame[frame["type"].notna() & frame["device_us"].notna()]
    if frame.empty:
        raise InputError(path, "no operator rows with a device time")
    _check_times(path, frame["device_us"])
    name = frame["name"] if "name" in frame else frame["type"]
    if "full_name" in frame:
        name = name.fillna(frame["full_name"].astype("string").str.rsplit("/", n=1).str[-1])
    out = pd.DataFrame({
        "rank": np.full(len(frame), rank, dtype="int64"),
        "name": name.fillna(frame["type"]).astype(str).to_numpy(dtype=object),
        "type": frame["type"].astype(str).to_numpy(dtype=object),
        "core": "GPU",
        "count": frame["count"].fillna(0).round().astype("int64").to_numpy(),
        "total_us": frame["device_us"].to_numpy(dtype="float64"),
    })
    return out.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


def _op_type(path: Path, rank: int) -> pd.DataFrame:
    """``gpu_op_type_info`` -> one row per op type (host-measured times)."""
    frame = read_columns(path, _OP_TYPE, numeric=("count", "host_us"), required=("type", "count", "host_us"))
    frame = frame[frame["type"].notna() & frame["host_us"].notna()]
    if frame.empty:
        raise InputError(path, "no operator type rows with a time")
    _check_times(path, frame["host_us"])
    types = frame["type"].astype(str).to_numpy(dtype=object)
    out = pd.DataFrame({
        "rank": np.full(len(frame), rank, dtype="int64"),
        "name": types,
        "type": types,
        "core": "GPU",
        "count": frame["count"].fillna(0).round().astype("int64").to_numpy(),
        "total_us": frame["host_us"].to_numpy(dtype="float64"),
    })
    return out.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


def _check_times(path: Path, times: pd.Series) -> None:
    """InputError for a negative or infinite time (a garbled row)."""
    bad = (times < 0) | np.isinf(times)
    if bad.any():
        raise InputError(path, f"impossible operator time {float(times[bad].iloc[0])!r} "
                               "(negative or infinite)")
