"""Memory over time (the ``memory`` table: a PyTorch memory timeline), and the
device memory summary of MindSpore (the ``memory_summary`` table, at the end).

**Live bytes.** Per rank, the running sum of the table's signed ``bytes``
in time order, memory that existed before recording began included, taken
after every allocation and free (a version increment moves bytes from one
category to another and leaves it unchanged).

**Iterations.** Where the profile times its steps on the memory events'
clock (a PyTorch trace recorded with ``profile_memory=True``), the troughs
are the lowest point within each step. Else: a training iteration runs
the same operators on batches of the same shape, so its allocations and
frees repeat: the timeline's
events (action, category, bytes; version increments left out, they move
bytes between categories) repeat with a period of one iteration. The period
is the smallest number of events after which at least :data:`REPEAT_SHARE`
of the events recur, that fits twice in the timeline, and over which the
live memory rises and falls back by at least :data:`SWING_SHARE` of its
range (a repeated layer or time step repeats too, but the memory does not
fall back within it). The iterations are then cut where the live memory is
lowest within the first period and every period after it; within an
iteration the live memory may dip more than once (activations freed by the
backward pass, then optimizer temporaries), the cut is at its lowest. A
last iteration the recording ends before its last frees counts when it
rose and fell by a swing (below), but its trough is not used where the
level matters (growth).

When nothing repeats (shapes that change every iteration), the curve is
cut at its troughs instead: a *swing* is a rise or a fall of at least
:data:`SWING_SHARE` of the curve's range (peak minus lowest live bytes);
read from the start, the curve alternates between troughs and peaks, each
confirmed by a swing away from it (the last trough by the fall from the
last peak). An iteration runs from one trough to the next and holds one
peak; the first trough is the lowest point before the first peak (a
recording that starts in mid-iteration falls to it first), and what
follows the last trough (an iteration the recording cut before its fall)
is not an iteration.

Sizes are GiB (2**30 bytes). With several ranks, each figure is that of
the rank with the highest peak (growth: of the rank whose troughs grow
most), and its evidence names the rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from advisor.collectors.kineto.intervals import window_index
from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import rank_evidence
from advisor.profile import Profile

GIB = float(1 << 30)
#: Share of the live-bytes range a rise or fall must reach to be a swing
#: between a trough and a peak (module doc). An iteration's activations are
#: most of its rise (they are what the forward pass keeps for the backward
#: pass), while the ups and downs within a pass are single tensors: a third
#: of the range separates the two and still finds the iterations when a
#: leak raises the troughs by up to twice the iteration's own swing.
SWING_SHARE = 1 / 3
#: A trough counts as higher than the one before when it is higher by more
#: than this share of the peak: smaller changes are allocator rounding and
#: bookkeeping tensors (scalars, RNG state), not retained memory.
RISE_TOLERANCE_SHARE = 0.001
#: Iterations needed before the troughs can show a trend: two rises (three
#: troughs, the first iteration's opening one included) at least.
MIN_ITERATIONS_FOR_GROWTH = 2
#: Share of events that must equal the event one period later for the
#: allocations to repeat with that period: a training iteration runs the
#: same operators on same-shaped batches, so its allocations repeat exactly;
#: a tenth is left for what differs (a growing cache, a logging step).
REPEAT_SHARE = 0.9
#: Fewest events a period may hold: forward, backward and optimizer step
#: each allocate and free at least one tensor.
MIN_PERIOD_EVENTS = 6
#: Events whose recurrence proposes a period.
SIGNATURE_EVENTS = 16
#: Proposed periods tried, shortest first (repeated layers propose many).
MAX_LAGS_TRIED = 256
NEEDS = ["memory.bytes", "memory.action", "memory.category"]


@dataclass(frozen=True)
class Curve:
    """One rank's live bytes and the iterations found in it."""

    rank: int
    live: np.ndarray          # live bytes before any event (pre-existing), then after each allocation or free
    times: np.ndarray         # us of each point (NaN for the pre-existing level)
    peak: int                 # index of the highest point
    troughs: list[int]        # indices of the troughs, opening one first
    settled: list[int]        # the troughs whose level is the iteration's own (``_confirmed``)
    period: int | None        # events per iteration when the allocations repeat
    peaks: list[int]          # index of each iteration's peak (len(troughs) - 1)
    creates: np.ndarray       # cumulative allocations up to each point
    created: np.ndarray       # cumulative allocated bytes up to each point
    composition: dict[str, int]  # bytes by category at the peak


def _zigzag(live: np.ndarray, swing: float) -> tuple[list[int], list[int]]:
    """Troughs and peaks of ``live`` confirmed by swings of at least ``swing``
    (module doc): troughs[k] < peaks[k] < troughs[k + 1]."""
    troughs: list[int] = []
    peaks: list[int] = []
    if swing <= 0:
        return troughs, peaks
    seeking_trough, best = True, 0
    for j in range(1, len(live)):
        v = live[j]
        if seeking_trough:
            if v < live[best]:
                best = j
            elif v - live[best] >= swing:
                troughs.append(best)
                seeking_trough, best = False, j
        else:
            if v > live[best]:
                best = j
            elif live[best] - v >= swing:
                peaks.append(best)
                seeking_trough, best = True, j
    if seeking_trough and peaks:
        troughs.append(best)  # the fall from the last peak closes the last iteration
    return troughs, peaks  # a last rise the recording cut before its fall is left out


def _confirmed(live: np.ndarray, troughs: list[int], swing: float) -> list[int]:
    """The troughs the curve rises from again by a swing: the last trough,
    closed only by the end of the recording, may be cut before the
    iteration freed all it frees (the optimizer step, zero_grad), so it is
    left out where the level matters."""
    if troughs and live[troughs[-1]:].max() - live[troughs[-1]] < swing:
        return troughs[:-1]
    return troughs


def _tokens(action: np.ndarray, category: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """One integer per event naming what it does: action, category and bytes."""
    codes = {name: i for i, name in enumerate(dict.fromkeys(category.tolist()))}
    cats = np.array([codes[c] for c in category.tolist()], dtype="int64")
    return sizes * 64 + (action == "create") * 32 + cats


def _period(tokens: np.ndarray, live: np.ndarray, swing: float) -> int | None:
    """The number of events after which the allocations repeat (module doc),
    or None: the smallest lag at which at least :data:`REPEAT_SHARE` of the
    events equal the event that lag later, that fits twice in the timeline,
    and over which the live memory swings (rises and falls back) by at least
    ``swing`` on average. Candidate lags are those at which
    :data:`SIGNATURE_EVENTS` events from a quarter into the timeline recur."""
    n = len(tokens)
    if n < 2 * MIN_PERIOD_EVENTS or swing <= 0:
        return None
    m, at = min(SIGNATURE_EVENTS, n // 4), n // 4  # a signature from inside the timeline, not its ragged start
    lags = np.flatnonzero(tokens[at + 1: at + n // 2 + 1] == tokens[at]) + 1
    for k in range(1, m):
        lags = lags[tokens[at + lags + k] == tokens[at + k]]
    for lag in lags[lags >= MIN_PERIOD_EVENTS][:MAX_LAGS_TRIED]:
        lag = int(lag)
        if np.mean(tokens[:-lag] == tokens[lag:]) < REPEAT_SHARE:
            continue
        whole = (n // lag) * lag
        spans = live[1: whole + 1].reshape(-1, lag)
        if float(np.mean(spans.max(axis=1) - spans.min(axis=1))) >= swing:
            return lag
    return None


def _step_troughs(live: np.ndarray, times: np.ndarray, windows: np.ndarray) -> list[int] | None:
    """Per step window (``[start, end]`` rows, us, disjoint) that holds
    points of the curve, the index of its lowest point, in window order;
    None unless most of the points fall in the windows and at least three
    windows hold some (the memory events and the steps then share a clock:
    one trace's)."""
    if windows.size == 0:
        return None
    windows = windows[np.argsort(windows[:, 0], kind="stable")]
    at = window_index(windows[:, 0], windows[:, 1], times)  # NaN times (pre-existing memory) fall in none
    inside = np.flatnonzero(at >= 0)
    if inside.size < 0.5 * max(int(np.isfinite(times).sum()), 1):
        return None
    # the lowest point of each window: order by (window, live), take each window's first
    order = inside[np.lexsort((live[inside], at[inside]))]
    troughs = order[np.r_[True, at[order][1:] != at[order][:-1]]]
    return [int(i) for i in troughs] if troughs.size >= 3 else None


def _curve(rank: int, df: pd.DataFrame, windows: np.ndarray | None = None) -> Curve:
    times = df["time_us"].to_numpy(dtype="float64") if "time_us" in df.columns else np.full(len(df), np.nan)
    order = np.argsort(np.where(np.isnan(times), -np.inf, times), kind="stable")
    times = times[order]
    sizes = df["bytes"].to_numpy(dtype="int64")[order]
    action = df["action"].astype(str).to_numpy()[order]
    category = df["category"].astype(str).to_numpy()[order]
    pre = np.isnan(times) | (action == "preexisting")
    # a version increment moves bytes between categories (two events, net zero): the
    # live total changes with allocations and frees only
    moves = (~pre) & (action != "increment_version")
    e_sizes = sizes[moves]
    is_create = action[moves] == "create"
    live = int(sizes[pre].sum()) + np.r_[0, np.cumsum(e_sizes)]  # point i: after i events
    point_times = np.r_[np.nan, times[moves]]
    creates = np.r_[0, np.cumsum(is_create)]
    created = np.r_[0, np.cumsum(np.where(is_create, e_sizes, 0))]
    peak = int(np.argmax(live))
    upto = np.flatnonzero(pre | (times <= point_times[peak])) if peak else np.flatnonzero(pre)
    sums = pd.Series(sizes[upto]).groupby(category[upto]).sum()
    composition = {str(k): int(v) for k, v in sums.items() if v > 0}
    swing = SWING_SHARE * float(live[peak] - live.min())
    by_step = _step_troughs(live, point_times, windows) if windows is not None else None
    lag = None if by_step is not None else _period(_tokens(action[moves], category[moves], e_sizes), live, swing)
    if by_step is not None:
        troughs = settled = by_step
        peaks = [a + int(np.argmax(live[a: b + 1])) for a, b in zip(troughs, troughs[1:])]
    elif lag is not None:
        phase = int(np.argmin(live[: lag + 1]))
        troughs = list(range(phase, len(live), lag))
        settled = list(troughs)
        top = troughs[-1] + int(np.argmax(live[troughs[-1]:]))
        if min(live[top] - live[troughs[-1]], live[top] - live[top:].min()) >= swing:
            troughs.append(top + int(np.argmin(live[top:])))  # a last iteration cut before its last frees
        peaks = [a + int(np.argmax(live[a: b + 1])) for a, b in zip(troughs, troughs[1:])]
    else:
        troughs, peaks = _zigzag(live.astype("float64"), swing)
        settled = _confirmed(live, troughs, swing)
    return Curve(rank=rank, live=live, times=point_times, peak=peak, troughs=troughs, peaks=peaks,
                 settled=settled, period=lag, creates=creates, created=created, composition=composition)


def curves(p: Profile) -> list[Curve]:
    """Each rank's curve (memoised on the profile)."""
    def compute() -> list[Curve]:
        table = p.table("memory")
        return [_curve(int(rank), part, _windows(p, int(rank))) for rank, part in table.groupby("rank", sort=True)]
    return p.memo("memory.curves", compute)


def _windows(p: Profile, rank: int) -> np.ndarray | None:
    """``[start, end)`` (us) of each step of ``rank`` the profile times, or
    None where it times none (a memory timeline read alone)."""
    if not (p.has("steps", "start_us") and p.has("steps", "duration_us")):
        return None
    steps = p.table("steps")
    mine = steps[steps["rank"] == rank][["start_us", "duration_us"]].dropna().to_numpy(dtype="float64")
    return np.column_stack([mine[:, 0], mine[:, 0] + mine[:, 1]]) if len(mine) else None


def _highest(p: Profile) -> Curve:
    return max(curves(p), key=lambda c: c.live[c.peak])


def _with_iterations(p: Profile) -> Curve:
    c = _highest(p)
    if len(c.troughs) < 2:
        raise NotEvaluated("the live memory does not rise and fall back: no iteration found in the timeline")
    return c


def _gib(b: float) -> float:
    return float(b) / GIB


def _ms(c: Curve, i: int) -> float | None:
    t = c.times[i]
    return None if np.isnan(t) else float(t) / 1000.0


@metric("memory.peak_gib", unit="GiB", needs=NEEDS)
def peak_gib(p: Profile) -> Value:
    """Highest live memory of the timeline: the running sum of allocations
    minus frees, memory that existed before recording began included
    (module doc). Evidence: the rank, the pre-existing memory and the
    lowest live memory."""
    c = _highest(p)
    return Value(_gib(c.live[c.peak]), {"rank": c.rank, "preexisting_gib": _gib(c.live[0]),
                                        "lowest_gib": _gib(c.live.min())})


@metric("memory.peak_composition", unit="ratio", needs=NEEDS)
def peak_composition(p: Profile) -> Value:
    """What the memory holds at its peak: category (parameter,
    optimizer_state, input, temporary, activation, gradient, autograd_detail,
    unknown) -> share of the peak live bytes, largest first. Evidence: the
    GiB of each."""
    c = _highest(p)
    total = float(sum(c.composition.values()))
    if total <= 0:
        raise NotEvaluated("no live memory at the peak")
    ordered = sorted(c.composition.items(), key=lambda kv: -kv[1])
    return Value({k: v / total for k, v in ordered}, {"rank": c.rank, "gib": {k: _gib(v) for k, v in ordered}})


@metric("memory.iterations", unit="count", needs=NEEDS)
def iterations(p: Profile) -> Value:
    """Iterations found in the timeline: periods of its repeating
    allocations, cut where the live memory is lowest, or else rises to a
    peak and falls back to a trough by at least a third of the live memory's
    range (module doc). Evidence: each iteration's start, peak and end time
    (ms; the profiler's clock) and the events per iteration when they repeat."""
    c = _with_iterations(p)
    spans = [{"start_ms": _ms(c, a), "peak_ms": _ms(c, k), "end_ms": _ms(c, b)}
             for a, k, b in zip(c.troughs, c.peaks, c.troughs[1:])]
    return Value(len(c.troughs) - 1, {"rank": c.rank, "iterations": spans, "events_per_iteration": c.period})


@metric("memory.iteration_peaks_gib", unit="GiB", needs=NEEDS)
def iteration_peaks_gib(p: Profile) -> Value:
    """Each iteration's highest live memory, in order (``memory.iterations``)."""
    c = _with_iterations(p)
    return Value([_gib(c.live[k]) for k in c.peaks], {"rank": c.rank})


@metric("memory.iteration_troughs_gib", unit="GiB", needs=NEEDS)
def iteration_troughs_gib(p: Profile) -> Value:
    """Each iteration's lowest live memory at its end (the trough it falls
    back to), in order. Evidence: the trough before the first iteration, and
    whether the last trough is only where the recording ended (``last_cut``:
    it may be higher than the iteration's real trough)."""
    c = _with_iterations(p)
    return Value([_gib(c.live[t]) for t in c.troughs[1:]],
                 {"rank": c.rank, "opening_gib": _gib(c.live[c.troughs[0]]),
                  "last_cut": len(c.settled) < len(c.troughs)})


def _growth(c: Curve) -> tuple[float, float, float]:
    """(last trough - first, share of rises, least-squares slope per
    iteration) over the settled troughs, the opening one included."""
    levels = c.live[c.settled].astype("float64")
    diffs = np.diff(levels)
    tolerance = RISE_TOLERANCE_SHARE * float(c.live[c.peak])
    slope = float(round(np.polyfit(np.arange(len(levels)), levels, 1)[0]))  # whole bytes (no -0.0)
    return float(levels[-1] - levels[0]), float(np.mean(diffs > tolerance)), slope


def _growing(p: Profile) -> Curve:
    found = [c for c in curves(p) if len(c.settled) - 1 >= MIN_ITERATIONS_FOR_GROWTH]
    if not found:
        raise NotEvaluated(f"fewer than {MIN_ITERATIONS_FOR_GROWTH} iterations found in the timeline that "
                           "the memory rises from again: no trend of its troughs can be told")
    return max(found, key=lambda c: _growth(c)[0] / max(float(c.live[c.peak]), 1.0))


@metric("memory.trough_growth_ratio", unit="ratio", needs=NEEDS)
def trough_growth_ratio(p: Profile) -> Value:
    """How much the memory left live between iterations grew over the
    timeline, as a share of the peak: last trough minus the trough before
    the first iteration, over the peak live memory. Only troughs the memory
    rises from again count: the recording may end before the last
    iteration freed all it frees. Memory an iteration
    keeps (a leak: tensors appended to a list, a graph kept alive by a
    stored loss) raises every later trough. Evidence: the growth in GiB
    and its least-squares slope per iteration."""
    c = _growing(p)
    growth, _share, slope = _growth(c)
    return Value(growth / float(c.live[c.peak]), {"rank": c.rank, "growth_gib": _gib(growth),
                                                  "gib_per_iteration": _gib(slope)})


@metric("memory.trough_rise_share", unit="ratio", needs=NEEDS)
def trough_rise_share(p: Profile) -> Value:
    """Share of iterations whose trough is higher than the one before (the
    first compared with the trough before it) by more than 0.1% of the
    peak: 1.0 when the memory left between iterations rises every time, as
    with a leak; a one-time rise (optimizer state created by the first
    step) is one of them."""
    c = _growing(p)
    return Value(_growth(c)[1], {"rank": c.rank, "troughs": len(c.settled)})


def _churn(c: Curve) -> tuple[np.ndarray, np.ndarray]:
    """Allocations and allocated bytes of each iteration."""
    idx = np.array(c.troughs)
    return np.diff(c.creates[idx]), np.diff(c.created[idx])


@metric("memory.allocations_per_iteration", unit="count", needs=NEEDS)
def allocations_per_iteration(p: Profile) -> Value:
    """Median allocations (``create`` events) per iteration, from one trough
    to the next. Evidence: the allocations of the whole timeline."""
    c = _with_iterations(p)
    counts, _ = _churn(c)
    return Value(float(np.median(counts)), {"rank": c.rank, "per_iteration": counts.tolist(),
                                            "timeline_total": int(c.creates[-1])})


@metric("memory.allocated_gib_per_iteration", unit="GiB", needs=NEEDS)
def allocated_gib_per_iteration(p: Profile) -> Value:
    """Median bytes allocated per iteration (churn), from one trough to the
    next, each allocation counted whole whether or not it is freed within
    the iteration; compare with ``memory.peak_gib``: the allocator hands out
    this much per iteration. Evidence: the total of the whole timeline and
    the ratio to the peak."""
    c = _with_iterations(p)
    _, sizes = _churn(c)
    median = float(np.median(sizes))
    return Value(_gib(median), {"rank": c.rank, "per_iteration_gib": [_gib(s) for s in sizes],
                                "timeline_total_gib": _gib(c.created[-1]),
                                "peak_ratio": median / float(c.live[c.peak])})


# ----------------------------------------------------------- device memory summary
# The ``memory_summary`` table: per rank the device memory at its peak and the
# device memory available (MindSpore memory_usage_summary_{rank}.json; the
# caching allocator's reserved memory of Kineto [memory] events and torch_npu's
# memory_record.csv, against deviceProperties totalGlobalMem where Kineto lists it).

SUMMARY_NEEDS = ["memory_summary.capacity_gib", "memory_summary.peak_gib"]
_NO_CAPACITY = ("the profile records the peak device memory but not the device's capacity (torch_npu's "
                "memory_record.csv and operator_memory.csv do not; a Kineto trace lists it in deviceProperties "
                "totalGlobalMem)")


def _summary(p: Profile) -> pd.DataFrame:
    """Ranks with a positive capacity and a peak (NotEvaluated when none)."""
    df = p.table("memory_summary")
    with_peak = df[df["peak_gib"].notna()]
    df = with_peak[with_peak["capacity_gib"] > 0]
    if df.empty:
        raise NotEvaluated(_NO_CAPACITY if len(with_peak) else "no rank's memory summary records a device capacity")
    return df.groupby("rank")[["capacity_gib", "peak_gib"]].max()


def _peak_graph(p: Profile, rank: int) -> int | None:
    """The graph id holding ``rank``'s peak, where the table has it."""
    df = p.table("memory_summary")
    if "peak_graph" not in df:
        return None
    graphs = df.loc[df["rank"] == rank, "peak_graph"].dropna()
    return int(graphs.iloc[0]) if len(graphs) else None


@metric("memory.device_peak_share", unit="ratio", needs=["memory_summary.peak_gib"])
def device_peak_share(p: Profile) -> Value:
    """Peak device memory as a share of the device memory available, on the
    rank where it is highest: MindSpore's graphs' peak over the memory
    summary's capacity (``peak_mem`` / ``capacity``); PyTorch and torch_npu,
    the caching allocator's highest reserved memory (``Total Reserved`` of
    Kineto's ``[memory]`` events, of torch_npu's ``memory_record.csv``) over
    the device's memory (Kineto ``deviceProperties`` ``totalGlobalMem``; not
    recorded by torch_npu: not evaluated there). Near 1 a larger batch or
    model does not fit and the allocator has little room left for
    fragmentation. Evidence: that rank, its peak and capacity (GiB), the
    share per rank, and the graph holding the peak where the details file
    names it."""
    df = _summary(p)
    share = df["peak_gib"] / df["capacity_gib"]
    rank = int(share.idxmax())
    evidence = {"rank": rank, "peak_gib": float(df.loc[rank, "peak_gib"]),
                "capacity_gib": float(df.loc[rank, "capacity_gib"]), **rank_evidence(share, scale=1.0)}
    graph = _peak_graph(p, rank)
    if graph is not None:
        evidence["peak_graph"] = graph
    return Value(float(share.max()), evidence)


@metric("memory.device_peak_gib", unit="GiB", needs=["memory_summary.peak_gib"])
def device_peak_gib(p: Profile) -> Value:
    """The highest peak device memory of any rank (``memory_summary``
    ``peak_gib``: MindSpore's graphs' peak, or the caching allocator's
    highest reserved memory), whether or not the profile records the
    device's capacity. Evidence: the rank, and its highest allocated memory
    where recorded (reserved minus allocated is what the allocator holds
    unused: cached blocks and fragmentation)."""
    df = p.table("memory_summary").dropna(subset=["peak_gib"])
    if df.empty:
        raise NotEvaluated("no rank's memory summary records a peak")
    top = df.loc[df["peak_gib"].idxmax()]
    evidence = {"rank": int(top["rank"])}
    if "peak_allocated_gib" in df.columns and pd.notna(top["peak_allocated_gib"]):
        evidence["allocated_gib"] = float(top["peak_allocated_gib"])
    return Value(float(top["peak_gib"]), evidence)


@metric("memory.device_peak_rank", unit="rank", scope="rank", needs=SUMMARY_NEEDS)
def device_peak_rank(p: Profile) -> Value:
    """The rank whose graphs peak at the most device memory (MindSpore memory
    summary ``peak_mem``): the first to run out when the batch or model
    grows; with pipeline stages, the heaviest stage. Evaluated with two
    ranks or more. Evidence: the peak per rank (GiB)."""
    df = _summary(p)
    if len(df) < 2:
        raise NotEvaluated("memory summary of fewer than two ranks")
    return Value(int(df["peak_gib"].idxmax()), {"per_rank_gib": {int(k): float(v) for k, v in df["peak_gib"].items()}})
