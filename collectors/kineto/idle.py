"""What the host was doing while the device idled, how far ahead of the
device it ran, and host-to-device copies: per step window of a GPU trace.

Device idle is the step window minus the union of all device activity
(kernels, copies, sets). Each idle instant gets exactly one cause, the first
of these that holds (so the ``idle_<cause>_us`` columns are disjoint and sum
to ``duration_us - device_busy_us``):

``dependency``
    Work the host launched earlier had not started (its launch call ended
    more than ``LAUNCH_LATENCY_US`` before) in an idle stretch longer than
    ``TURNAROUND_US``: the device held queued work back, waiting on another
    stream or an event (``cudaStreamWaitEvent``; the trace's cuda_sync
    records name the stream and event record when it has them), on work the
    trace does not show (another process, a host callback, dropped events),
    or the host and device clocks disagree. What the host did meanwhile
    cannot be the cause: the device had work.
``turnaround``
    The same in idle stretches of at most ``TURNAROUND_US``: the device's
    own step from one queued operation to the next.
``sync``
    Nothing queued, and a thread that launches device work was blocked in a
    synchronizing call (``calls.SYNC_CALLS``; a runtime call that a cuda_sync
    record other than ``Stream Wait Event`` shows blocking, except the
    queries ``calls.QUERY_CALLS``; ``calls.SYNC_OPS`` such as ``aten::item``
    called from Python, a top-level op: one nested in another op blocks in
    a runtime call of the first kind) -- or had just left one that emptied the queue: when the device runs
    out of work while the host waits in a sync, the idle right after it is
    the sync's too, up to the time the host sat blocked before the device
    ran dry (had it not blocked, it would have prepared that much of the
    next work while the device was still busy).
``alloc`` / ``init`` / ``data``
    Nothing queued and the launching thread was in an allocation call
    (``calls.ALLOC_CALLS``), in start-up (``calls.INIT_CALLS``, torch.compile
    regions ``calls.COMPILE_OPS``), or fetching a batch (``calls.DATALOADER_RE``).
``host_ops``
    Nothing queued and the launching thread was running other host work:
    a host op (``cpu_op``; the outermost one names it), a runtime call
    outside any op, or the Python between two of them when they are at most
    ``HOST_GAP_US`` apart.
``unrecorded``
    Nothing queued and nothing recorded on the launching threads: the trace
    cannot say what the host did.

The *launching threads* are those whose runtime calls launched a device
event of the trace (correlation id): the training thread and autograd's
backward threads, not the DataLoader's or NCCL's helper threads. Where
several launch, an instant gets the first cause that holds on any of them.

Beside the columns, :func:`attribute` returns the ``idle_causes`` rows: per
step and cause the host ops, calls or waits the time went to (at most
``NAMES_PER_STEP`` each), the evidence a finding names; with the event
record a wait is on, and, when the trace has Python stacks
(``with_stack=True``), the innermost frame of the program the op or call
ran in (``calls.program_frame``). A host op or call that runs across a
step boundary counts in the step it starts in.

``dependency_recorded_us``: the part of ``idle_dependency_us`` whose wait
the trace records (a ``Stream Wait Event`` record on the waiting stream).

``launch_queue_us``: median over the step's kernels (by kernel start) of
kernel start minus the end of the runtime call that launched it -- how far
ahead of the device the host runs. A kernel launched on an idle device
starts a few microseconds after its launch returns; a deep queue (ms) means
the device, not the host, sets the pace.

Copies (``Memcpy HtoD ...`` events): ``copy_h2d_us`` (their union),
``copy_h2d_exposed_us`` (the part during which no kernel runs: the step
waits on the copy alone) and ``copy_h2d_pageable_us`` (``(Pageable ->
Device)`` copies, which the driver stages through a pinned buffer).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.calls import (
    ALLOC_CALLS,
    COMPILE_OPS,
    DATALOADER_RE,
    INIT_CALLS,
    QUERY_CALLS,
    STREAM_WAIT_RECORD,
    SYNC_CALLS,
    SYNC_OPS,
    program_frame,
)
from advisor.collectors.kineto.decode import HOST, KERNEL, MEMCPY, PYTHON, RUNTIME, SYNC, Events

#: The causes, in the order they are tried; column ``idle_<cause>_us`` each.
CAUSES = ("dependency", "turnaround", "sync", "alloc", "init", "data", "host_ops", "unrecorded")
#: Launch latency (us): a kernel launched on an idle device starts within a
#: few microseconds of its launch call's end (median 1-2 us, 75th
#: percentile under 4 us on the A100 and V100 traces of the corpus); queued
#: work counts as held back only after this much.
LAUNCH_LATENCY_US = 20.0
#: Device turnaround (us): with work queued, the device starts the next
#: operation 1-3 us after the previous one ends (99th percentile on the
#: corpus's A100/V100 traces, at most 12 us); an idle stretch this short
#: with work queued is that step, not a wait on something else.
TURNAROUND_US = 20.0
#: Python between host ops (us): eager PyTorch spends 5-50 us of
#: interpreter time between two ops it dispatches; a longer gap with nothing
#: recorded is host time the trace does not explain (``unrecorded``).
HOST_GAP_US = 100.0
#: Names kept per (step, cause) in the ``idle_causes`` rows.
NAMES_PER_STEP = 5
#: Label of host-ops time between ops (the Python between them).
BETWEEN_OPS = "(Python between host ops)"

#: A label key (int columns) -> (the name shown, the correlation id of the
#: event record waited on or -1).
Labeler = Callable[[tuple[int, ...]], tuple[str, int]]


def attribute(ev: Events, win: pd.DataFrame, busy: iv.Intervals,
              kernels: iv.Intervals) -> tuple[dict[str, np.ndarray], pd.DataFrame | None]:
    """Per-window idle causes, launch queue and copy columns (see the module
    doc), and the ``idle_causes`` rows (``step``, ``cause``, ``name``,
    ``idle_us``; None when there are none). ``busy``: union of device
    activity; ``kernels``: union of kernels."""
    lo, hi = win["start"].to_numpy(float), win["end"].to_numpy(float)
    windows = iv.merge(lo, hi)
    launch = _launches(ev)
    threads = np.unique(ev.thread[launch.call])
    host = _HostView(ev, threads, launch.call)
    idle = iv.subtract(windows, busy)
    sets, named = _causes(ev, idle, busy, launch, host)
    out = {f"idle_{c}_us": iv.covered_between(sets[c], lo, hi) for c in CAUSES}
    waits = named["dependency"]
    recorded = waits.keys[1] >= 0
    out["dependency_recorded_us"] = iv.covered_between(
        iv.intersect(sets["dependency"], iv.merge(waits.start[recorded], waits.end[recorded])), lo, hi)
    out["launch_queue_us"] = _launch_queue(ev, launch, lo, hi)
    out.update(_copies(ev, kernels, lo, hi))
    rows = [_name_rows(cause, pieces, sets[cause], lo, hi) for cause, pieces in named.items()]
    rows = [r for r in rows if r is not None]
    if not rows:
        return out, None
    table = pd.concat(rows, ignore_index=True)
    steps = win["step"].to_numpy(dtype=object)
    table.insert(0, "step", pd.array([steps[w] for w in table.pop("window")], dtype="Int64"))
    return out, table


# ---------------------------------------------------------------- launches


class _Launch:
    """Device events matched to the runtime call that launched them (same
    correlation id, the first such call): ``dev`` and ``call`` indices,
    aligned."""

    def __init__(self, dev: np.ndarray, call: np.ndarray, ev: Events):
        self.dev = dev
        self.call = call
        self.end = ev.end_at(call)


def _launches(ev: Events) -> _Launch:
    rt = np.flatnonzero((ev.kind == RUNTIME) & np.isfinite(ev.corr))
    dev = np.flatnonzero((ev.kind >= KERNEL) & np.isfinite(ev.corr))
    if rt.size == 0 or dev.size == 0:
        return _Launch(np.empty(0, np.int64), np.empty(0, np.int64), ev)
    ids, first = np.unique(ev.corr[rt], return_index=True)
    pos = np.clip(np.searchsorted(ids, ev.corr[dev]), 0, ids.size - 1)
    hit = ids[pos] == ev.corr[dev]
    return _Launch(dev[hit], rt[first[pos[hit]]], ev)


def _launch_queue(ev: Events, launch: _Launch, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Median (kernel start - launch call end) of the kernels starting in
    each window; NaN for a window without launched kernels."""
    k = ev.kind[launch.dev] == KERNEL
    start = ev.ts[launch.dev[k]]
    w = iv.window_index(lo, hi, start)
    ok = w >= 0
    med = pd.Series(start[ok] - launch.end[k][ok]).groupby(w[ok]).median()
    out = np.full(lo.size, np.nan)
    out[med.index.to_numpy(np.int64)] = med.to_numpy()
    return out


# ---------------------------------------------------------------- the host side


class _HostView:
    """The launching threads' host events by class (indices into ``ev``).
    The runtime calls read are those that launched device work (``launches``),
    that have a cuda_sync record, or that fall in a class (sync, allocation,
    start-up): the ones a reduced read keeps (:mod:`kineto_decode`), so that
    the causes do not depend on it."""

    def __init__(self, ev: Events, threads: np.ndarray, launches: np.ndarray):
        self.ev = ev
        on = np.isin(ev.thread, threads)
        host, rt = on & (ev.kind == HOST), on & (ev.kind == RUNTIME)
        ops = np.flatnonzero(on & ev.host_ops())
        self.top = ops[iv.Nesting(ev.thread[ops], ev.ts[ops], ev.end_at(ops)).top_level()]
        self._top_nest = iv.Nesting(ev.thread[self.top], ev.ts[self.top], ev.end_at(self.top))
        sync_ops = self.top[ev.named(SYNC_OPS)[self.top]]
        self.sync = np.union1d(np.flatnonzero(rt & (ev.named(SYNC_CALLS) | _blocking_records(ev))),
                               sync_ops)
        self.alloc = np.flatnonzero(rt & ev.named(ALLOC_CALLS))
        self.init = np.flatnonzero((rt & ev.named(INIT_CALLS)) | (host & ev.named(COMPILE_OPS)))
        self.data = np.flatnonzero(host & ev.named(DATALOADER_RE))
        recorded = np.flatnonzero(rt & _with_record(ev, lambda name: np.ones(name.size, dtype=bool)))
        self.calls = np.unique(np.r_[launches, recorded,
                                     self.sync[ev.kind[self.sync] == RUNTIME], self.alloc,
                                     self.init[ev.kind[self.init] == RUNTIME]])
        frames = np.flatnonzero(on & (ev.kind == PYTHON) & ev.named(program_frame))
        self._frames = frames
        self._frame_nest = iv.Nesting(ev.thread[frames], ev.ts[frames], ev.end_at(frames))

    def union(self, idx: np.ndarray) -> iv.Intervals:
        return iv.merge(self.ev.ts[idx], self.ev.end_at(idx))

    def active(self) -> iv.Intervals:
        """Host ops, runtime calls and DataLoader spans, plus the gaps of at
        most ``HOST_GAP_US`` between them on one thread."""
        ev = self.ev
        idx = np.r_[self.top, self.calls, self.data]
        starts, ends = [], []
        for t in np.unique(ev.thread[idx]):
            s, e = iv.merge(ev.ts[idx[ev.thread[idx] == t]], ev.end_at(idx[ev.thread[idx] == t]))
            gap = (s[1:] - e[:-1]) <= HOST_GAP_US
            starts += [s, e[:-1][gap]]
            ends += [e, s[1:][gap]]
        return iv.merge(np.concatenate(starts), np.concatenate(ends)) if starts else iv.EMPTY

    def frame_of(self, idx: np.ndarray) -> np.ndarray:
        """Name code of the innermost Python frame of the program enclosing
        each event (-1: none, or the trace has no Python stacks)."""
        ev = self.ev
        if self._frames.size == 0:
            return np.full(idx.size, -1, dtype=np.int64)
        at = self._frame_nest.enclosing(ev.thread[idx], ev.ts[idx], ev.end_at(idx))
        return np.where(at >= 0, ev.name[self._frames[np.clip(at, 0, None)]], -1).astype(np.int64)

    def enclosing_top(self, idx: np.ndarray) -> np.ndarray:
        """Name code of the top-level op enclosing each event (-1: none)."""
        ev = self.ev
        at = self._top_nest.enclosing(ev.thread[idx], ev.ts[idx], ev.end_at(idx))
        return np.where(at >= 0, ev.name[self.top[np.clip(at, 0, None)]], -1).astype(np.int64)


def _with_record(ev: Events, which) -> np.ndarray:
    """Runtime calls with a cuda_sync record of the same correlation id
    whose name (a code array) passes ``which``."""
    rec = (ev.kind == SYNC) & np.isfinite(ev.corr)
    rec[rec] = which(ev.name[rec])
    return (ev.kind == RUNTIME) & np.isin(ev.corr, np.unique(ev.corr[rec]))


def _blocking_records(ev: Events) -> np.ndarray:
    """Runtime calls a cuda_sync record shows blocking: one of the same
    correlation id other than ``Stream Wait Event``, unless the call only
    queries (``cudaEventQuery`` writes an ``Event Sync`` record too)."""
    waits = _with_record(ev, lambda name: ev.names[name] != STREAM_WAIT_RECORD)
    return waits & ~ev.named(QUERY_CALLS)


def _record_wait(ev: Events, idx: np.ndarray) -> np.ndarray:
    """For runtime calls ``idx``: the ``wait`` code of the cuda_sync record
    of the same correlation id (-1: none, or it names no wait)."""
    rec = np.flatnonzero((ev.kind == SYNC) & np.isfinite(ev.corr) & (ev.wait >= 0))
    out = np.full(idx.size, -1, dtype=np.int64)
    if rec.size == 0 or idx.size == 0:
        return out
    ids, first = np.unique(ev.corr[rec], return_index=True)
    pos = np.clip(np.searchsorted(ids, ev.corr[idx]), 0, ids.size - 1)
    hit = ids[pos] == ev.corr[idx]
    out[hit] = ev.wait[rec[first[pos[hit]]]]
    return out


# ---------------------------------------------------------------- causes


class _Pieces:
    """Disjoint spans, each attributed to a label key (int columns) that
    ``label`` turns into the name shown and the event record waited on,
    and to the Python frame of the program it ran in (``frame``: codes into
    ``frame_names``, -1 for none)."""

    def __init__(self, keys: list[np.ndarray], start: np.ndarray, end: np.ndarray, label: Labeler,
                 frame: np.ndarray, frame_names: np.ndarray):
        self.keys, self.start, self.end, self.label = keys, start, end, label
        self.frame, self.frame_names = frame, frame_names  # name code of the program frame, -1: none


def _first_cover(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each instant the spans cover goes to the span that starts first (the
    longest at equal starts: an enclosing op before what it encloses):
    ``(index, piece start, piece end)`` of the disjoint pieces."""
    order = np.lexsort((-end, start))
    s, e = start[order], end[order]
    before = np.r_[-np.inf, np.maximum.accumulate(e)[:-1]] if s.size else s
    ps = np.maximum(s, before)
    ok = e > ps
    return order[ok], ps[ok], e[ok]


def _pieces(ev: Events, start: np.ndarray, end: np.ndarray, keys: list[np.ndarray], label: Labeler,
            frame: np.ndarray | None = None) -> _Pieces:
    at, ps, pe = _first_cover(start, end)
    frame = np.full(start.size, -1, dtype=np.int64) if frame is None else frame
    return _Pieces([k[at] for k in keys], ps, pe, label, frame[at], ev.names)


def _causes(ev: Events, idle: iv.Intervals, busy: iv.Intervals, launch: _Launch,
            host: _HostView) -> tuple[dict[str, iv.Intervals], dict[str, _Pieces]]:
    """The idle time of each cause (disjoint sets covering ``idle``) and,
    per named cause, the pieces its time is attributed to."""
    held_from = launch.end + LAUNCH_LATENCY_US
    held_to = ev.ts[launch.dev]
    held = held_to > held_from
    pending = iv.merge(held_from[held], held_to[held])
    gs, ge = busy[1][:-1], busy[0][1:]
    short = (ge > gs) & (ge - gs <= TURNAROUND_US)
    queued = iv.intersect(idle, pending)
    sets = {"turnaround": iv.intersect(queued, (gs[short], ge[short])),
            "dependency": iv.subtract(queued, (gs[short], ge[short]))}
    rest = iv.subtract(idle, pending)
    blocked = host.union(host.sync)
    for cause, cover in (("sync", blocked), ("alloc", host.union(host.alloc)), ("init", host.union(host.init)),
                         ("data", host.union(host.data)), ("_drain", _drained(busy, blocked)),
                         ("host_ops", host.active())):
        sets[cause] = iv.intersect(rest, cover)
        rest = iv.subtract(rest, cover)
    sets["sync"] = iv.union(sets["sync"], sets.pop("_drain"))
    sets["unrecorded"] = rest
    named = {"dependency": _waits(ev, launch, held, held_from, held_to),
             "sync": _host_pieces(ev, host, host.sync, drain=True),
             "alloc": _host_pieces(ev, host, host.alloc),
             "init": _host_pieces(ev, host, host.init),
             "data": _host_pieces(ev, host, host.data),
             "host_ops": _host_pieces(ev, host, np.r_[host.top, host.calls], enclosing=False, waits=False)}
    return sets, named


def _drained(busy: iv.Intervals, blocked: iv.Intervals) -> iv.Intervals:
    """Idle right after a sync that emptied the device queue: where the
    device runs out of work (a busy interval ends) while the host is blocked
    in a sync ``[a, b]``, the span from then to ``b`` plus the time the host
    had already been blocked (``t - a``)."""
    t = busy[1]
    a, b = blocked
    if a.size == 0 or t.size == 0:
        return iv.EMPTY
    k = np.searchsorted(a, t, side="right") - 1
    kk = np.clip(k, 0, None)
    inside = (k >= 0) & (t <= b[kk]) & (t > a[kk])
    t, a, b = t[inside], a[kk[inside]], b[kk[inside]]
    return iv.merge(t, b + (t - a))


def _host_pieces(ev: Events, host: _HostView, idx: np.ndarray, drain: bool = False,
                 enclosing: bool = True, waits: bool = True) -> _Pieces:
    """Pieces of the host events ``idx``, labelled by name, a runtime call
    also by the top-level op it is in (``enclosing``) and by what its
    cuda_sync record waits on (``waits``: not for calls that do not wait).
    ``drain``: each one's span extended by its own length (the idle after a
    sync that emptied the queue, see :func:`_drained`)."""
    start, end = ev.ts[idx], ev.end_at(idx)
    if drain:
        end = end + (end - start)
    name = ev.name[idx].astype(np.int64)
    top = host.enclosing_top(idx) if enclosing else np.full(idx.size, -1, dtype=np.int64)
    wait = _record_wait(ev, idx) if waits else np.full(idx.size, -1, dtype=np.int64)

    def label(key: tuple[int, ...]) -> tuple[str, int]:
        top_code, code, wait_code = key
        text = str(ev.names[code])
        if top_code >= 0 and top_code != code:
            text = f"{ev.names[top_code]} > {text}"
        if wait_code < 0:
            return text, -1
        stream, record = ev.waits[wait_code]
        return f"{text} ({_waits_on(stream)})", record

    return _pieces(ev, start, end, [top, name, wait], label, host.frame_of(idx))


def _waits_on(stream: int) -> str:
    return f"waits on stream {stream}" if stream >= 0 else "waits on an event of an unknown stream"


def _waits(ev: Events, launch: _Launch, held: np.ndarray, held_from: np.ndarray,
           held_to: np.ndarray) -> _Pieces:
    """Pieces of the time device events waited after their launch, labelled
    by their stream and the last ``Stream Wait Event`` record on that stream
    before their launch (what the stream waited on)."""
    dev = launch.dev[held]
    stream = ev.stream_of(dev)
    wait = np.full(dev.size, -1, dtype=np.int64)
    rec = np.flatnonzero((ev.kind == SYNC) & (ev.names[ev.name] == STREAM_WAIT_RECORD) & (ev.wait >= 0))
    rec_stream = ev.stream_of(rec)
    issued = ev.ts[launch.call[held]]
    for s in np.unique(stream):
        r = rec[rec_stream == s]
        if r.size == 0:
            continue
        r = r[np.argsort(ev.ts[r], kind="stable")]
        mine = np.flatnonzero(stream == s)
        k = np.searchsorted(ev.ts[r], issued[mine], side="right") - 1
        wait[mine[k >= 0]] = ev.wait[r[k[k >= 0]]]

    def label(key: tuple[int, ...]) -> tuple[str, int]:
        s, w = key
        if w < 0:
            return f"stream {s} (no recorded wait)", -1
        on, record = ev.waits[w]
        return f"stream {s} ({_waits_on(on)})", record

    return _pieces(ev, held_from[held], held_to[held], [stream.astype(np.int64), wait], label)


# ---------------------------------------------------------------- names per step


def _split_at(start: np.ndarray, end: np.ndarray, cuts: np.ndarray) -> tuple[np.ndarray, ...]:
    """Spans cut at the sorted ``cuts`` inside them: (source index, start, end)."""
    i0 = np.searchsorted(cuts, start, side="right")
    i1 = np.searchsorted(cuts, end, side="left")
    n = 1 + np.maximum(i1 - i0, 0)
    src = np.repeat(np.arange(start.size), n)
    k = np.arange(src.size) - np.repeat(np.cumsum(n) - n, n)
    last = cuts.size - 1
    s = np.where(k == 0, start[src], cuts[np.clip(i0[src] + k - 1, 0, last)])
    e = np.where(k == n[src] - 1, end[src], cuts[np.clip(i0[src] + k, 0, last)])
    return src, s, e


def _name_rows(cause: str, pieces: _Pieces, cover: iv.Intervals, lo: np.ndarray,
               hi: np.ndarray) -> pd.DataFrame | None:
    """The ``idle_causes`` rows of one cause: idle time (in ``cover``) per
    window and label, the ``NAMES_PER_STEP`` largest of each window (for
    host ops with the Python between them as one more name)."""
    if pieces.start.size == 0 or cover[0].size == 0:
        return None
    src, s, e = _split_at(pieces.start, pieces.end, np.unique(np.r_[lo, hi]))
    us = iv.covered_between(cover, s, e)
    w = iv.window_index(lo, hi, s)
    ok = (w >= 0) & (us > 0)
    keys = np.column_stack([w[ok], pieces.frame[src[ok]]] + [k[src[ok]] for k in pieces.keys])
    if keys.size == 0:
        return None
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    total = np.bincount(inverse.ravel(), weights=us[ok])
    names, records = zip(*(pieces.label(tuple(int(x) for x in row[2:])) for row in uniq))
    frames = [str(pieces.frame_names[f]) if f >= 0 else None for f in uniq[:, 1]]
    frame = pd.DataFrame({"window": uniq[:, 0], "name": names, "idle_us": total, "event_record": records,
                          "frame": pd.Series(frames, dtype=object)})
    if cause == "host_ops":
        rest = iv.covered_between(cover, lo, hi) - np.bincount(uniq[:, 0], weights=total, minlength=lo.size)
        between = np.flatnonzero(rest > 1e-6)
        frame = pd.concat([frame, pd.DataFrame({"window": between, "name": BETWEEN_OPS, "idle_us": rest[between],
                                                "event_record": -1, "frame": None})], ignore_index=True)
    frame = frame.sort_values(["window", "idle_us"], ascending=[True, False], kind="stable")
    frame = frame.groupby("window", sort=False).head(NAMES_PER_STEP)
    frame.insert(1, "cause", cause)
    frame["event_record"] = frame["event_record"].astype("Int64").mask(frame["event_record"] < 0)
    if frame["frame"].isna().all():
        frame = frame.drop(columns="frame")
    return frame.reset_index(drop=True)


# ---------------------------------------------------------------- copies


#: Marker of a copy from pageable host memory in a Kineto memcpy name,
#: ``Memcpy HtoD (Pageable -> Device)`` (pinned: ``(Pinned -> Device)``).
PAGEABLE = "Pageable"


def _copies(ev: Events, kernels: iv.Intervals, lo: np.ndarray, hi: np.ndarray) -> dict[str, np.ndarray]:
    """H2D copy time per window: all of it, the part no kernel overlaps, and
    the part from pageable memory."""
    from advisor.collectors.kineto.tables import memcpy_type  # it imports this module

    h2d = ev.named(lambda n: memcpy_type(n) == "memcpy_h2d") & (ev.kind == MEMCPY)
    pageable = h2d & ev.named(lambda n: PAGEABLE.lower() in n.lower())
    copies = iv.merge(ev.ts[h2d], ev.end_at(h2d))
    return {"copy_h2d_us": iv.covered_between(copies, lo, hi),
            "copy_h2d_exposed_us": iv.covered_between(iv.subtract(copies, kernels), lo, hi),
            "copy_h2d_pageable_us": iv.covered_between(iv.merge(ev.ts[pageable], ev.end_at(pageable)), lo, hi)}
