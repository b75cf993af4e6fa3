"""Communication operators' transfers beside computation and alone -> the
``comm_contention`` table.

The copy engines (SDMA) and the compute cores share the device's memory:
a collective that runs while kernels compute can move its bytes more slowly
than the same collective with the device otherwise idle (msprof-analyze's
bandwidth-contention check). Telling the two apart needs each operator's
span (communication.json's ``Communication Time Info``: Start Timestamp,
Elapse Time), its bytes and transfer time per transport (``Communication
Bandwidth Info``) and the compute timeline (the non-HCCL rows of
``kernel_details.csv``, or the database's compute tasks); the rolled-up
``comm`` and ``bandwidth`` tables no longer hold the operators apart, so
the reader pairs them here, per rank, before the rollup.

An operator is *beside compute* when kernels compute during at least
``BESIDE_SHARE`` of its span, *alone* when during at most ``ALONE_SHARE``;
operators in between are left out of both. Rows are summed per (rank,
step, transport, size class, beside_compute), the size class of each
operator's transfer (``vocab.size_classes``, as in the ``bandwidth`` table).
"""

from __future__ import annotations

from itertools import compress

import numpy as np
import pyarrow as pa

from advisor.collectors.ascend.hccl_rows import is_hccl
from advisor.collectors.kineto import intervals as iv
from advisor.collectors.parallel.batch_tables import PendingTable
from advisor.collectors.vocab import size_classes

#: An operator whose span has kernels computing during at least this share
#: of it runs beside compute: most of its transfer competes with them.
BESIDE_SHARE = 0.5
#: An operator whose span has kernels computing during at most this share of
#: it runs alone: the bandwidth its link reaches when nothing competes
#: (a few kernels' edges at its ends aside).
ALONE_SHARE = 0.05


def _compute_intervals(kernels: pa.Table, origin_us: float) -> iv.Intervals | None:
    """The union of the compute kernels' intervals (every non-HCCL row), as
    sorted disjoint (starts, ends) in absolute us (``origin_us`` + start);
    None without start times."""
    if not {"start_us", "duration_us"} <= set(kernels.column_names):
        return None
    cores = kernels.column("core") if "core" in kernels.column_names else None
    compute = ~is_hccl(kernels.column("name"), cores)
    start = kernels.column("start_us").to_numpy(zero_copy_only=False).astype(float)[compute] + origin_us
    dur = kernels.column("duration_us").to_numpy(zero_copy_only=False).astype(float)[compute]
    ok = np.isfinite(start) & np.isfinite(dur) & (dur > 0)
    if not ok.any():
        return None
    return iv.merge(start[ok], start[ok] + dur[ok])


def _column(table: PendingTable, name: str) -> list:
    values = table.columns.get(name)
    return [None] * table.n if values is None else values.tolist() if isinstance(values, np.ndarray) else values


def _numbers(table: PendingTable, name: str) -> np.ndarray:
    """A number column as float64, NaN where it has no value."""
    values = table.columns.get(name)
    return np.full(table.n, np.nan) if values is None else np.asarray(values, dtype=np.float64)


def contention_table(kernels: pa.Table | None, comm: PendingTable | None, bandwidth: PendingTable | None,
                     rank: int, origin_us: float = 0.0) -> pa.Table | None:
    """The ``comm_contention`` rows of one rank (see the module doc), in
    Arrow (converted with the rank's other tables, ``arrow_frames``); None
    when a part is missing (no kernels with start times, no operator spans,
    no transfers) or no operator is clearly beside compute or alone.
    ``origin_us``: the absolute time of the kernels' ``start_us`` 0 (the
    database layout's kernels start at the first step; the operators' spans
    are absolute)."""
    if kernels is None or not isinstance(comm, PendingTable) or not isinstance(bandwidth, PendingTable):
        return None
    intervals = _compute_intervals(kernels, origin_us)
    if intervals is None:
        return None
    start, elapse = _numbers(comm, "start_us"), _numbers(comm, "elapse_us")
    timed = (~np.isnan(start) & (elapse > 0)).tolist()
    keys = zip(_column(comm, "step"), _column(comm, "name"), _column(comm, "group"))
    spans = dict(zip(compress(keys, timed), zip(compress(start.tolist(), timed), compress(elapse.tolist(), timed))))
    found = list(map(spans.get, zip(_column(bandwidth, "step"), _column(bandwidth, "name"),
                                    _column(bandwidth, "group"))))
    size, time_ms = _numbers(bandwidth, "size_mb"), _numbers(bandwidth, "time_ms")
    rows = np.array([s is not None for s in found]) & (size > 0) & (time_ms > 0) if found else np.zeros(0, bool)
    if not rows.any():
        return None
    span = np.array(list(compress(found, rows.tolist())), dtype=np.float64)
    start, elapse = span[:, 0], span[:, 1]
    size, time_ms = size[rows], time_ms[rows]
    covered = iv.covered_between(intervals, start, start + elapse)
    share = covered / elapse
    clear = (share <= ALONE_SHARE) | (share >= BESIDE_SHARE)  # in between: left out of both
    if not clear.any():
        return None
    beside = share >= BESIDE_SHARE
    classes = size_classes(size)[0]  # every size is positive here
    steps = list(compress(compress(_column(bandwidth, "step"), rows.tolist()), clear.tolist()))
    transports = [str(t).upper() for t in compress(compress(_column(bandwidth, "transport"), rows.tolist()),
                                                  clear.tolist())]
    groups = list(zip(steps, transports, classes[clear].tolist(), beside[clear].tolist()))
    # (step, transport, size_class, beside) -> ops, size_mb, time_ms, exposed_us, summed in row order
    first = {k: i for i, k in enumerate(dict.fromkeys(groups))}
    ids = np.fromiter(map(first.__getitem__, groups), np.int64, len(groups))
    sums = [np.bincount(ids, weights=w[clear], minlength=len(first)) for w in (size, time_ms, elapse - covered)]
    ops = np.bincount(ids, minlength=len(first))
    keys = list(first)
    order = sorted(range(len(keys)), key=lambda i: (keys[i][0] is None, keys[i][0] or 0, *keys[i][1:]))
    return pa.table({
        "rank": pa.array(np.full(len(keys), rank, dtype=np.int64)),
        "step": pa.array([keys[i][0] for i in order], type=pa.int64()),
        "transport": pa.array([keys[i][1] for i in order], type=pa.string()),
        "size_class": pa.array([keys[i][2] for i in order], type=pa.int64()),
        "beside_compute": pa.array([keys[i][3] for i in order], type=pa.bool_()),
        "ops": pa.array(ops[order].astype(np.int64)),
        "size_mb": pa.array(sums[0][order]),
        "time_ms": pa.array(sums[1][order]),
        "exposed_us": pa.array(sums[2][order]),
    })
