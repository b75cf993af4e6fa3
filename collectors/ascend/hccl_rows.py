"""Communication at the default profiler level: the HCCL rows of the kernel files -> ``comm``.

torch_npu and MindSpore write ``communication.json`` and
``communication_matrix.json`` only at ``profiler_level`` Level1 / Level2
(torch_npu ``_ProfilerConfig``: ``ProfilerLevel.Level0`` is the default and
leaves the communication analysis out). At Level0 the device timeline is
still there: ``kernel_details.csv`` holds one row per task, the HCCL
operators among them (``Accelerator Core`` = HCCL, ``Name`` / ``Type``
``hcom_allReduce_``, ``hcom_allGather_``, ``hcom_reduceScatter_``,
``hcom_alltoall*``, ``hcom_send_`` / ``hcom_receive_``,
``hcom_broadcast_``), each with its step, start and duration; and the step
trace still splits every step into Computing, Communication(Not
Overlapped), Overlapped and Free. Together they give what the communication
metrics need: the exposed communication of each step
(``steps.exposed_comm_us``) and which kinds of collective ran in it.

Where a row carries its input shapes and dtypes, its message size is
their product (``size_mb``, 10^6 bytes); HCCL rows of torch_npu's
kernel_details.csv write ``N/A`` there, and the size is then unknown.

In the database layout ``COMMUNICATION_OP`` holds the same operators with
``dataType`` (an ``ENUM_HCCL_DATA_TYPE`` id) and ``count`` (elements):
their product is the message size, as msprof-analyze computes it
(``prof_exports/slow_link_export.py``), where the level recorded them
(``N/A`` = 65534 otherwise, msprof "Profile Data File Reference (DB)").

Without HCCL rows in ``kernel_details.csv`` (the file absent), the HCCL
operator lanes of ``trace_view.json`` give the same rows without sizes
(``trace_view.hccl_operators``).

``op_statistic.csv`` (one row per operator type, no steps) stands in when
the kernels are not read: the kinds of collective of the rank, with their
summed time and count.

No wait / transit split exists at this level: that is the communication
analysis of Level1.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from advisor.collectors.ascend import comm as comm_io
from advisor.collectors.io.csv_files import clean_text
from advisor.collectors.parallel.batch_tables import PendingTable
from advisor.collectors.vocab import collective_kind, dtype_bytes

#: What the comm table rests on (``RunMeta.comm_source``): stable keys, the same for the text and
#: the database layout of one level; ``SOURCES`` says each in words (rule overlays word them in
#: their own language, keyed by these).
LEVEL1 = "level1_communication_json"
LEVEL1_CLUSTER = "level1_cluster_communication_json"
LEVEL0 = "level0_kernels"
LEVEL0_TRACE_VIEW = "level0_trace_view"
LEVEL0_OP_STATISTIC = "level0_op_statistic"
SOURCES = {
    LEVEL1: ("communication analysis of profiler Level1/Level2 (communication.json; database layout: "
             "analysis.db CommAnalyzer tables)"),
    LEVEL1_CLUSTER: "cluster_communication.json (msprof-analyze, from the Level1/Level2 communication analysis)",
    LEVEL0: ("step trace + HCCL operator rows (kernel_details.csv; database layout: COMMUNICATION_OP) of "
             "profiler Level0: no communication analysis"),
    LEVEL0_TRACE_VIEW: ("step trace + HCCL operator lanes of trace_view.json of profiler Level0: no communication "
                        "analysis, no message sizes"),
    LEVEL0_OP_STATISTIC: ("step trace + HCCL rows of op_statistic.csv of profiler Level0: no communication "
                          "analysis, no per-step collectives"),
}

#: An HCCL operator by name or type (``hcom_allReduce__606_0_1``, ``hcom_allReduce_``).
_HCOM = re.compile(r"^\s*hcom_", re.IGNORECASE)
#: The accelerator core / task type of communication tasks.
HCCL_CORE = "HCCL"
BYTES_PER_MB = 1e6


def hccl_dtype_bytes(name: str | None) -> int | None:
    """Bytes per element of an ``ENUM_HCCL_DATA_TYPE`` name (``vocab``); None for N/A or unknown."""
    return dtype_bytes(str(name)) if name else None


def count_mb(dtypes: list, counts: list) -> list[float | None]:
    """Message sizes (MB) of ``COMMUNICATION_OP`` rows from their dtype names and element counts."""
    out: list[float | None] = []
    for name, count in zip(dtypes, counts):
        size = hccl_dtype_bytes(name)
        try:
            n = float(count)
        except (TypeError, ValueError):
            n = float("nan")
        out.append(size * n / BYTES_PER_MB if size is not None and n >= 0 else None)
    return out


def is_hccl(names: pa.Array, cores: pa.Array | None) -> np.ndarray:
    """Rows whose name starts with ``hcom_`` or whose core is HCCL."""
    hit = pc.match_substring_regex(names.cast(pa.string()), _HCOM.pattern, ignore_case=True)
    hit = hit.fill_null(False).to_numpy(zero_copy_only=False)
    if cores is not None:
        core = pc.equal(pc.utf8_upper(pc.utf8_trim_whitespace(cores.cast(pa.string()))), HCCL_CORE)
        hit = hit | core.fill_null(False).to_numpy(zero_copy_only=False)
    return hit


def message_mb(shapes: str | None, dtypes: str | None) -> float | None:
    """Bytes (MB) of a row's input tensors from its ``Input Shapes``
    (``"8192,4096;1024"``) and ``Input Data Types`` (``DT_BF16;FLOAT``):
    sum over the tensors of elements x bytes per element; None when either
    is missing (``N/A``), the counts differ, or a dtype is unknown."""
    shapes, dtypes = clean_text(shapes), clean_text(dtypes)
    if shapes is None or dtypes is None:
        return None
    dims = [s.strip().strip('"') for s in shapes.split(";")]
    types = [t.strip() for t in dtypes.split(";")]
    if len(dims) != len(types):
        return None
    total = 0
    for dim, kind in zip(dims, types):
        size = dtype_bytes(kind)
        if size is None:
            return None
        try:
            count = int(np.prod([int(d) for d in dim.split(",") if d.strip()], dtype=np.int64)) if dim else 1
        except ValueError:
            return None
        total += count * size
    return total / BYTES_PER_MB


def comm_from_kernels(kernels: pa.Table, rank: int) -> PendingTable | None:
    """The HCCL rows of a ``kernel_details.csv`` kernels table
    (``ascend_tables.kernel_table``) -> comm rows to build: ``step``,
    ``name``, ``kind`` (from the type, else the name), ``start_us``,
    ``elapse_us``, and ``size_mb`` where the row has shapes and dtypes.
    None when the file has no HCCL row."""
    names = kernels.column("name")
    cores = kernels.column("core") if "core" in kernels.column_names else None
    hit = is_hccl(names, cores)
    if not hit.any():
        return None
    rows = kernels.filter(pa.array(hit))
    name = [clean_text(n) for n in rows.column("name").to_pylist()]
    types = (rows.column("type").to_pylist() if "type" in rows.column_names else [None] * len(name))
    kinds = [collective_kind(clean_text(t)) if collective_kind(clean_text(t)) != "other" else collective_kind(n)
             for t, n in zip(types, name)]
    cols: dict[str, list] = {
        "step": (rows.column("step").to_pylist() if "step" in rows.column_names else [None] * len(name)),
        "name": name, "kind": kinds,
        "start_us": (rows.column("start_us").to_pylist() if "start_us" in rows.column_names
                     else [None] * len(name)),
        "elapse_us": rows.column("duration_us").to_pylist(),
    }
    if {"input_shapes", "input_dtypes"} <= set(rows.column_names):
        sizes = [message_mb(s, d) for s, d in zip(rows.column("input_shapes").to_pylist(),
                                                    rows.column("input_dtypes").to_pylist())]
        if any(s is not None for s in sizes):
            cols["size_mb"] = sizes
    return comm_io.pending_columns(cols, rank, comm_io.COMM_COLUMNS)


def comm_from_op_statistic(ops: pd.DataFrame, rank: int) -> PendingTable | None:
    """The HCCL rows of ``op_statistic.csv`` (``ascend_tables.read_op_statistic``)
    -> comm rows without steps: one per operator type, its summed time as
    ``elapse_us`` and its count as ``ops``. None without an HCCL row."""
    cores = pa.array(ops["core"].astype(object)) if "core" in ops.columns else None
    hit = is_hccl(pa.array(ops["type"].astype(object)), cores)
    if not hit.any():
        return None
    rows = ops[hit]
    cols = {"step": [None] * len(rows), "name": rows["type"].tolist(),
            "kind": [collective_kind(t) for t in rows["type"]],
            "elapse_us": rows["total_us"].astype(float).tolist(),
            "ops": rows["count"].astype("int64").clip(lower=1).tolist()}
    return comm_io.pending_columns(cols, rank, comm_io.COMM_COLUMNS)
