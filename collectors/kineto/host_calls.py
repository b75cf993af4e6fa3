"""Kineto events -> the ``host_calls`` table: the host events of known
classes (``calls.host_call_class``) counted per step.

One row per (step, class, name[, frame]): how many, their summed and
longest duration. The fused, foreach and per-parameter optimizer ops count
only inside an ``Optimizer.step#...`` span of the same thread (clipping
gradients uses ``_foreach_norm`` too, the model ``aten::add`` ...), NaN
checks and recomputed forward ops only inside a backward node
(``nested_classes``). ``frame`` is the innermost Python
frame of the profiled program around the event, where the trace has
stacks (``with_stack=True``): the call site a user can change.
``device_us``: for the recomputed forward ops and the recurrent cells of
a trace with device events, the device time they launched
(``launched_time``): their host span is only the launching there.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.calls import OPTIMIZER_INNER, host_call_class, program_frame
from advisor.collectors.kineto.decode import HOST, KERNEL, PYTHON, RUNTIME, Events

#: Classes whose rows name the program's frame they ran in.
_FRAMED = frozenset({"sync", "empty_cache", "gc_call"})


def table(ev: Events, steps: pd.DataFrame | None, rank: int) -> pd.DataFrame | None:
    """The ``host_calls`` rows of one trace (None when it has none).
    ``steps``: the trace's steps table (``step``, ``start_us``,
    ``duration_us``); an event outside every step gets step NA."""
    classes = np.array([host_call_class(str(n)) or "" for n in ev.names], dtype=object)
    if not classes.size:
        return None
    cls = classes[ev.name]
    kind_ok = (ev.kind == HOST) | (ev.kind == RUNTIME) | (ev.kind == PYTHON)
    idx = np.flatnonzero((cls != "") & kind_ok)
    if idx.size == 0:
        return None
    cls = nested_classes(cls[idx], ev.names[ev.name[idx]], ev.ts[idx], ev.end_at(idx), ev.thread[idx])
    keep = cls != ""
    idx, cls = idx[keep], cls[keep]
    if idx.size == 0:
        return None
    rows = pd.DataFrame({
        "step": _step_of(ev.ts[idx], steps),
        "cls": cls.astype(str),
        "name": ev.names[ev.name[idx]].astype(str),
        "dur": ev.dur[idx],
        "device": _device_time(ev, idx, (cls == "recompute") | (cls == "rnn_cell")),
    })
    frames = _frames(ev, idx, np.isin(cls, list(_FRAMED)))
    by = ["step", "cls", "name"]
    if frames is not None:
        rows["frame"] = frames
        by.append("frame")
    grouped = rows.groupby(by, dropna=False, sort=True)
    out = grouped["dur"].agg(count="size", total_us="sum", max_us="max").reset_index()
    out["device_us"] = grouped["device"].sum(min_count=1).to_numpy()
    out["step"] = out["step"].astype("Int64")
    out["count"] = out["count"].astype(np.int64)
    if "frame" in out:  # text; a group of events none of which a frame encloses comes back as float NaN
        out["frame"] = out["frame"].astype(object).where(out["frame"].notna(), None)
    out.insert(0, "rank", rank)
    return out


def _device_time(ev: Events, idx: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Per event of ``idx``: for the ``measured`` ones in a trace with
    device events, the device time they launched (``launched_time``); NaN
    for the rest."""
    out = np.full(idx.size, np.nan)
    if measured.any() and (ev.kind >= KERNEL).any():
        out[measured] = launched_time(ev, idx[measured])
    return out


def _step_of(ts: np.ndarray, steps: pd.DataFrame | None) -> pd.array:
    """The step each start time falls in (NA outside every step)."""
    if steps is None or "start_us" not in steps.columns or steps["step"].isna().all():
        return step_of(ts, np.empty(0), np.empty(0), np.empty(0))
    s = steps.dropna(subset=["step", "start_us"])
    start = s["start_us"].to_numpy(float)
    return step_of(ts, start, start + s["duration_us"].to_numpy(float), s["step"].to_numpy(dtype=np.int64))


def step_windows(steps: pd.DataFrame | None) -> np.ndarray:
    """Positions of the ``steps`` rows that have a window (``start_us`` and
    ``duration_us`` known), in order of their start."""
    if steps is None or steps.empty or "start_us" not in steps.columns or "duration_us" not in steps.columns:
        return np.empty(0, dtype=np.int64)
    lo = steps["start_us"].to_numpy(float)
    rows = np.flatnonzero(np.isfinite(lo) & np.isfinite(steps["duration_us"].to_numpy(float)))
    return rows[np.argsort(lo[rows], kind="stable")]


def step_rows(ts: np.ndarray, steps: pd.DataFrame | None) -> np.ndarray:
    """Per time in ``ts``: the position of the ``steps`` row whose window
    ``[start_us, start_us + duration_us]`` holds it (:func:`step_windows`;
    windows do not overlap), -1 outside every one."""
    rows = step_windows(steps)
    if rows.size == 0:
        return np.full(ts.size, -1, dtype=np.int64)
    lo = steps["start_us"].to_numpy(float)[rows]
    at = iv.window_index(lo, lo + steps["duration_us"].to_numpy(float)[rows], ts)
    return np.where(at >= 0, rows[np.clip(at, 0, None)], -1)


def by_step(rows: np.ndarray, n: int) -> list[np.ndarray]:
    """Positions grouped by the steps row each falls in (``rows``, as
    :func:`step_rows` gives them): element r holds those in row r, in their
    order (events in time order stay so), for r in range(n). One sort, not
    one scan per step."""
    order = np.argsort(rows, kind="stable")
    bounds = np.searchsorted(rows[order], np.arange(n + 1), side="left")
    return [order[bounds[r]:bounds[r + 1]] for r in range(n)]


def step_of(ts: np.ndarray, start: np.ndarray, end: np.ndarray, ids: np.ndarray) -> pd.array:
    """Per time in ``ts``: the id of the span ``[start, end)`` it falls in
    (spans do not overlap), NA outside every span."""
    out = pd.array([pd.NA] * ts.size, dtype="Int64")
    if start.size == 0:
        return out
    order = np.argsort(start, kind="stable")
    start, end, ids = start[order], end[order], ids[order]
    at = np.searchsorted(start, ts, side="right") - 1
    ok = (at >= 0) & (ts < end[np.clip(at, 0, None)])
    out[ok] = ids[at[ok]].astype(np.int64)
    return out


def nested_classes(cls: np.ndarray, names: np.ndarray, start: np.ndarray, end: np.ndarray,
                   thread: np.ndarray) -> np.ndarray:
    """``cls`` with the classes that depend on what encloses an event
    settled ("" for an event not counted): the ``calls.OPTIMIZER_INNER``
    classes count only when they start inside an ``optimizer`` event of the
    same thread, and not inside a multi-tensor or fused op (on a CPU a
    ``_foreach`` op runs one elementwise op per tensor under it),
    ``nan_check`` and ``recompute`` only inside a ``backward`` node (and
    ``recompute`` only where no other ``recompute`` op encloses it); inside a backward node a ``sync`` ``aten::item`` is the NaN check
    reading its answer (``nan_check``) and its ``aten::_local_scalar_dense``
    is not counted again, and an ``rnn_cell`` is a checkpointed forward run
    again (not counted)."""
    cls = cls.copy()
    _keep_inside(cls, np.isin(cls, list(OPTIMIZER_INNER)), cls == "optimizer", start, end, thread)
    multi = (cls == "optimizer_foreach") | (cls == "optimizer_fused")
    if multi.any():  # a multi-tensor op's per-tensor ops (its CPU implementation) are that op, not more
        single = cls == "optimizer_op"
        cls[single & _inside(single, multi, start, end, thread)] = ""
        cls[multi & _nested_in_same(multi, start, end, thread)] = ""
    backward = cls == "backward"
    if backward.any():
        reads = (cls == "sync") & np.isin(names, list(_CHECK_READS))
        inside = _inside(reads | (cls == "nan_check"), backward, start, end, thread)
        cls[reads & inside & (names == "aten::item")] = "nan_check"
        cls[reads & inside & (names != "aten::item")] = ""
        cells = cls == "rnn_cell"
        cls[cells & _inside(cells, backward, start, end, thread)] = ""
    _keep_inside(cls, cls == "nan_check", backward, start, end, thread)
    _keep_inside(cls, cls == "recompute", backward, start, end, thread)
    recompute = cls == "recompute"
    if recompute.any():  # the outermost only: a recomputed op's own inner ops are its time
        cls[recompute & _nested_in_same(recompute, start, end, thread)] = ""
    return cls


def _nested_in_same(mask: np.ndarray, start: np.ndarray, end: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """Mask of the ``mask`` events that lie inside another ``mask`` event of
    the same thread (``intervals.Nesting`` among them alone)."""
    found = np.zeros(mask.size, dtype=bool)
    sel = np.flatnonzero(mask)
    threads = np.unique(thread[sel].astype(str), return_inverse=True)[1]  # Kineto codes or Ascend "pid/tid"
    found[sel] = ~iv.Nesting(threads, start[sel], end[sel]).top_level()
    return found


#: What reads a NaN check's answer back to the host: ``.item()`` and the op under it.
_CHECK_READS = frozenset({"aten::item", "aten::_local_scalar_dense"})


def _keep_inside(cls: np.ndarray, inner: np.ndarray, outer: np.ndarray, start: np.ndarray, end: np.ndarray,
                 thread: np.ndarray) -> None:
    """Clear the class of the ``inner`` events that do not start inside an ``outer`` one."""
    cls[inner & ~_inside(inner, outer, start, end, thread)] = ""


def _inside(inner: np.ndarray, outer: np.ndarray, start: np.ndarray, end: np.ndarray,
            thread: np.ndarray) -> np.ndarray:
    """Mask of the ``inner`` events that start inside an ``outer`` event of
    the same thread (False elsewhere)."""
    found = np.zeros(inner.size, dtype=bool)
    spans = np.flatnonzero(outer)
    for t in np.unique(thread[inner]):
        mine = spans[thread[spans] == t]
        if mine.size == 0:
            continue
        order = np.argsort(start[mine], kind="stable")
        s_start, s_end = start[mine][order], np.maximum.accumulate(end[mine][order])
        sel = np.flatnonzero(inner & (thread == t))
        at = np.searchsorted(s_start, start[sel], side="right") - 1
        found[sel] = (at >= 0) & (start[sel] <= s_end[np.clip(at, 0, None)])
    return found


def _frames(ev: Events, idx: np.ndarray, framed: np.ndarray) -> np.ndarray | None:
    """Per event of ``idx``: the innermost program frame (``calls.program_frame``)
    on its thread that encloses it, for the ``framed`` ones; None when the
    trace has no program frames."""
    sel = idx[framed]
    found = frames_enclosing(ev, ev.thread[sel], ev.ts[sel], ev.end_at(sel))
    if found is None:
        return None
    out = np.full(idx.size, None, dtype=object)
    out[np.flatnonzero(framed)] = found
    return out


def frames_enclosing(ev: Events, thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """Per span (``thread``, ``start``, ``end``): the name of the innermost
    program frame (``calls.program_frame``: a Python function of the
    profiled program, recorded with ``with_stack=True``) on that thread
    that encloses it, None where none does; None when the trace has no
    program frames."""
    prog = _program_frames(ev)
    return _enclosing(ev, prog, thread, start, end) if prog.size else None


def _enclosing(ev: Events, prog: np.ndarray, thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``frames_enclosing`` among the program frames ``prog``."""
    out = np.full(np.size(start), None, dtype=object)
    at = iv.Nesting(ev.thread[prog], ev.ts[prog], ev.end_at(prog)).enclosing(thread, start, end)
    hit = at >= 0
    out[hit] = ev.names[ev.name[prog[at[hit]]]].astype(str)
    return out


def ranges_holding(ev: Events, thread: int, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """Per stretch of ``thread`` (``start``, ``end``): the ``record_function``
    range it runs in (``user_annotation`` events:
    ``Optimizer.zero_grad#SGD.zero_grad``, a program's own
    ``record_function("log")``; the step and DataLoader markers left out),
    chosen as ``frames_holding`` chooses a frame; None where there is none,
    and None when the trace has no such range. Recorded with or without
    Python stacks."""
    from advisor.collectors.kineto.tables import ANNOTATION_RE  # it imports this module

    ranges = np.flatnonzero(ev.cat_is("user_annotation") & ~ev.named(ANNOTATION_RE))
    return _holding(ev, ranges, thread, start, end) if ranges.size else None


def frames_holding(ev: Events, thread: int, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """Per stretch of ``thread`` (``start``, ``end``; stretches without an
    operator): the program frame that runs in it -- the one of the
    program's frames that begin or end inside the stretch covering most of
    it, when that is at least half of it (a function called between two
    operators, such as a metric computed in Python), else the innermost
    frame enclosing it (the loop's own code); None where there is neither,
    and None when the trace has no program frames."""
    prog = _program_frames(ev)
    return _holding(ev, prog, thread, start, end) if prog.size else None


def _holding(ev: Events, spans: np.ndarray, thread: int, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``frames_holding`` among the events ``spans``."""
    outer = _enclosing(ev, spans, np.full(np.size(start), thread), start, end)
    spans = spans[ev.thread[spans] == thread]
    by_start = spans[np.argsort(ev.ts[spans], kind="stable")]
    s, e = ev.ts[by_start], ev.end_at(by_start)
    by_end = np.argsort(e, kind="stable")
    s_end, e_end = s[by_end], e[by_end]
    names = ev.names[ev.name[by_start]].astype(str)
    for i, (lo, hi) in enumerate(zip(np.asarray(start, float), np.asarray(end, float))):
        a, b = np.searchsorted(s, lo, side="left"), np.searchsorted(s, hi, side="left")
        c, d = np.searchsorted(e_end, lo, side="right"), np.searchsorted(e_end, hi, side="left")
        inside = np.minimum(e[a:b], hi) - s[a:b]  # begin in the stretch
        left = np.where(s_end[c:d] < lo, e_end[c:d] - lo, 0.0)  # begin before it, end in it
        best, name = 0.0, None
        if inside.size and inside.max() > best:
            j = int(np.argmax(inside))
            best, name = float(inside[j]), names[a + j]
        if left.size and left.max() > best:
            j = int(np.argmax(left))
            best, name = float(left[j]), names[by_end[c + j]]
        if name is not None and best >= 0.5 * (hi - lo):
            outer[i] = name
    return outer


def _program_frames(ev: Events) -> np.ndarray:
    """The trace's Python frames of the profiled program (``calls.program_frame``)."""
    py = np.flatnonzero(ev.kind == PYTHON)
    if py.size == 0:
        return py
    codes, at = np.unique(ev.name[py], return_inverse=True)  # each name asked once
    return py[np.array([program_frame(str(ev.names[c])) for c in codes], dtype=bool)[at]]


def launched_time(ev: Events, ranges: np.ndarray) -> np.ndarray:
    """Per range of ``ranges``: the summed duration of the device events
    whose launching runtime call it is the innermost range around."""
    rt = np.flatnonzero((ev.kind == RUNTIME) & np.isfinite(ev.corr))
    dev = np.flatnonzero((ev.kind >= KERNEL) & np.isfinite(ev.corr))
    out = np.zeros(ranges.size)
    if rt.size == 0 or dev.size == 0:
        return out
    ids, first = np.unique(ev.corr[rt], return_index=True)
    pos = np.clip(np.searchsorted(ids, ev.corr[dev]), 0, ids.size - 1)
    hit = ids[pos] == ev.corr[dev]
    call = rt[first[pos[hit]]]  # the launching call of each matched device event
    dur = ev.dur[dev[hit]]
    # the innermost range around each call's start, on the call's thread
    owner = iv.Nesting(ev.thread[ranges], ev.ts[ranges], ev.end_at(ranges)).enclosing(
        ev.thread[call], ev.ts[call], ev.ts[call], tol=0.0)
    got = owner >= 0
    np.add.at(out, owner[got], dur[got])
    return out
