"""Ascend ``trace_view.json`` -> the ``hccl_tasks`` table: the HCCL transfer
tasks of each communication operator, by size.

At profiler Level1 and above torch_npu (and MindSpore) write the tasks
each communication operator runs into the trace's ``HCCL`` (older
exports: ``Communication``) process: ``X`` events named ``Memcpy`` or
``Reduce_Inline`` whose ``args`` carry ``"transport type"`` (SDMA, RDMA,
LOCAL), ``"link type"`` (HCCS, PCIE, ROCE, SIO, ON_CHIP ...) and
``"size(Byte)"`` -- the records msprof-analyze's ``HcclDetailDataset``
reads (process name ``HCCL`` / ``Communication``, task names split on
``_``: ``Memcpy``, ``Reduce``) for its byte-alignment check. The database
layout keeps the same records in ``COMMUNICATION_TASK_INFO`` (``taskType``,
``transportType``, ``linkType``, ``size``; times in ``TASK`` by
``globalTaskId``), as msprof-analyze's ``HCCL_TASK_SQL`` joins them
(advisor/common/profiling/msprof.py). At Level0 the lane holds only the
operators (the table has no rows), and this table is absent.

Rows sum the tasks per (rank, step, transport, link, size): a run moves a
handful of distinct sizes (its buckets and shapes), so the table stays
small while keeping each size exact.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from advisor.collectors.ascend.host_calls import _steps_of
from advisor.collectors.ascend.trace_view import HCCL_PROCESSES, _STEP_NAME, Trace, _args, _num, process_pids

#: Task-name prefixes (before the first ``_``) of the transfer tasks
#: (``Memcpy``, ``Reduce_Inline``), as ``HcclDetailDataset._process`` splits them.
TRANSFER_TASKS = ("Memcpy", "Reduce")
#: The ``args`` key of a task's size in bytes (``HcclTask``: ``task.args.get("size(Byte)")``).
SIZE_ARG = "size(Byte)"


def read(trace: Trace, rank: int) -> pd.DataFrame | None:
    """The ``hccl_tasks`` rows of one decoded ``trace_view.json``
    (``trace_view.decode_trace``); None when it has no transfer task with
    a size: Level0, or no communication."""
    events = trace.events
    hccl_pids = process_pids(events, HCCL_PROCESSES)
    if not hccl_pids:
        return None
    rows = []
    for ev in events:
        if ev.ph == "X" and ev.pid in hccl_pids and ev.name.split("_")[0] in TRANSFER_TASKS \
                and not _STEP_NAME.match(ev.name):
            args = _args(ev)
            size = _num(args.get(SIZE_ARG))
            if np.isfinite(size) and size > 0:
                rows.append((str(args.get("transport type", "NA")), str(args.get("link type", "NA")),
                             int(size), _num(ev.ts), _num(ev.dur)))
    if not rows:
        return None
    return _table(rows, lambda ts: _steps_of(ts, trace.markers), rank)


#: msprof-analyze's HCCL_TASK_SQL, with the step windows of STEP_TIME left to the caller.
_TASK_SQL = """
SELECT str.value AS name, trans.name AS transport, link.name AS link, comm.size AS size,
       task.startNs AS start_ns, task.endNs AS end_ns
FROM COMMUNICATION_TASK_INFO AS comm
JOIN TASK AS task ON comm.globalTaskId = task.globalTaskId
JOIN STRING_IDS AS str ON str.id = comm.taskType
JOIN ENUM_HCCL_LINK_TYPE AS link ON link.id = comm.linkType
JOIN ENUM_HCCL_TRANSPORT_TYPE AS trans ON trans.id = comm.transportType
"""
_DB_TABLES = ("COMMUNICATION_TASK_INFO", "TASK", "STRING_IDS", "ENUM_HCCL_LINK_TYPE", "ENUM_HCCL_TRANSPORT_TYPE")


def read_db(path: Path, rank: int) -> pd.DataFrame | None:
    """The ``hccl_tasks`` rows of a profiler database (None without the
    task tables or their transfer tasks)."""
    from advisor.collectors.ascend.db import _connect, _has_table

    with _connect(path) as con:
        if not all(_has_table(con, t) for t in _DB_TABLES):
            return None
        cols = con.columns(_TASK_SQL)
        marks = (con.columns("SELECT step, startNs, endNs FROM STEP_TIME") if _has_table(con, "STEP_TIME")
                 else {"step": [], "startNs": [], "endNs": []})
    rows = [(str(t), str(lk), int(sz), _num(s) / 1000.0, (_num(e) - _num(s)) / 1000.0)
            for n, t, lk, sz, s, e in zip(cols["name"], cols["transport"], cols["link"], cols["size"],
                                          cols["start_ns"], cols["end_ns"])
            if isinstance(n, str) and n.split("_")[0] in TRANSFER_TASKS and _num(sz) > 0]
    markers = [(st, _num(a) / 1000.0, (_num(b) - _num(a)) / 1000.0)
               for st, a, b in zip(marks["step"], marks["startNs"], marks["endNs"]) if st is not None]
    return _table(rows, lambda ts: _steps_of(ts, markers), rank)


def _table(rows: list[tuple], steps_of, rank: int) -> pd.DataFrame | None:
    """(transport, link, size, ts, dur) rows -> the summed table."""
    if not rows:
        return None
    df = pd.DataFrame(rows, columns=["transport", "link", "size_bytes", "ts", "dur"]).dropna()
    if df.empty:
        return None
    df["step"] = steps_of(df["ts"].to_numpy())
    out = (df.groupby(["step", "transport", "link", "size_bytes"], dropna=False, sort=True)["dur"]
           .agg(count="size", total_us="sum").reset_index())
    out["step"] = out["step"].astype("Int64")
    out["count"] = out["count"].astype(np.int64)
    out["size_bytes"] = out["size_bytes"].astype(np.int64)
    out.insert(0, "rank", rank)
    return out
