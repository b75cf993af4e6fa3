"""Vectorized interval math for trace analysis (numpy only, no per-event loops).

An *interval set* is a pair of float64 arrays ``(starts, ends)``, sorted by
start, pairwise disjoint (touching allowed) and with ``ends >= starts``:
what :func:`merge` returns. Every function here is O(n log n) in numpy;
Python loops only run over nesting levels or threads, never over events.
"""

from __future__ import annotations

import numpy as np

Intervals = tuple[np.ndarray, np.ndarray]

EMPTY: Intervals = (np.empty(0), np.empty(0))


def merge(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Union of possibly overlapping intervals as a disjoint, sorted set."""
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    ok = np.isfinite(starts) & np.isfinite(ends)
    if not ok.all():
        starts, ends = starts[ok], ends[ok]
    del ok
    if starts.size == 0:
        return EMPTY
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    e = np.maximum(ends[order], s)
    del order
    reach = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def total(iv: Intervals) -> float:
    """Covered length of an interval set."""
    return float(np.sum(iv[1] - iv[0]))


def _sweep(sets: list[Intervals], keep) -> Intervals:
    """Combine disjoint interval sets: set ``k`` contributes bit ``1 << k``
    to the cover state; return the (merged) parts where ``keep(state)``."""
    t = np.concatenate([x for s, e in sets for x in (s, e)])
    if t.size == 0:
        return EMPTY
    d = np.concatenate([np.full(x.size, sign << k, dtype=np.int8)
                        for k, (s, e) in enumerate(sets) for x, sign in ((s, 1), (e, -1))])
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    del order
    state = np.cumsum(d, dtype=np.int8)[:-1]
    del d
    sel = keep(state) & (t[1:] > t[:-1])
    return merge(t[:-1][sel], t[1:][sel])


def union(a: Intervals, b: Intervals) -> Intervals:
    """Union of two interval sets."""
    return merge(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Time covered by both sets."""
    return _sweep([a, b], lambda st: st == 3)


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """Time covered by ``a`` but not by ``b``."""
    return _sweep([a, b], lambda st: st == 1)


def covered_between(iv: Intervals, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Length of ``iv`` inside each window ``[lo[i], hi[i]]`` (vectorized)."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    return np.maximum(_cumulative(iv, hi) - _cumulative(iv, lo), 0.0)


def split_evenly(starts: np.ndarray, ends: np.ndarray, cover: Intervals) -> np.ndarray:
    """For each interval ``[starts[i], ends[i]]``, its part of ``cover``,
    time covered by k of the intervals split evenly among them (1/k each):
    the parts add up to the length of ``cover`` inside their union."""
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.maximum(np.asarray(ends, dtype=np.float64), starts)
    n = starts.size
    if n == 0:
        return np.zeros(0)
    t = np.concatenate([starts, ends])
    order = np.argsort(t, kind="stable")
    t = t[order]
    count = np.cumsum(np.where(order < n, 1, -1))[:-1]
    part = covered_between(cover, t[:-1], t[1:])
    weight = np.concatenate([[0.0], np.cumsum(np.where(count > 0, part / np.maximum(count, 1), 0.0))])
    pos = np.empty(2 * n, dtype=np.int64)
    pos[order] = np.arange(2 * n)
    return np.maximum(weight[pos[n:]] - weight[pos[:n]], 0.0)


def _cumulative(iv: Intervals, x: np.ndarray) -> np.ndarray:
    """Covered length of ``iv`` in ``(-inf, x]`` for each x."""
    s, e = iv
    if s.size == 0:
        return np.zeros(x.shape)
    before = np.concatenate([[0.0], np.cumsum(e - s)])
    idx = np.searchsorted(s, x, side="right") - 1
    safe = np.clip(idx, 0, None)
    partial = np.clip(np.minimum(x, e[safe]) - s[safe], 0.0, None)
    return np.where(idx >= 0, before[safe] + partial, 0.0)


def window_index(lo: np.ndarray, hi: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index of the window ``[lo, hi]`` (sorted, disjoint) holding each time
    ``t``, or -1 when none does."""
    if len(lo) == 0:
        return np.full(len(t), -1, dtype=np.int64)
    idx = np.searchsorted(lo, t, side="right") - 1
    safe = np.clip(idx, 0, None)
    inside = (idx >= 0) & (t <= np.asarray(hi)[safe])
    return np.where(inside, idx, -1)


def depth(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Nesting depth of each op (input order): how many ops of its thread
    are open when it starts, as :class:`Nesting` counts them (0 = top-level).

    Adding ops never lowers an op's depth, so an op nested within any subset
    of a thread's ops is nested in the whole thread too."""
    thread = np.asarray(thread, dtype=np.int64)
    start = np.asarray(start, dtype=np.float64)
    end = np.maximum(np.asarray(end, dtype=np.float64), start)
    out = np.zeros(start.size, dtype=np.int64)
    if start.size:
        o = np.lexsort((-end, start, thread))
        out[o] = _sorted_depth(thread[o], start[o], end[o])
    return out


def _sorted_depth(th: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Depths of ops sorted by (thread, start, longest first): a +1/-1
    sweep per thread."""
    # Zero-length ops get a tiny length so they sort inside their parent.
    e_eff = np.where(e > s, e, s + 1e-6)
    n = s.size
    # Events: ends (kind 0) before starts (kind 1) at equal times, so
    # touching siblings do not nest; starts at one time in sorted order.
    t = np.concatenate([s, e_eff])
    del e_eff
    kind = np.zeros(2 * n, dtype=np.int8)
    kind[:n] = 1
    rank_in = np.concatenate([np.arange(n, dtype=np.int32)] * 2)
    thr = np.concatenate([th, th])
    ev = np.lexsort((rank_in, kind, t, thr))
    del t
    is_start = kind[ev] == 1
    del kind
    delta = np.where(is_start, 1, -1).astype(np.int32)
    # Running depth restarts on each thread: subtract the thread's prefix.
    run_before = np.cumsum(delta, dtype=np.int64) - delta
    del delta
    thr_ev = thr[ev]
    del thr
    first = np.r_[True, thr_ev[1:] != thr_ev[:-1]]
    del thr_ev
    base = np.maximum.accumulate(np.where(first, np.arange(ev.size), 0))
    del first
    depth_at = run_before - run_before[base]
    del base, run_before
    depth_sorted = np.empty(n, dtype=np.int64)
    depth_sorted[rank_in[ev][is_start]] = np.clip(depth_at[is_start], 0, None)
    return depth_sorted


class Nesting:
    """Call-stack structure of host ops on each thread.

    Ops on one thread nest like a call stack. Built once, it answers: which
    ops are top-level (no enclosing op), each op's parent, and the innermost
    op enclosing a given span (e.g. the op that issued a runtime call).
    Arrays are in the input order; -1 means "none".
    """

    def __init__(self, thread: np.ndarray, start: np.ndarray, end: np.ndarray):
        self.thread = np.asarray(thread, dtype=np.int64)
        self.start = np.asarray(start, dtype=np.float64)
        self.end = np.maximum(np.asarray(end, dtype=np.float64), self.start)
        # Sorted order: by thread, start, longest first (parents before children).
        self.order = np.lexsort((-self.end, self.start, self.thread))
        self.depth = np.zeros(self.start.size, dtype=np.int64)
        self.parent = np.full(self.start.size, -1, dtype=np.int64)
        if self.start.size:
            self._build()

    def _build(self) -> None:
        """Depth from a +1/-1 sweep per thread, then parents level by level."""
        o = self.order
        th, s, e = self.thread[o], self.start[o], self.end[o]
        n = s.size
        depth_sorted = _sorted_depth(th, s, e)
        parent_sorted = np.full(n, -1, dtype=np.int64)
        for d in range(1, int(depth_sorted.max(initial=0)) + 1):
            kids = np.flatnonzero(depth_sorted == d)
            ups = np.flatnonzero(depth_sorted == d - 1)
            if kids.size == 0 or ups.size == 0:
                continue
            pos = np.searchsorted(ups, kids) - 1
            cand = ups[np.clip(pos, 0, None)]
            ok = (pos >= 0) & (th[cand] == th[kids])
            parent_sorted[kids[ok]] = cand[ok]
        self.depth[o] = depth_sorted
        self.parent[o] = np.where(parent_sorted >= 0, o[np.clip(parent_sorted, 0, None)], -1)

    def top_level(self) -> np.ndarray:
        """Boolean mask of ops with no enclosing op on their thread."""
        return self.parent < 0

    def enclosing(self, thread: np.ndarray, start: np.ndarray, end: np.ndarray,
                  tol: float = 1e-3) -> np.ndarray:
        """Innermost op (index) on the same thread containing each span
        ``[start, end]``, or -1."""
        thread = np.asarray(thread, dtype=np.int64)
        start = np.asarray(start, dtype=np.float64)
        end = np.asarray(end, dtype=np.float64)
        if self.start.size == 0 or start.size == 0:
            return np.full(start.size, -1, dtype=np.int64)
        o = self.order
        th, s = self.thread[o], self.start[o]
        # Last op (in sorted order) on the same thread starting at or before ``start``.
        pos = np.empty(start.size, dtype=np.int64)
        for t_id in np.unique(thread):
            lo, hi = np.searchsorted(th, [t_id, t_id + 1])
            sel = thread == t_id
            pos[sel] = np.where(hi > lo, np.searchsorted(s[lo:hi], start[sel] + tol, side="right") - 1 + lo, lo - 1)
            pos[sel] = np.where(pos[sel] >= lo, pos[sel], -1)
        cand = np.where(pos >= 0, o[np.clip(pos, 0, None)], -1)
        for _ in range(int(self.depth.max(initial=0)) + 2):
            c = np.clip(cand, 0, None)
            bad = (cand >= 0) & ((self.end[c] + tol < end) | (self.start[c] - tol > start))
            if not bad.any():
                break
            cand = np.where(bad, self.parent[c], cand)
        return cand

    def climb(self, idx: np.ndarray, want: np.ndarray) -> np.ndarray:
        """From each op index, walk up to the nearest ancestor-or-self where
        the boolean ``want`` (per op) holds; -1 when none does."""
        cur = np.asarray(idx, dtype=np.int64).copy()
        for _ in range(int(self.depth.max(initial=0)) + 2):
            c = np.clip(cur, 0, None)
            bad = (cur >= 0) & ~want[c]
            if not bad.any():
                break
            cur = np.where(bad, self.parent[c], cur)
        return cur
