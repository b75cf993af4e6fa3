"""torch_npu's memory files -> the ``memory_summary`` row of a rank: the
caching allocator's highest reserved and allocated device memory.

``ASCEND_PROFILER_OUTPUT/memory_record.csv`` (written with
``profile_memory=True``; its columns in the Ascend PyTorch Profiler's file
reference, ``ascend-pytorch-profiler-files-zh.txt`` in the reference
documents): ``Component`` (PTA, GE and PTA+GE are operator-level records,
APP the whole process), ``Timestamp(us)``, ``Total Allocated(MB)``,
``Total Reserved(MB)``, ``Total Active(MB)``, ``Stream Ptr``, ``Device
Type``. The peak is read from the APP records where the file has them (the
process holds the framework's pool and what it reserves beside it), else
from PTA+GE, else from every record. Without the file,
``operator_memory.csv`` gives the totals at each tensor's allocation
(``Allocation Total Reserved(MB)``, ``Allocation Total Allocated(MB)``).

Neither file, nor ``npu_module_mem.csv`` (memory per CANN component, not
read), records the device's capacity: ``capacity_gib`` is NaN and the
share of the device the peak takes is not evaluated.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from advisor.collectors.ascend import fields
from advisor.collectors.io.csv_files import read_columns
from advisor.errors import InputError

MB_PER_GIB = 1024.0
#: Components whose records are read, most inclusive first.
_COMPONENTS = ("APP", "PTA+GE")
FILES = ("memory_record.csv", "operator_memory.csv")


def read(path: Path, rank: int) -> pd.DataFrame:
    """One of ``FILES`` (the first the rank's output holds) -> one
    ``memory_summary`` row; InputError when it holds no usable totals."""
    name = path.name
    df = read_columns(path, fields.text(name).fields, numeric=("reserved_mb", "allocated_mb"),
                      required=("reserved_mb",))
    if "component" in df.columns:
        for component in _COMPONENTS:
            mine = df[df["component"].str.strip() == component]
            if mine["reserved_mb"].notna().any():
                df = mine
                break
    reserved = df["reserved_mb"].max()
    if pd.isna(reserved) or reserved <= 0:
        raise InputError(path, "no positive Total Reserved(MB) value")
    allocated = df["allocated_mb"].max() if "allocated_mb" in df.columns else float("nan")
    return pd.DataFrame({"rank": [rank], "capacity_gib": [float("nan")], "peak_gib": [reserved / MB_PER_GIB],
                         "peak_allocated_gib": [allocated / MB_PER_GIB]})
