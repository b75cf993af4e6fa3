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

import numpy as np
import pandas as pd
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
    return [None] * table.n if values is None else list(values)


def contention_table(kernels: pa.Table | None, comm: PendingTable | None, bandwidth: PendingTable | None,
                     rank: int, origin_us: float = 0.0) -> pd.DataFrame | None:
    """The ``comm_contention`` rows of one rank (see the module doc); None
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
    spans = {}
    for key in zip(_column(comm, "step"), _column(comm, "name"), _column(comm, "group"),
                   _column(comm, "start_us"), _column(comm, "elapse_us")):
        if key[3] is not None and key[4] is not None and key[4] > 0:
            spans[key[:3]] = (float(key[3]), float(key[4]))
    rows = [(step, transport, size, time, *spans[(step, name, group)])
            for step, name, group, transport, size, time in zip(
                _column(bandwidth, "step"), _column(bandwidth, "name"), _column(bandwidth, "group"),
                _column(bandwidth, "transport"), _column(bandwidth, "size_mb"), _column(bandwidth, "time_ms"))
            if (step, name, group) in spans and size is not None and time is not None and size > 0 and time > 0]
    if not rows:
        return None
    start = np.fromiter((r[4] for r in rows), float, len(rows))
    elapse = np.fromiter((r[5] for r in rows), float, len(rows))
    covered = iv.covered_between(intervals, start, start + elapse)
    share = covered / elapse
    classes = size_classes([r[2] for r in rows])[0]  # every size is positive here
    sums: dict[tuple, list] = {}  # (step, transport, size_class, beside) -> [ops, size_mb, time_ms, exposed_us]
    for (step, transport, size, time_ms, _, span), part, cov, cls in zip(rows, share.tolist(), covered.tolist(),
                                                                          classes.tolist()):
        if ALONE_SHARE < part < BESIDE_SHARE:
            continue
        key = (step, str(transport).upper(), cls, part >= BESIDE_SHARE)
        acc = sums.setdefault(key, [0, 0.0, 0.0, 0.0])
        acc[0] += 1
        acc[1] += size
        acc[2] += time_ms
        acc[3] += span - cov
    if not sums:
        return None
    keys = sorted(sums, key=lambda k: (k[0] is None, k[0] or 0, *k[1:]))
    return pd.DataFrame({
        "rank": np.full(len(keys), rank, dtype=np.int64),
        "step": pd.array([k[0] for k in keys], dtype="Int64"),
        "transport": [k[1] for k in keys],
        "size_class": np.array([k[2] for k in keys], dtype=np.int64),
        "beside_compute": np.array([k[3] for k in keys], dtype=bool),
        "ops": np.array([sums[k][0] for k in keys], dtype=np.int64),
        "size_mb": np.array([sums[k][1] for k in keys], dtype=float),
        "time_ms": np.array([sums[k][2] for k in keys], dtype=float),
        "exposed_us": np.array([sums[k][3] for k in keys], dtype=float),
    })
