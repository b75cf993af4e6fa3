"""The dependency graph of each step of a Kineto trace: the ``cp_edges`` table.

The graph follows HolisticTraceAnalysis' critical-path model
(``hta/analyzers/critical_path_analysis.py``, ``CPGraph``), reduced to the
points where threads and streams meet. Nodes are instants; an edge is a
dependency with the time it takes (``weight_us``) and what that time is
(``kind``). The critical path of a step is the longest path of its graph
(:mod:`advisor.metrics.critical_path`).

What is in a step's graph: the host events (``cpu_op`` / ``Operator`` /
``user_annotation`` ranges and runtime calls) that start in the step (its
window ``[start, end)``, so that the next step's marker is not in it), and
the device events (kernels, copies, sets) whose launching runtime call
(same ``correlation`` id) starts in it. Events keep their whole span, as in
HTA: work that runs past the step's end is on its path.

``host``
    Along each host thread, from one node to the next: the time the thread
    was inside a host event between them (the union of its events). Time
    outside every event of the thread is not on any path (HTA's zero-weight
    dependency edges between top-level operators). Unlike HTA, whose graph
    leaves ``user_annotation`` ranges out, the ranges count: the Python
    between two operators inside ``ProfilerStep#N`` is host work the step
    waits for, so the training thread's chain spans its step and the path
    leaves it only where the thread waits for the device. Nodes of a
    thread: its first start and last end in the step, the start of each
    launch call, and the start and end of each blocking call.
``launch``
    From the start of the runtime call that launched a device event to the
    event's start, when the stream had finished its previous event by then
    (nothing queued: the device waited for the launch); else from the end of
    the stream's previous event to this one's start (the gap between queued
    work). HTA's kernel-launch and kernel-kernel delays. A device event that
    waits for another stream's (``dependency``) has neither edge when that
    event ends later: the wait, not the launch or the queue, held it.
``device``
    A device event's duration, start to end.
``sync``
    A blocking call (``calls.SYNC_CALLS``, or one a cuda_sync record other
    than ``Stream Wait Event`` shows blocking, except queries, as
    :mod:`kineto_idle` reads them; or a ``calls.MAY_BLOCK_CALLS`` copy inside
    which device work ends) that waited for device work: an edge from
    the end of the last device event that ends inside the call (if it was
    launched before the call returned) to the call's end, weighing the time from
    that end to the return; the thread's own edges inside the call weigh 0
    (the device work is the path there, as in HTA, which zeroes blocking
    calls). A blocking call inside which no device work ends did not wait:
    its own duration is a ``sync`` edge of the thread.
``dependency``
    Cross-stream order: a ``Stream Wait Event`` record (its row is the
    waiting stream, ``wait_on_stream`` the stream waited on) makes the
    waiting stream's first event launched after the ``cudaStreamWaitEvent``
    call depend on the last event launched on the other stream before that
    call (HTA links to the last launch before the ``cudaEventRecord``; a
    reduced trace keeps no ``cudaEventRecord`` calls, so the launch before the
    wait stands for it). It weighs the time from the awaited event's end to
    the waiting event's start (HTA's weighs 0, losing that gap from the
    path); the path's split counts it as launch time.

Weights are clamped at 0 where host and device clocks disagree (a device
event starting before its launch call). A device event whose launch is not
recorded is not in the graph. CPU-only traces have host edges only: their
critical path is the busiest host thread.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.collectors.kineto import idle
from advisor.collectors.kineto import intervals as iv
from advisor.collectors.kineto.calls import MAY_BLOCK_CALLS, STREAM_WAIT_RECORD, SYNC_CALLS
from advisor.collectors.kineto.decode import HOST, KERNEL, RUNTIME, SYNC, Events

#: The kinds of edge (the ``kind`` column).
KINDS = ("host", "launch", "device", "sync", "dependency")


class _Graph:
    """Nodes and edges of one rank's graphs (node ids unique over its steps),
    added in bulk."""

    def __init__(self):
        self.nodes = 0
        self.parts: list[tuple] = []

    def new(self, n: int) -> np.ndarray:
        """Ids of ``n`` new nodes."""
        self.nodes += n
        return np.arange(self.nodes - n, self.nodes, dtype=np.int64)

    def edges(self, src, dst, weight, kind, step) -> None:
        """Edges ``src[i] -> dst[i]``; ``kind`` one name or one per edge;
        weights below 0 (clocks that disagree) are clamped to 0."""
        src = np.asarray(src, dtype=np.int64)
        if src.size:
            kind = np.full(src.size, kind, dtype=object) if isinstance(kind, str) else np.asarray(kind, dtype=object)
            self.parts.append((src, np.asarray(dst, dtype=np.int64),
                               np.maximum(np.asarray(weight, dtype=np.float64), 0.0), kind, step))


class _Trace:
    """The events of a trace the graphs read, found once for all steps."""

    def __init__(self, ev: Events):
        self.ev = ev
        self.host = np.flatnonzero(((ev.kind == HOST) | (ev.kind == RUNTIME)) & (ev.dur > 0))
        rt = ev.kind == RUNTIME
        self.blocking = rt & (ev.named(SYNC_CALLS) | idle._blocking_records(ev))
        self.may_block = rt & ~self.blocking & ev.named(MAY_BLOCK_CALLS)
        launch = idle._launches(ev)
        order = np.argsort(ev.ts[launch.call], kind="stable")
        self.dev, self.call = launch.dev[order], launch.call[order]
        self.call_ts = ev.ts[self.call]
        self.waits = self._stream_waits()

    def _stream_waits(self) -> list[tuple[float, int, int]]:
        """(call start, waiting stream, stream waited on) of each
        ``cudaStreamWaitEvent`` call with a ``Stream Wait Event`` record that
        names the stream (thread codes of the device rows)."""
        ev = self.ev
        rec = np.flatnonzero((ev.kind == SYNC) & np.isfinite(ev.corr) & (ev.wait >= 0))
        rec = rec[ev.names[ev.name[rec]] == STREAM_WAIT_RECORD] if rec.size else rec
        if rec.size == 0:
            return []
        calls = np.flatnonzero((ev.kind == RUNTIME) & np.isfinite(ev.corr))
        call_of = dict(zip(ev.corr[calls].tolist(), calls.tolist()))
        code = {label: c for c, label in enumerate(ev.threads)}
        out = []
        for r in rec.tolist():
            stream = ev.waits[int(ev.wait[r])][0]
            pid = ev.threads[int(ev.thread[r])].rpartition("/")[0]
            other = code.get(f"{pid}/{stream}")
            call = call_of.get(float(ev.corr[r]))
            if stream >= 0 and other is not None and call is not None:
                out.append((float(ev.ts[call]), int(ev.thread[r]), other))
        return out


#: Why a trace with device events has no graph.
NO_LAUNCH_LINKS = ("no device event carries the correlation id of the runtime call that launched it: "
                   "without launch links the critical path cannot cross from host to device")


def table(ev: Events, steps: pd.DataFrame, rank: int) -> pd.DataFrame | None:
    """The ``cp_edges`` rows of every step window (``steps``: the trace's
    steps table, ``step``, ``start_us``, ``duration_us``); None when the trace
    has device events but no launch links them to the host (no correlation
    ids, :data:`NO_LAUNCH_LINKS`): a host-only graph would misstate a GPU
    job's path."""
    tr = _Trace(ev)
    if (ev.kind >= KERNEL).any() and tr.dev.size == 0:
        return None
    g = _Graph()
    lo = steps["start_us"].to_numpy(float)
    hi = lo + steps["duration_us"].to_numpy(float)
    for step, a, b in zip(steps["step"], lo, hi):
        _window(tr, g, None if pd.isna(step) else int(step), a, b)
    if not g.parts:
        return None
    src, dst, weight, kind, step = zip(*g.parts)
    sizes = [x.size for x in src]
    return pd.DataFrame({
        "rank": np.full(sum(sizes), rank, dtype=np.int64),
        "step": pd.array(np.repeat(np.array(step, dtype=object), sizes).tolist(), dtype="Int64"),
        "src": np.concatenate(src),
        "dst": np.concatenate(dst),
        "kind": np.concatenate(kind),
        "weight_us": np.concatenate(weight),
    })


def _window(tr: _Trace, g: _Graph, step, lo: float, hi: float) -> None:
    """Add the graph of the step window ``[lo, hi)``."""
    ev = tr.ev
    sel = (tr.call_ts >= lo) & (tr.call_ts < hi)
    dev, call = tr.dev[sel], tr.call[sel]
    host = np.union1d(tr.host[(ev.ts[tr.host] >= lo) & (ev.ts[tr.host] < hi)], call)
    if host.size == 0:
        return
    order = np.argsort(ev.ts[dev], kind="stable")
    dev, call = dev[order], call[order]  # the window's device events by start, with their launch calls
    d_ts, d_end, d_stream = ev.ts[dev], ev.end_at(dev), ev.thread[dev].astype(np.int64)
    c_ts, c_thread = ev.ts[call], ev.thread[call].astype(np.int64)
    starts = g.new(dev.size)
    ends = g.new(dev.size)
    g.edges(starts, ends, d_end - d_ts, "device", step)
    by_end = np.argsort(d_end, kind="stable")
    launch_node = np.full(dev.size, -1, dtype=np.int64)
    for thread in np.unique(ev.thread[host]).tolist():
        _thread(tr, g, step, host[ev.thread[host] == thread], thread, c_ts, c_thread, d_end, by_end, ends,
                launch_node)
    deps = _stream_waits(tr, lo, hi, d_stream, c_ts, d_ts)
    # the previous event on each one's stream
    by_stream = np.lexsort((np.arange(dev.size), d_stream))
    prev = np.full(dev.size, -1, dtype=np.int64)
    same = d_stream[by_stream[1:]] == d_stream[by_stream[:-1]]
    prev[by_stream[1:][same]] = by_stream[:-1][same]
    held = np.full(dev.size, -np.inf)  # when the event a Stream Wait Event makes it wait for ends
    if deps:
        dst, src = np.array(list(deps.keys())), np.array(list(deps.values()))
        held[dst] = d_end[src]
        g.edges(ends[src], starts[dst], d_ts[dst] - d_end[src], "dependency", step)
    has_prev = prev >= 0
    p_end = np.where(has_prev, d_end[np.clip(prev, 0, None)], -np.inf)
    queued = has_prev & (p_end > c_ts)  # the stream was still busy when the launch began
    k = np.flatnonzero(queued & (held <= p_end))
    g.edges(ends[prev[k]], starts[k], d_ts[k] - p_end[k], "launch", step)
    k = np.flatnonzero(~queued & (held <= c_ts))
    g.edges(launch_node[k], starts[k], d_ts[k] - c_ts[k], "launch", step)


def _thread(tr: _Trace, g: _Graph, step, idx: np.ndarray, thread: int, c_ts: np.ndarray, c_thread: np.ndarray,
            d_end: np.ndarray, by_end: np.ndarray, ends: np.ndarray, launch_node: np.ndarray) -> None:
    """The nodes and edges of one host thread in a window; sets
    ``launch_node`` of the device events it launched and adds the ``sync``
    edges into its blocking calls."""
    ev = tr.ev
    busy = iv.merge(ev.ts[idx], ev.end_at(idx))
    maybe = idx[tr.may_block[idx]]
    maybe = maybe[_awaited(ev.ts[maybe], ev.end_at(maybe), d_end, by_end, c_ts) >= 0]
    sure = idx[tr.blocking[idx]]
    block = iv.merge(np.r_[ev.ts[sure], ev.ts[maybe]], np.r_[ev.end_at(sure), ev.end_at(maybe)])
    mine = np.flatnonzero(c_thread == thread)
    points = np.unique(np.r_[busy[0][:1], busy[1][-1:], c_ts[mine], block[0], block[1]])
    ids = g.new(points.size)
    launch_node[mine] = ids[np.searchsorted(points, c_ts[mine])]
    waited = _awaited(block[0], block[1], d_end, by_end, c_ts)
    w = waited >= 0
    g.edges(ends[waited[w]], ids[np.searchsorted(points, block[1][w])], block[1][w] - d_end[waited[w]], "sync", step)
    p, q = points[:-1], points[1:]
    j = np.searchsorted(block[0], p, side="right") - 1
    jj = np.clip(j, 0, None)
    blocked = (j >= 0) & (q <= block[1][jj]) if block[0].size else np.zeros(p.size, dtype=bool)
    weight = np.where(blocked, np.where(w[jj] if block[0].size else False, 0.0, q - p),
                      iv.covered_between(busy, p, q))
    g.edges(ids[:-1], ids[1:], weight, np.where(blocked, "sync", "host"), step)


def _awaited(a: np.ndarray, b: np.ndarray, d_end: np.ndarray, by_end: np.ndarray, c_ts: np.ndarray) -> np.ndarray:
    """For blocking calls ``[a, b]``: the device event each waited for, the
    last one ending inside it (index into the window's device events), if
    it was launched before the call returned (else host and device clocks
    disagree, and an edge back to the call would close a cycle); -1 where
    there is none. (``by_end``: the events in order of their end.)"""
    if by_end.size == 0:
        return np.full(np.size(a), -1, dtype=np.int64)
    ends = d_end[by_end]
    at = np.clip(np.searchsorted(ends, b, side="right") - 1, -1, None)
    found = by_end[np.clip(at, 0, None)]
    ok = (at >= 0) & (ends[np.clip(at, 0, None)] > a) & (c_ts[found] < b)
    return np.where(ok, found, -1)


def _stream_waits(tr: _Trace, lo: float, hi: float, d_stream: np.ndarray, c_ts: np.ndarray,
                  d_ts: np.ndarray) -> dict[int, int]:
    """{waiting device event: the event it waits for} of the ``Stream Wait
    Event`` records in the window (indices into the window's device events).
    As in HTA, the waiting event's launch edge (or the edge from its
    stream's previous event) is left out when the awaited event ends later:
    the wait, not the launch, held it."""
    out = {}
    for at, waiting, other in tr.waits:
        if not lo <= at < hi:
            continue
        after = np.flatnonzero((d_stream == waiting) & (c_ts > at))
        before = np.flatnonzero((d_stream == other) & (c_ts < at))
        if after.size and before.size:
            dst = int(after[np.argmin(c_ts[after])])
            src = int(before[np.argmax(c_ts[before])])
            if d_ts[src] <= d_ts[dst]:
                out[dst] = src
    return out
