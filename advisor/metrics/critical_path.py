"""The critical path of each step (the ``cp_edges`` table).

A step's critical path is the longest path through its dependency graph:
host threads, the launches that hand work to the device, the device's
streams and the synchronizations that hand control back
(:mod:`advisor.collectors.kineto.critical_path` builds the graph, after
HolisticTraceAnalysis' ``critical_path_analysis``). Shortening anything off
the path does not shorten the step; the path's split says which resource
bounds it: ``host`` (operators and runtime calls of the host threads),
``launch`` (waiting for a launch to reach an idle device, or between queued
device events), ``device`` (kernels, copies, sets) or ``sync`` (returning
from a wait for the device, and blocking calls that waited on nothing).

The longest path is a dynamic programme over the graph's nodes in
topological order (Kahn's algorithm; every node may start a path). Figures
are per steady step (``steps_view``): per rank the mean over its steady
steps, then the mean over ranks; shares divide the summed time of a kind by
the summed path length. A CPU-only trace's path is host-only (no device, no
launches): the busiest host thread of the step.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pandas as pd

from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import US_PER_MS, steady_steps
from advisor.profile import Profile

#: The kinds of time a path is split into.
KINDS = ("host", "launch", "device", "sync")
#: Edge kinds counted as another on the path: the gap before a device event
#: that waited for another stream's is queue delay, as between queued events.
FOLDED = {"dependency": "launch"}
_NEEDS = ["cp_edges.weight_us", "steps.duration_us"]


def longest_path(src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> tuple[float, np.ndarray] | None:
    """(length, indices of the edges on it in path order) of the longest
    path of a DAG given as edge arrays; None when the graph has a cycle."""
    nodes, inv = np.unique(np.r_[src, dst], return_inverse=True)
    n, m = nodes.size, src.size
    s, d = inv[:m], inv[m:]
    order = np.argsort(s, kind="stable")
    ptr = np.searchsorted(s[order], np.arange(n + 1)).tolist()
    out_dst, out_w, out_e = d[order].tolist(), weight[order].tolist(), order.tolist()
    indeg = np.bincount(d, minlength=n).tolist()
    dist = [0.0] * n
    pred = [-1] * n
    queue = deque(v for v in range(n) if indeg[v] == 0)
    seen = 0
    while queue:
        u = queue.popleft()
        seen += 1
        du = dist[u]
        for k in range(ptr[u], ptr[u + 1]):
            v = out_dst[k]
            c = du + out_w[k]
            if c > dist[v]:
                dist[v], pred[v] = c, out_e[k]
            indeg[v] -= 1
            if indeg[v] == 0:
                queue.append(v)
    if seen < n:
        return None
    end = int(np.argmax(dist))
    path = []
    while pred[end] >= 0:
        e = pred[end]
        path.append(e)
        end = int(s[e])
    return float(max(dist)), np.asarray(path[::-1], dtype=np.int64)


def step_paths(p: Profile) -> pd.DataFrame:
    """Per steady (rank, step): ``length_us`` and the time of each kind on the
    path (``host_us``, ``launch_us``, ``device_us``, ``sync_us``). Memoized."""
    return p.memo("critical_path.steps", lambda: _step_paths(p))


def _step_paths(p: Profile) -> pd.DataFrame:
    steady = steady_steps(p)
    if steady.empty or "step" not in steady.columns or steady["step"].isna().all():
        raise NotEvaluated("no step markers: the critical path is computed per step")
    edges = p.table("cp_edges").dropna(subset=["step"]).astype({"step": "int64"})
    keys = steady[["rank", "step"]].dropna().astype({"step": "int64"})
    edges = edges.merge(keys, on=["rank", "step"])
    rows = []
    for (rank, step), e in edges.groupby(["rank", "step"], sort=True):
        found = longest_path(e["src"].to_numpy(), e["dst"].to_numpy(), e["weight_us"].to_numpy(float))
        if found is None:
            continue
        length, on = found
        kinds = e["kind"].replace(FOLDED).to_numpy()[on]
        weights = e["weight_us"].to_numpy(float)[on]
        row = {"rank": int(rank), "step": int(step), "length_us": length}
        row.update({f"{k}_us": float(weights[kinds == k].sum()) for k in KINDS})
        row["device_edges"] = bool((e["kind"] == "device").any())
        rows.append(row)
    if not rows:
        raise NotEvaluated("no steady step has a dependency graph (no host or device events in its window)")
    return pd.DataFrame(rows)


def _per_rank(paths: pd.DataFrame, column: str) -> pd.Series:
    return paths.groupby("rank")[column].mean()


#: Why the kinds other than host are not evaluated on a CPU-only trace.
HOST_ONLY = "CPU-only trace: the critical path is host-only (no device work, launches or synchronizations)"


def _host_only(paths: pd.DataFrame) -> bool:
    return not bool(paths["device_edges"].any())


def _share(p: Profile, kind: str) -> Value:
    paths = step_paths(p)
    if kind != "host" and _host_only(paths):
        raise NotEvaluated(HOST_ONLY)
    sums = paths.groupby("rank")[[f"{kind}_us", "length_us"]].sum()
    sums = sums[sums["length_us"] > 0]
    if sums.empty:
        raise NotEvaluated("the critical path of every steady step has zero length")
    per_rank = sums[f"{kind}_us"] / sums["length_us"]
    return Value(float(per_rank.mean()), {"per_rank": {str(r): round(float(v), 4) for r, v in per_rank.items()},
                                          "host_only": _host_only(paths)})


@metric("critical_path.length_ms", unit="ms", needs=_NEEDS)
def length_ms(p: Profile) -> Value:
    """Length of the step's critical path: the longest chain of dependent
    host work, launches, device work and synchronizations in the step (HTA's
    critical path). Time off the path -- host idle between operators, device
    work overlapped by a longer chain -- is not in it, so it is at most about
    the step (device work launched in the step may run past its end).
    Evidence: the time of each kind on the path per step, and ``host_only``
    when the trace has no device (a CPU-only trace: the busiest thread)."""
    paths = step_paths(p)
    split = {f"{k}_ms": round(float(_per_rank(paths, f"{k}_us").mean()) / US_PER_MS, 3) for k in KINDS}
    return Value(float(_per_rank(paths, "length_us").mean()) / US_PER_MS,
                 {**split, "steps": int(len(paths)), "host_only": _host_only(paths)})


@metric("critical_path.host_ratio", unit="ratio", needs=_NEEDS)
def host_ratio(p: Profile) -> Value:
    """Share of the critical path spent in host work: a host thread inside
    its operators, runtime calls and ``record_function`` ranges (not the
    wait inside a blocking call). 1 on a CPU-only trace, whose path is
    host-only; the other shares are not evaluated there."""
    return _share(p, "host")


@metric("critical_path.launch_ratio", unit="ratio", needs=_NEEDS)
def launch_ratio(p: Profile) -> Value:
    """Share of the critical path between a launch call's start and its
    device event's start on an idle stream (launch latency), between queued
    device events on one stream, or from the end of the event a stream
    waits for (``cudaStreamWaitEvent``) to the waiting event's start: the
    device waiting to be handed work."""
    return _share(p, "launch")


@metric("critical_path.device_ratio", unit="ratio", needs=_NEEDS)
def device_ratio(p: Profile) -> Value:
    """Share of the critical path spent in device work (kernels, copies,
    sets): the step waits on the device there."""
    return _share(p, "device")


@metric("critical_path.sync_ratio", unit="ratio", needs=_NEEDS)
def sync_ratio(p: Profile) -> Value:
    """Share of the critical path in synchronization: from the end of the
    device work a blocking call waited for to the call's return, and
    blocking calls inside which no device work ended."""
    return _share(p, "sync")


@metric("critical_path.bound", unit="text", needs=_NEEDS)
def bound(p: Profile) -> Value:
    """The resource with the largest share of the critical path: host,
    launch, device or sync (the mean share over ranks; evidence: each
    share). A CPU-only trace is host-bound by construction."""
    if _host_only(step_paths(p)):
        return Value("host", {"host": 1.0, "host_only": True})
    shares = {k: _share(p, k).value for k in KINDS}
    return Value(max(shares, key=shares.get), {k: round(v, 4) for k, v in shares.items()})
