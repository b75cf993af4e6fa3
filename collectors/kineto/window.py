"""The measured window of a Kineto trace: which part of each step the
profiler recorded, which part is one-time start-up, and how much device
work each step holds.

Recorded span and truncated steps
---------------------------------
The *recorded span* is the first start to the last end of every analysed
event except the ``ProfilerStep#N`` annotations themselves
(``Events.activity``). A step annotation can run far past it -- the last
step of a profiler stopped long after the loop, an annotation closed at
exit, a trace cut by hand -- or start long before it. A step whose
annotation lies outside the recorded span for at least ``TRUNCATED_SHARE``
of its length is *truncated*: its window is clipped to the recorded span
(``duration_us`` is then the recorded part) and ``truncated`` is true; the
steady-state metrics leave it out when an untruncated step exists. A
shorter unrecorded edge is kept: the Python work between ``prof.step()``
and the step's first operator is part of the step although the profiler
records nothing in it.

One-time start-up (``warmup_us`` and the ``warmup`` table)
----------------------------------------------------------
Work a process does once, and that later steps do not repeat:

* ``init``: start-up runtime calls (``calls.INIT_CALLS``: context
  creation, device queries, stream creation, module and library loading)
  lasting at least ``INIT_CALL_MIN_US``.
* ``compile``: torch.compile's compile ops (``calls.COMPILE_OPS``:
  Dynamo, AOTAutograd, Inductor, Triton), whatever their length.
* ``first_call``: a host op whose first call is a *slow first call*: at
  least ``FIRST_CALL_FACTOR`` times the mean of its later calls and longer
  than it by ``FIRST_CALL_MIN_EXCESS_US`` (cuDNN autotuning, lazy module
  loading, a JIT compile: the whole first call counts), while the device
  is busy for less than ``FIRST_CALL_MAX_BUSY_SHARE`` of it (a first call
  blocked behind queued device work -- a copy waiting for the kernels of
  the step before the capture began -- is the device's queue, not one-time
  host work). An op called once cannot be judged and is not counted.
* ``alloc``: allocator growth (``calls.GROW_CALLS``). With several step
  windows, a window's growth calls count when the median window spends at
  most ``ALLOC_REPEAT_SHARE`` of that window's growth time growing (later
  steps do not repeat it); growth every step is steady churn, not start-up.
  A single window cannot show repetition: its growth calls all count (the
  first use of the allocator grows it).

``warmup_us`` of a window is the time in it covered by any of them (their
union: nested calls count once). The ``warmup`` table lists them, one row
each, except a compile op inside another (the outermost names the whole
compile; its phases nest in it), a slow first call that encloses another
one (the innermost, most specific, is listed) or that is mostly one of the
other kinds (a first ``.to('cuda')`` holding the context creation is listed
as that creation).

Device record (GPU traces)
--------------------------
``device_ops``: device events (kernels, copies, sets) starting in the
window; ``device_ops_launched``: those whose launching runtime call (same
correlation id) is in the trace. A training step launches hundreds; a toy
or a cut trace a handful, and a trace sampled or cut by hand keeps device
events without their launches.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.collectors.kineto import decode as dec
from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.calls import COMPILE_ID_RE, COMPILE_OPS, GROW_CALLS, INIT_CALLS
from advisor.profile import is_recompilation

#: A step whose annotation lies outside the recorded span for at least this
#: share of its length is truncated: then most of what it claims as step
#: time holds no recorded work at all, and its breakdown would describe the
#: profiler's stop (or a cut), not the step. Below it the unrecorded edge is
#: the step's own unprofiled Python (between prof.step() and its first op).
TRUNCATED_SHARE = 0.25
#: A start-up call at least this long is one-time work: on a live context
#: these calls return in microseconds (up to about a millisecond for a full
#: device-properties query); creating the context, loading modules or a
#: first stream's resources takes milliseconds to seconds.
INIT_CALL_MIN_US = 1000.0
#: A first call at least this many times its repeats' mean is a slow first
#: call: autotuning, lazy loading and compiling cost orders of magnitude more
#: than a steady call, while ordinary variation (caches, input sizes) stays
#: well within a factor of ten.
FIRST_CALL_FACTOR = 10.0
#: ... and longer than that mean by at least this much (us): autotuning,
#: lazy loading of a model's kernels and JIT compiles cost tens of
#: milliseconds to seconds, while a thread descheduled on a loaded host
#: loses a few milliseconds; it also bounds the host ops the reader keeps
#: for this test to the few long ones.
FIRST_CALL_MIN_EXCESS_US = 10_000.0
#: ... and the device busy for less than this share of it: one-time host
#: work runs while the device has nothing queued; a host call during which
#: the device is busy most of the time is waiting for the device.
FIRST_CALL_MAX_BUSY_SHARE = 0.5
#: A window's allocator growth is start-up when the median window grows by
#: at most this share of it: the later steps do not repeat it (a caching
#: allocator that has warmed up allocates nothing in a steady step).
ALLOC_REPEAT_SHARE = 0.1

def clip(win: pd.DataFrame, ev: dec.Events) -> pd.DataFrame:
    """The step windows with ``truncated`` set and truncated windows clipped
    to the recorded span (see the module doc). ``win``: step, start, end."""
    lo, hi = win["start"].to_numpy(float), win["end"].to_numpy(float)
    first, last = ev.activity
    if not np.isfinite(first) or win["step"].isna().all():
        return win.assign(truncated=np.zeros(len(win), dtype=bool))
    outside = np.maximum(first - lo, 0) + np.maximum(hi - last, 0)
    cut = (outside > 0) & (outside >= TRUNCATED_SHARE * (hi - lo))
    end = np.where(cut, np.clip(hi, None, last), hi)
    start = np.where(cut, np.minimum(np.maximum(lo, first), end), lo)
    return win.assign(start=start, end=np.maximum(end, start), truncated=cut)


def columns(ev: dec.Events, win: pd.DataFrame, device: bool) -> tuple[dict[str, np.ndarray], pd.DataFrame]:
    """Per-window ``truncated``, ``warmup_us`` and ``recompile_us`` (and,
    for a GPU trace, ``device_ops`` and ``device_ops_launched``) in
    ``win``'s order, and the ``warmup`` table rows (without rank)."""
    lo, hi = win["start"].to_numpy(float), win["end"].to_numpy(float)
    items = _one_time(ev, win)
    busy = iv.merge(items["start_us"].to_numpy(float), items["_end"].to_numpy(float))
    again = items[np.array([is_recompilation(c) for c in items["compile_id"]], dtype=bool)]
    out = {"truncated": win["truncated"].to_numpy(bool), "warmup_us": iv.covered_between(busy, lo, hi),
           "recompile_us": iv.covered_between(iv.merge(again["start_us"].to_numpy(float),
                                                       again["_end"].to_numpy(float)), lo, hi)}
    if device:
        out.update(_device_counts(ev, lo, hi))
    return out, _listed(items, win)


def _device_counts(ev: dec.Events, lo: np.ndarray, hi: np.ndarray) -> dict[str, np.ndarray]:
    """Device events starting in each window, and those whose launch is recorded."""
    dev = np.flatnonzero(ev.kind >= dec.KERNEL)
    pos = iv.window_index(lo, hi, ev.ts[dev])
    rt = ev.corr[(ev.kind == dec.RUNTIME) & np.isfinite(ev.corr)]
    launched = np.isin(ev.corr[dev], rt) if rt.size else np.zeros(dev.size, dtype=bool)
    inside = pos >= 0
    n = len(lo)
    return {"device_ops": np.bincount(pos[inside], minlength=n).astype(np.int64),
            "device_ops_launched": np.bincount(pos[inside & launched], minlength=n).astype(np.int64)}


def _one_time(ev: dec.Events, win: pd.DataFrame) -> pd.DataFrame:
    """Every one-time item (module doc), by start: name, kind, thread,
    start_us, duration_us and ``_end``."""
    init = np.flatnonzero((ev.kind == dec.RUNTIME) & ev.named(INIT_CALLS) & (ev.dur >= INIT_CALL_MIN_US))
    compile_ = np.flatnonzero((ev.kind == dec.HOST) & ev.named(COMPILE_OPS))
    parts = [(init, "init"), (compile_, "compile"), (_slow_first_calls(ev), "first_call"),
             (_growth(ev, win), "alloc")]
    idx = np.concatenate([p for p, _ in parts]).astype(np.int64)
    kind = np.concatenate([np.full(p.size, k, dtype=object) for p, k in parts])
    order = np.argsort(ev.ts[idx], kind="stable")
    idx, kind = idx[order], kind[order]
    ids = np.full(idx.size, None, dtype=object)
    ids[kind == "compile"] = _compile_ids(ev, idx[kind == "compile"])
    return pd.DataFrame({
        "name": pd.Series(ev.names[ev.name[idx]], dtype=object), "kind": kind, "thread": ev.thread[idx],
        "start_us": ev.ts[idx], "duration_us": ev.dur[idx], "_end": ev.end_at(idx), "compile_id": ids,
    })


def _compile_ids(ev: dec.Events, spans: np.ndarray) -> np.ndarray:
    """Per compile op of ``spans``: the compile id (``"F/C"``) of the first
    ``COMPILE_ID_RE`` record on its thread that starts inside it, None
    where none does."""
    out = np.full(spans.size, None, dtype=object)
    codes = np.flatnonzero([COMPILE_ID_RE.search(str(n)) is not None for n in ev.names])
    marks = np.flatnonzero(np.isin(ev.name, codes))
    if marks.size == 0 or spans.size == 0:
        return out
    marks = marks[np.lexsort((ev.ts[marks], ev.thread[marks]))]
    th, ts = ev.thread[marks], ev.ts[marks]
    for j, i in enumerate(spans.tolist()):
        lo, hi = np.searchsorted(th, ev.thread[i], "left"), np.searchsorted(th, ev.thread[i], "right")
        at = lo + np.searchsorted(ts[lo:hi], ev.ts[i], "left")
        if at < hi and ts[at] <= ev.ts[i] + ev.dur[i]:
            match = COMPILE_ID_RE.search(str(ev.names[ev.name[marks[at]]]))
            out[j] = f"{match['frame']}/{match['count']}"
    return out


def _slow_first_calls(ev: dec.Events) -> np.ndarray:
    """Indices of host ops that are the slow first call of their name."""
    stats = ev.op_stats
    op = np.flatnonzero(ev.host_ops())
    if op.size == 0 or stats.count.size == 0:
        return np.empty(0, dtype=np.int64)
    code = ev.name[op].astype(np.int64)
    count = stats.count[code]
    dur = ev.dur[op]
    first = (ev.ts[op] == stats.first[code]) & (count >= 2)
    repeats = np.where(count >= 2, (stats.total[code] - dur) / np.maximum(count - 1, 1), np.inf)
    slow = op[first & (dur >= FIRST_CALL_FACTOR * repeats) & (dur - repeats >= FIRST_CALL_MIN_EXCESS_US)]
    dev = ev.kind >= dec.KERNEL
    busy = iv.covered_between(iv.merge(ev.ts[dev], ev.end_at(dev)), ev.ts[slow], ev.end_at(slow))
    return slow[busy < FIRST_CALL_MAX_BUSY_SHARE * ev.dur[slow]]


def _growth(ev: dec.Events, win: pd.DataFrame) -> np.ndarray:
    """Indices of allocator-growth calls that are start-up (module doc)."""
    grow = np.flatnonzero((ev.kind == dec.RUNTIME) & ev.named(GROW_CALLS))
    lo, hi = win["start"].to_numpy(float), win["end"].to_numpy(float)
    pos = iv.window_index(lo, hi, ev.ts[grow])
    grow, pos = grow[pos >= 0], pos[pos >= 0]
    if len(win) < 2 or win["step"].isna().all():
        return grow
    per_window = np.bincount(pos, weights=ev.dur[grow], minlength=len(win))
    steady = float(np.median(per_window))
    one_time = (per_window > 0) & (steady <= ALLOC_REPEAT_SHARE * per_window)
    return grow[one_time[pos]]


def _listed(items: pd.DataFrame, win: pd.DataFrame) -> pd.DataFrame:
    """The ``warmup`` table rows: the items but nested compile ops and the
    slow first calls that enclose another one or are mostly another kind of
    item (module doc), with the step window each starts in."""
    keep = np.ones(len(items), dtype=bool)
    s, e = items["start_us"].to_numpy(float), items["_end"].to_numpy(float)
    th, kind = items["thread"].to_numpy(), items["kind"].to_numpy()
    other = iv.merge(s[kind != "first_call"], e[kind != "first_call"])

    def within(i: int, k: str) -> np.ndarray:
        """Items of kind ``k`` on item ``i``'s thread inside it (``i`` aside)."""
        inside = (kind == k) & (th == th[i]) & (s >= s[i]) & (e <= e[i])
        inside[i] = False
        return inside

    compiles = np.flatnonzero(kind == "compile")
    for i in compiles[np.argsort(s[compiles] - e[compiles], kind="stable")]:  # longest first
        if keep[i]:
            keep[within(i, "compile")] = False
    for i in np.flatnonzero(kind == "first_call"):
        explained = iv.covered_between(other, s[i:i + 1], e[i:i + 1])[0] >= 0.5 * (e[i] - s[i])
        keep[i] = not within(i, "first_call").any() and not explained
    listed = items[keep].drop(columns=["thread", "_end"]).reset_index(drop=True)
    pos = iv.window_index(win["start"].to_numpy(float), win["end"].to_numpy(float), listed["start_us"].to_numpy(float))
    steps = win["step"].to_numpy(dtype=object)
    listed.insert(0, "step", pd.array([steps[p] if p >= 0 else pd.NA for p in pos], dtype="Int64"))
    listed["name"] = listed["name"].astype(object)
    listed["kind"] = listed["kind"].astype(object)
    return listed
