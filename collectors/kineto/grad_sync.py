"""Gradient synchronizations of a DistributedDataParallel job, per step ->
``steps`` columns.

DDP records each forward of the wrapped model as a
``DistributedDataParallel.forward`` range, and its reducer all-reduces the
gradients during the backward that follows -- unless that forward ran
under ``model.no_sync()``, as the first micro-batches of a gradient
accumulation should. The optimizer's ``step()`` is a ``Optimizer.step#...``
range. Per step window:

* ``ddp_forwards``: DDP forwards that start in the step;
* ``ddp_synced_forwards``: those followed by an all-reduce -- one starts
  (a ``comm`` row of kind allreduce) between the forward's start and the
  next DDP forward's (or the step's end);
* ``optimizer_steps``: optimizer ``step()`` calls that start in the step.

More synchronized forwards than optimizer steps means gradients are
all-reduced that are only accumulated, never applied on their own.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.collectors.kineto.host_calls import step_rows, step_windows
from advisor.collectors.kineto.shaped_events import optimizer_steps
from advisor.collectors.vocab import ALLREDUCE
from advisor.collectors.kineto.decode import HOST, Events

DDP_FORWARD = "DistributedDataParallel.forward"


def columns(ev: Events, steps: pd.DataFrame, comm: pd.DataFrame | None) -> dict[str, np.ndarray] | None:
    """The three columns, aligned to ``steps``' rows (NaN for a row without
    a step window); None when the trace has no DDP forward."""
    names = ev.names.astype(str)
    ranges = (ev.kind == HOST) & ev.cat_is("user_annotation")
    forward = np.flatnonzero(ranges & (names == DDP_FORWARD)[ev.name])
    if forward.size == 0 or steps is None or steps.empty or "start_us" not in steps.columns:
        return None
    optimizer = optimizer_steps(ev)
    windows = step_windows(steps)
    end_of = steps["start_us"].to_numpy(float) + steps["duration_us"].to_numpy(float)
    starts = np.sort(ev.ts[forward])
    fwd_step = step_rows(starts, steps)
    reduce = _allreduce_starts(comm)
    # a forward's stretch ends at the next forward of its step, else at the step's end
    nxt = np.r_[starts[1:], np.inf]
    same = np.r_[fwd_step[1:] == fwd_step[:-1], False]
    end = np.where(same, nxt, end_of[np.clip(fwd_step, 0, None)])
    synced = np.searchsorted(reduce, end, side="left") > np.searchsorted(reduce, starts, side="left")
    out = {}
    for name, at, weight in (("ddp_forwards", fwd_step, None), ("ddp_synced_forwards", fwd_step, synced),
                             ("optimizer_steps", step_rows(ev.ts[optimizer], steps), None)):
        inside = at >= 0
        counts = np.bincount(at[inside], weights=None if weight is None else weight[inside].astype(float),
                             minlength=len(steps))
        out[name] = np.full(len(steps), np.nan)
        out[name][windows] = counts[windows]
    return out


def _allreduce_starts(comm: pd.DataFrame | None) -> np.ndarray:
    """Sorted starts of the all-reduces (c10d front ends left out: their
    backend op is a row too)."""
    if comm is None or comm.empty or "kind" not in comm.columns:
        return np.empty(0)
    rows = comm[comm["kind"] == ALLREDUCE]
    if "front_end" in rows.columns:
        rows = rows[rows["front_end"].fillna(0) != 1]
    return np.sort(rows["start_us"].to_numpy(float))
