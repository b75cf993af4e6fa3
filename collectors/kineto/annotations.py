"""Kineto events -> the ``annotations`` table: time per ``record_function``
range (user annotation) and step, as HTA's user-annotation breakdown
(``get_gpu_kernels_with_user_annotations``, ``get_gpu_user_annotation_breakdown``).

Where the profiler ran on a device, each ``record_function`` range that
launched work has a ``gpu_user_annotation`` event on the device row: its
device span, from the first kernel's start to the last kernel's end, which
is what HTA sums. A trace without them (older PyTorch) gets the device time
of the kernels, copies and memsets launched under each range instead: each
device event -> its runtime call (same correlation id) -> the innermost
``user_annotation`` range enclosing the call on the calling thread. A
CPU-only trace has no device time; its rows are the host time of the
ranges themselves (``source`` host). ``ProfilerStep#N`` markers are step
boundaries, not annotations, and are left out.

One row per (step, name, source): how many ranges and their summed time.
Nested ranges each count their own time, so names can overlap.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.collectors.kineto.decode import ANNOT, HOST, KERNEL, Events
from advisor.collectors.kineto.host_calls import _step_of, launched_time
from advisor.collectors.kineto.tables import STEP_RE


def table(ev: Events, steps: pd.DataFrame | None, rank: int) -> pd.DataFrame | None:
    """The ``annotations`` rows of one trace (None when it has no range)."""
    names = ev.names.astype(str)
    marker = np.array([bool(STEP_RE.match(n)) for n in names], dtype=bool)
    if not marker.size:
        return None
    device = np.flatnonzero((ev.kind == ANNOT) & ~marker[ev.name])
    if device.size:
        idx, time, source = device, ev.dur[device], "device"
    else:
        ranges = np.flatnonzero(ev.cat_is("user_annotation") & (ev.kind == HOST) & ~marker[ev.name])
        if ranges.size == 0:
            return None
        if (ev.kind >= KERNEL).any():
            idx, time, source = ranges, launched_time(ev, ranges), "device"
            launched = time > 0
            idx, time = idx[launched], time[launched]
        else:
            idx, time, source = ranges, ev.dur[ranges], "host"
        if idx.size == 0:
            return None
    rows = pd.DataFrame({"step": _step_of(ev.ts[idx], steps), "name": names[ev.name[idx]], "time": time})
    out = (rows.groupby(["step", "name"], dropna=False, sort=True)["time"]
           .agg(count="size", total_us="sum").reset_index())
    out["step"] = out["step"].astype("Int64")
    out["count"] = out["count"].astype(np.int64)
    out["source"] = source
    out.insert(0, "rank", rank)
    return out
