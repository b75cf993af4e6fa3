"""Step-time metrics: how long a step takes and where the time goes.

Run values are the mean over ranks of each rank's mean over steady-state
steps (see ``steps_view``). The device-utilisation figures (free, idle,
host-wait and launch-gap shares) are not evaluated when the device record
cannot support them, and the data-wait figures when the window is
start-up (``window.device_record_gap`` / ``startup_gap``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.collectors.kineto.host_gaps import MIN_GAP_US
from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import (
    US_PER_MS,
    lower_median,
    per_rank_mean,
    rank_evidence,
    ratio_of_means,
    run_mean_ms,
    run_ratio,
    steady_steps,
    step_ms_value,
    step_ratio_value,
)
from advisor.metrics.window import require_device_record, require_steady_window
from advisor.profile import SCHEMA, Profile


_ms = step_ms_value
_ratio = step_ratio_value


@metric("step.count", unit="count", needs=["steps"])
def step_count(p: Profile) -> Value:
    """Steps found: the largest number of step rows of any rank.

    Rows without a step id (per-rank totals from a cluster summary) count as
    one step each.
    """
    steps = p.table("steps")
    per_rank = steps.groupby("rank").size()
    return Value(int(per_rank.max()), {"steady_steps": int(len(steady_steps(p)))})


@metric("step.time_ms", unit="ms", needs=["steps.duration_us"])
def step_time(p: Profile) -> Value:
    """Mean wall time of a step.

    Mean over ranks of each rank's mean over steady-state steps (the first
    step is dropped when a rank has 4 or more).
    """
    return _ms(p, "duration_us")


@metric("step.time_cv", unit="ratio", needs=["steps.duration_us"])
def step_time_cv(p: Profile) -> Value:
    """Step-time jitter: standard deviation / mean of steady-state step
    durations, pooled over ranks. 0 means every step took the same time."""
    d = steady_steps(p)["duration_us"].dropna()
    if len(d) < 3 or d.mean() <= 0:
        raise NotEvaluated("fewer than 3 steady-state steps")
    return Value(float(d.std() / d.mean()), {"steps": int(len(d))})


@metric("step.computing_ms", unit="ms", needs=["steps.computing_us"])
def computing_ms(p: Profile) -> Value:
    """Device compute time per step: union of compute-kernel intervals."""
    return _ms(p, "computing_us")


@metric("step.computing_ratio", unit="ratio", needs=["steps.computing_us", "steps.duration_us"])
def computing_ratio(p: Profile) -> Value:
    """Share of the step the device spends computing (computing / step time)."""
    return _ratio(p, "computing_us")


@metric("step.communication_ms", unit="ms", needs=["steps.communication_us"])
def communication_ms(p: Profile) -> Value:
    """Total communication time per step, overlapped with compute or not."""
    return _ms(p, "communication_us")


@metric("step.overlapped_ms", unit="ms", needs=["steps.overlapped_us"])
def overlapped_ms(p: Profile) -> Value:
    """Time per step during which compute and communication run at once."""
    return _ms(p, "overlapped_us")


@metric("step.exposed_comm_ms", unit="ms", needs=["steps.exposed_comm_us"])
def exposed_comm_ms(p: Profile) -> Value:
    """Exposed communication per step: communication time not hidden by
    compute (communication - overlapped); the device waits on it."""
    return _ms(p, "exposed_comm_us")


@metric("step.exposed_comm_ratio", unit="ratio", needs=["steps.exposed_comm_us", "steps.duration_us"])
def exposed_comm_ratio(p: Profile) -> Value:
    """Share of the step spent in exposed communication."""
    return _ratio(p, "exposed_comm_us")


@metric("step.free_ms", unit="ms", needs=["steps.free_us"])
def free_ms(p: Profile) -> Value:
    """Free time per step: the device neither computes nor communicates
    (waiting on the host, the data pipeline, synchronization, launches)."""
    require_device_record(p)
    return _ms(p, "free_us")


@metric("step.free_ratio", unit="ratio", needs=["steps.free_us", "steps.duration_us"])
def free_ratio(p: Profile) -> Value:
    """Share of the step the device is free (free / step time)."""
    require_device_record(p)
    return _ratio(p, "free_us")


#: Steady steps each rank needs before the free time every step pays
#: (``step.recurring_free_ms``) is evaluated: the median of three is the
#: fewest that leaves one step's one-off (the first call after a compile,
#: a checkpoint now and then) out; with two it is still their mean.
MIN_MEDIAN_STEPS = 3


def _recurring_free(p: Profile) -> tuple[pd.Series, pd.Series]:
    """Per rank (index): the recurring free time (us, see
    :func:`recurring_free_ms`) and the typical step with that free time
    (us, see :func:`recurring_free_ratio`): sums of :func:`_recurring_places`."""
    places, busy = _recurring_places(p)
    free = places.sum()
    return free, busy + free


def _recurring_places(p: Profile) -> tuple[pd.DataFrame, pd.Series]:
    """(recurring free time per place (index) and rank (columns), 0 where a
    rank has no gap there; per rank the recurring busy time), in us."""
    return p.memo("recurring_free_places", lambda: _recurring_places_of(p))


def _recurring_places_of(p: Profile) -> tuple[pd.DataFrame, pd.Series]:
    gaps, wake = _free_gaps(p)
    # a wake-up after a collective is busy time, not free time
    rows = gaps.assign(free_us=gaps["gap_us"].where(~wake, 0.0),
                       busy_us=gaps["busy_after_us"].fillna(0.0) + gaps["gap_us"].where(wake, 0.0))
    free, busy = {}, {}
    for rank, (ids, mine) in _steady_rows(p, rows).items():
        free[rank] = _per_place(mine, ids, "free_us")
        busy[rank] = _by_place(mine, ids, "busy_us")
    return pd.DataFrame(free, dtype=float).fillna(0.0), pd.Series(busy, dtype=float)


def _free_gaps(p: Profile) -> tuple[pd.DataFrame, pd.Series]:
    """(the ``free_gaps`` table, its wake-up-after-a-collective mask)."""
    gaps = p.table("free_gaps")  # CPU-only Kineto traces with step markers (the metrics' needs)
    return gaps, gaps["after_collective"].fillna(False).astype(bool)


def _steady_rows(p: Profile, rows: pd.DataFrame) -> dict:
    """Per rank: (its steady step ids, the ``rows`` of the free_gaps table
    in them); NotEvaluated with fewer than ``MIN_MEDIAN_STEPS`` on a rank."""
    steps = steady_steps(p).dropna(subset=["step"])
    counts = steps.groupby("rank").size()
    if counts.empty or int(counts.min()) < MIN_MEDIAN_STEPS:
        raise NotEvaluated(f"fewer than {MIN_MEDIAN_STEPS} steady steps on a rank: a cost every step pays "
                           "cannot be told from one step's")
    out = {}
    for rank, own in steps.groupby("rank"):
        ids = own["step"].astype("int64").to_numpy()
        out[rank] = ids, rows[(rows["rank"] == rank) & rows["step"].isin(ids)]
    return out


def recurring_free_by_place(p: Profile) -> pd.DataFrame:
    """Recurring free time in us per place in the step (index: the
    ``free_gaps`` key) and rank (columns), 0 where a rank has no gap there:
    the parts :func:`recurring_free_ms` adds up per rank."""
    if not p.has("free_gaps", "gap_us"):
        raise NotEvaluated("no free gaps per step (CPU-only PyTorch traces with step markers)")
    require_device_record(p)
    return _recurring_places(p)[0]


def _per_place(rows: pd.DataFrame, ids, column: str) -> pd.Series:
    """Per place (``key``), the time of ``column`` it recurs with: the
    *lower* median over the steps ``ids`` of the place's time (0 in a step
    without it), the time more than half of the steps reach. With an even
    number of steps the plain median would average the middle two, and a
    rank descheduled at one place in half of its steps (4 gloo ranks on 2
    cores: 2 ms in 2 of 4 steps, 0.1 ms in the others) would keep half of
    that wait there."""
    per_key = rows.pivot_table(index="key", columns="step", values=column, aggfunc="sum", fill_value=0.0)
    values = per_key.reindex(columns=ids, fill_value=0.0).to_numpy(dtype=float)
    if not values.shape[1]:
        return pd.Series(0.0, index=per_key.index)
    return pd.Series(lower_median(values, axis=1), index=per_key.index)


def _by_place(rows: pd.DataFrame, ids, column: str) -> float:
    """Sum over places of :func:`_per_place`."""
    return float(_per_place(rows, ids, column).sum())


@metric("step.recurring_free_ms", unit="ms", needs=["free_gaps.gap_us", "steps.duration_us"])
def recurring_free_ms(p: Profile) -> Value:
    """Free time every step pays at the same places (CPU-only PyTorch
    traces): per rank, each free stretch of a steady step (no top-level
    operator on the training thread, no collective or DataLoader fetch on
    any thread: the ``free_gaps`` table) is keyed by its place in the step
    (the operators before and after it and its occurrence between them);
    the lower median over the steady steps of each place's time (0 in a
    step without it: :func:`_per_place`), summed over places; the least over ranks. A stretch that
    begins where a collective the training thread waits for ends on
    another thread is left out: it is that thread resuming after the wait,
    as long as the scheduler takes to give it a CPU (on a host with more
    busy processes than cores, milliseconds at the same place every step).

    Why by place: a loop's own Python (a checkpoint saved every step, a
    per-sample or per-timestep loop) runs at the same place for the same
    time in every step and keeps its median, while the time a process
    waits for a CPU on a host with more busy processes than cores lands
    at random places and has a small median at each. The ranks run the
    same loop, so what the least hindered rank pays is the loop's own cost
    (``cluster.slow_rank`` compares the ranks). Not evaluated with fewer
    than ``MIN_MEDIAN_STEPS`` steady steps on a rank."""
    require_device_record(p)
    free, _ = _recurring_free(p)
    return Value(float(free.min()) / US_PER_MS, rank_evidence(free))


@metric("step.recurring_free_ratio", unit="ratio", needs=["free_gaps.gap_us", "steps.duration_us"])
def recurring_free_ratio(p: Profile) -> Value:
    """Share of the typical step that ``step.recurring_free_ms`` takes:
    per rank its recurring free time over the step built the same way, the
    recurring free time plus the busy stretches' recurring time (each busy
    stretch keyed by the free stretch before it, the lower median over
    steady steps of each, summed; a wake-up after a collective counts as busy);
    the least over ranks. The step is rebuilt so, not taken as measured,
    because CPU waits at random places lengthen the measured steps, busy
    and free stretches alike: the share is the loop's own free time in a
    step without them."""
    require_device_record(p)
    free, duration = _recurring_free(p)
    ratio = (free / duration.where(duration > 0)).dropna()
    if ratio.empty:
        raise NotEvaluated("no steady step with a positive duration")
    return Value(float(ratio.min()), rank_evidence(ratio, scale=1.0))


@metric("step.recurring_long_free_ms", unit="ms", needs=["free_gaps.gap_us", "steps.duration_us"])
def recurring_long_free_ms(p: Profile) -> Value:
    """``step.recurring_free_ms`` counting only the free stretches of at
    least ``host_gaps.MIN_GAP_US`` (1 ms, the silent gaps' bound): the long
    pauses the loop makes at the same place in every step (per place the
    lower median over the steady steps, summed; the least over ranks). Pure-Python
    work in the loop (a checkpoint, a metric, a walk over a growing list)
    recurs so; a garbage collection, set off by allocation counts, comes
    every so many steps and has a small median at any place."""
    require_device_record(p)

    def build() -> pd.Series:
        gaps, wake = _free_gaps(p)
        rows = gaps.assign(long_us=gaps["gap_us"].where(~wake & (gaps["gap_us"] >= MIN_GAP_US), 0.0))
        return pd.Series({rank: _by_place(mine, ids, "long_us") for rank, (ids, mine) in _steady_rows(p, rows).items()},
                         dtype=float)

    long = p.memo("recurring_long_free", build)
    return Value(float(long.min()) / US_PER_MS, rank_evidence(long))


#: Fewest steps a place's long pauses must fall in to be periodic work of the
#: loop (``step.periodic_long_free_ms``): two steps make any interval.
PERIODIC_MIN_STEPS = 3


@metric("step.periodic_long_free_ms", unit="ms", needs=["free_gaps.gap_us", "steps.duration_us"])
def periodic_long_free_ms(p: Profile) -> Value:
    """The long pauses (free stretches of at least ``host_gaps.MIN_GAP_US``)
    the loop makes at one place every k-th step (k >= 2): per rank, the
    place (``free_gaps`` key) whose long pauses in the steady steps hold
    the most time, when they fall in at least ``PERIODIC_MIN_STEPS`` steps
    at one fixed interval of step ids; their time per steady step, the
    least over ranks (0 for a rank without). A checkpoint, an evaluation or
    a log written every k steps recurs so, at its line of the loop; a
    garbage collection, set off by allocation counts, lands where the
    count happens to cross the threshold. Evidence: the place and the
    interval of the rank reported."""
    require_device_record(p)
    gaps, wake = _free_gaps(p)
    rows = gaps[~wake & (gaps["gap_us"] >= MIN_GAP_US)]
    found: dict = {}
    for rank, (ids, mine) in _steady_rows(p, rows).items():
        found[rank] = (0.0, None, None)
        if mine.empty:
            continue
        key = mine.groupby("key")["gap_us"].sum().idxmax()
        there = mine[mine["key"] == key]
        steps = np.sort(there["step"].astype("int64").unique())
        interval = np.unique(np.diff(steps))
        if steps.size >= PERIODIC_MIN_STEPS and interval.size == 1 and interval[0] >= 2:
            found[rank] = (float(there["gap_us"].sum()) / len(ids), str(key), int(interval[0]))
    rank = min(found, key=lambda r: found[r][0])
    ms, key, every = found[rank]
    evidence = {"rank": int(rank)}
    if key is not None:
        evidence.update(place=key, every_steps=every)
    return Value(ms / US_PER_MS, evidence)


#: Program frames a recurring-free finding names, at most.
TOP_FRAMES = 3


@metric("step.recurring_free_frames", unit="list", needs=["free_gaps.frame", "free_gaps.gap_us", "steps.duration_us"])
def recurring_free_frames(p: Profile) -> Value:
    """The program's Python functions the recurring free time runs in
    (traces recorded with ``with_stack=True``; the ``free_gaps`` table's
    ``frame``), most time first, on the rank ``step.recurring_free_ms``
    reports: each place's lower median over the steady steps (as there) goes to
    the frame most of its stretches run in. At most ``TOP_FRAMES``, each as
    'name (ms per step)'. Evidence: each frame's ms."""
    return _recurring_free_by(p, "frame", "frames", NotEvaluated(
        "no Python frames of the program in the free stretches (record with with_stack=True)"),
        NotEvaluated("no recurring free time in a Python frame of the program"))


@metric("step.recurring_free_ranges", unit="list", needs=["free_gaps.range", "free_gaps.gap_us", "steps.duration_us"])
def recurring_free_ranges(p: Profile) -> Value:
    """The ``record_function`` ranges the recurring free time runs inside
    (the ``free_gaps`` table's ``range``: ``Optimizer.zero_grad#SGD.zero_grad``,
    the program's own ranges; recorded with or without Python stacks),
    counted as ``step.recurring_free_frames`` counts frames. Evidence: each
    range's ms."""
    return _recurring_free_by(p, "range", "ranges", NotEvaluated("no record_function range around the free stretches"),
                              NotEvaluated("no recurring free time in a record_function range"))


def _recurring_free_by(p: Profile, column: str, label: str, none: NotEvaluated, empty: NotEvaluated) -> Value:
    """``step.recurring_free_frames`` over the ``free_gaps`` column ``column``
    (evidence ``label``); raises ``none`` when no stretch has a value there,
    ``empty`` when none of them recurs."""
    require_device_record(p)
    free, _ = _recurring_free(p)
    rank = free.idxmin()
    gaps, wake = _free_gaps(p)
    ids, mine = _steady_rows(p, gaps[~wake])[rank]
    mine = mine.dropna(subset=[column])
    if mine.empty:
        raise none
    median = _per_place(mine, ids, "gap_us")
    place = mine.groupby("key")[column].agg(lambda f: f.mode().iloc[0])
    by_place = (median.groupby(place.reindex(median.index)).sum() / US_PER_MS).sort_values(ascending=False)
    by_place = by_place[by_place > 0].head(TOP_FRAMES)
    if by_place.empty:
        raise empty
    return Value([f"{name} ({ms:.2f} ms)" for name, ms in by_place.items()],
                 {"rank": int(rank), label: {str(k): round(float(v), 3) for k, v in by_place.items()}})


@metric("step.iteration_interval_ms", unit="ms", needs=["steps.iteration_interval_us"])
def iteration_interval_ms(p: Profile) -> Value:
    """Iteration interval (MindSpore step trace): from the end of one step's
    last device task to the start of the next step's first; the device waits
    for the host, mostly for the next batch of data."""
    return _ms(p, "iteration_interval_us")


@metric(
    "step.iteration_interval_ratio",
    unit="ratio",
    needs=["steps.iteration_interval_us", "steps.duration_us"],
)
def iteration_interval_ratio(p: Profile) -> Value:
    """Share of the step taken by the iteration interval."""
    return _ratio(p, "iteration_interval_us")


@metric("step.fp_bp_ms", unit="ms", needs=["steps.fp_bp_us"])
def fp_bp_ms(p: Profile) -> Value:
    """Forward plus backward time per step (MindSpore step trace fp_and_bp)."""
    return _ms(p, "fp_bp_us")


@metric("step.fp_bp_ratio", unit="ratio", needs=["steps.fp_bp_us", "steps.duration_us"])
def fp_bp_ratio(p: Profile) -> Value:
    """Share of the step spent in forward plus backward."""
    return _ratio(p, "fp_bp_us")


@metric("step.tail_ms", unit="ms", needs=["steps.tail_us"])
def tail_ms(p: Profile) -> Value:
    """Step tail: from the end of backward to the end of the step (gradient
    all-reduce that did not overlap backward, plus the optimizer update)."""
    return _ms(p, "tail_us")


@metric("step.tail_ratio", unit="ratio", needs=["steps.tail_us", "steps.duration_us"])
def tail_ratio(p: Profile) -> Value:
    """Share of the step taken by the tail."""
    return _ratio(p, "tail_us")


@metric("step.data_wait_ms", unit="ms", needs=["steps.data_wait_us"])
def data_wait_ms(p: Profile) -> Value:
    """Time per step the training loop spends fetching the next batch
    (e.g. inside ``enumerate(DataLoader)`` in a PyTorch trace)."""
    require_steady_window(p)
    return _ms(p, "data_wait_us")


@metric("step.data_wait_ratio", unit="ratio", needs=["steps.data_wait_us", "steps.duration_us"])
def data_wait_ratio(p: Profile) -> Value:
    """Share of the step spent waiting for the next batch."""
    require_steady_window(p)
    return _ratio(p, "data_wait_us")


@metric("step.device_idle_ratio", unit="ratio", needs=["steps.device_busy_us", "steps.duration_us"])
def device_idle_ratio(p: Profile) -> Value:
    """Share of the step in which no kernel, copy or set runs on the device:
    1 - (union of all device activity) / step time."""
    require_device_record(p)
    busy = run_ratio(p, "device_busy_us")
    if busy is None:
        raise NotEvaluated("no device activity with a positive step duration")
    return Value(max(0.0, 1.0 - busy))


@metric("step.host_idle_ratio", unit="ratio", needs=["steps.free_us", "steps.duration_us"])
def host_idle_ratio(p: Profile) -> Value:
    """Device free time NOT explained by waiting for data, as a share of the
    step: (free - data wait) / step time, where data wait is the dataloader
    time or, for MindSpore step traces, the iteration interval. When the
    profile measures no data wait at all, this equals the free ratio and the
    evidence says ``data_wait_known: false``."""
    require_device_record(p)
    steps = steady_steps(p)
    wait_col = next(
        (c for c in ("data_wait_us", "iteration_interval_us") if c in steps and steps[c].notna().any()),
        None,
    )
    free = steps["free_us"]
    if wait_col is not None:
        free = (free - steps[wait_col].fillna(0)).clip(lower=0)
    per_rank = steps.assign(_idle=free).groupby("rank")
    value = ratio_of_means(per_rank["_idle"].mean(), per_rank["duration_us"].mean())
    if value is None:
        raise NotEvaluated("no steps with a positive duration")
    return Value(value, {"data_wait_known": wait_col is not None, "data_wait_from": wait_col})


# ---------------------------------------------------------------- device idle split


@metric("step.host_wait_ratio", unit="ratio", needs=["steps.host_wait_us", "steps.duration_us"])
def host_wait_ratio(p: Profile) -> Value:
    """Share of the step the device idles waiting for the host: device-idle
    time (no kernel, copy or set running) in stretches longer than a launch
    gap, i.e. the host had not issued the next device work (data loading,
    Python and CPU operators, synchronizations such as ``.item()``).
    Kineto: idle gaps longer than ``KERNEL_GAP_US`` (50 us); the time the
    host was blocked in synchronizing calls is in the evidence
    (``sync_wait_ratio``). ``step.host_wait_ratio + step.kernel_gap_ratio``
    equals ``step.device_idle_ratio``."""
    require_device_record(p)
    value = _ratio(p, "host_wait_us")
    if p.has("steps", "sync_wait_us"):
        value.evidence["sync_wait_ratio"] = run_ratio(p, "sync_wait_us")
    return value


@metric("step.host_wait_ms", unit="ms", needs=["steps.host_wait_us"])
def host_wait_ms(p: Profile) -> Value:
    """Device idle time per step spent waiting for the host (see
    ``step.host_wait_ratio``)."""
    require_device_record(p)
    return _ms(p, "host_wait_us")


@metric("step.kernel_gap_ratio", unit="ratio", needs=["steps.kernel_gap_us", "steps.duration_us"])
def kernel_gap_ratio(p: Profile) -> Value:
    """Share of the step lost in launch gaps between kernels: the rest of
    device idle time, in gaps between two consecutive device operations no
    longer than the collector's launch-gap bound (Kineto ``KERNEL_GAP_US``,
    50 us: eager dispatch plus launch latency). Many short kernels with
    such gaps make a step launch-bound."""
    require_device_record(p)
    return _ratio(p, "kernel_gap_us")


@metric("step.kernel_gap_ms", unit="ms", needs=["steps.kernel_gap_us"])
def kernel_gap_ms(p: Profile) -> Value:
    """Launch-gap idle time per step (see ``step.kernel_gap_ratio``)."""
    require_device_record(p)
    return _ms(p, "kernel_gap_us")


# ---------------------------------------------------------------- what the host did while the device idled

#: Device-idle causes -> their steps columns (``idle_<cause>_us``, as the
#: Profile schema lists them): disjoint parts of the device idle time.
IDLE_COLUMNS = {c[len("idle_"):-len("_us")]: c for c in SCHEMA["steps"]
                if c.startswith("idle_") and c.endswith("_us")}
#: Names (host ops, calls, waits) a cause's metrics list.
TOP_IDLE_NAMES = 5


def _idle(p: Profile, cause: str, ratio: bool) -> Value:
    """Run ratio (``ratio``) or ms per step of one idle cause."""
    require_device_record(p)
    column = IDLE_COLUMNS[cause]
    return _ratio(p, column) if ratio else _ms(p, column)


def _idle_names(p: Profile, cause: str) -> Value:
    """The ``TOP_IDLE_NAMES`` names (``idle_causes`` table) with the most
    device idle time of ``cause`` per steady step: ``{"name", "ms"}``, ms
    per step, the mean over ranks (a rank without the name counts 0); with
    ``"frame"``, the program's Python frame that holds most of its time,
    when the trace has Python stacks."""
    require_device_record(p)
    table = p.table("idle_causes")
    steady = steady_steps(p)
    if steady.empty:
        raise NotEvaluated("no steady-state steps")
    rows = table[table["cause"] == cause].merge(steady[["rank", "step"]], on=["rank", "step"])
    if rows.empty:
        return Value([])
    ranks = steady["rank"].nunique()
    per_step = steady.groupby("rank").size()
    top = (rows.groupby(["rank", "name"])["idle_us"].sum() / per_step).groupby("name").sum() / ranks
    out = [{"name": str(n), "ms": round(float(v) / US_PER_MS, 3)} for n, v in top.nlargest(TOP_IDLE_NAMES).items()]
    if "frame" in rows.columns and rows["frame"].notna().any():
        by_frame = rows.dropna(subset=["frame"]).groupby(["name", "frame"])["idle_us"].sum()
        for entry in out:
            if entry["name"] in by_frame.index.get_level_values(0):
                entry["frame"] = str(by_frame.loc[entry["name"]].idxmax())
    return Value(out)


@metric("step.idle_causes_ms", unit="map",
        needs=["steps.duration_us", *(f"steps.{c}" for c in IDLE_COLUMNS.values())])
def idle_causes_ms(p: Profile) -> Value:
    """Device idle time per step by what held the device up, ms per cause
    (GPU traces): ``dependency`` (launched work waited to start: another
    stream, an event, or work the trace does not show), ``turnaround`` (the
    device's own step between queued operations), ``sync`` (nothing queued,
    the launching host thread blocked in a synchronization or just out of
    one that emptied the queue), ``alloc``, ``init`` (start-up, compilation),
    ``data`` (fetching the batch), ``host_ops`` (other host ops and the
    Python between them) and ``unrecorded`` (nothing recorded on the host).
    The causes are disjoint and add up to the device idle time; each is the
    mean over ranks of each rank's mean over steady steps. The evidence
    gives each cause's share of the step."""
    require_device_record(p)
    values = {cause: run_mean_ms(p, col) for cause, col in IDLE_COLUMNS.items()}
    if any(v is None for v in values.values()):
        raise NotEvaluated("no device-idle causes in steady-state steps")
    return Value(values, {"share": {cause: run_ratio(p, col) for cause, col in IDLE_COLUMNS.items()}})


@metric("step.idle_sync_ratio", unit="ratio", needs=["steps.idle_sync_us", "steps.duration_us"])
def idle_sync_ratio(p: Profile) -> Value:
    """Share of the step the device idles, with nothing queued, while a host
    thread that launches its work is blocked in a synchronization
    (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``,
    ``cudaEventSynchronize``, synchronous copies, ``aten::item`` ...) or has
    just left one that emptied the device queue (up to the time it had
    blocked). ``step.idle_sync_calls`` names the calls."""
    return _idle(p, "sync", ratio=True)


@metric("step.idle_sync_ms", unit="ms", needs=["steps.idle_sync_us"])
def idle_sync_ms(p: Profile) -> Value:
    """Device idle time per step spent on synchronizations (see
    ``step.idle_sync_ratio``)."""
    return _idle(p, "sync", ratio=False)


@metric("step.idle_host_ops_ratio", unit="ratio", needs=["steps.idle_host_ops_us", "steps.duration_us"])
def idle_host_ops_ratio(p: Profile) -> Value:
    """Share of the step the device idles, with nothing queued, while the
    host threads that launch its work run other host work: host operators
    (the outermost one names it), runtime calls, and the Python between two
    of them (gaps up to 100 us). Syncs, allocation, start-up and data
    loading are their own causes. ``step.idle_host_ops_top`` names the ops."""
    return _idle(p, "host_ops", ratio=True)


@metric("step.idle_host_ops_ms", unit="ms", needs=["steps.idle_host_ops_us"])
def idle_host_ops_ms(p: Profile) -> Value:
    """Device idle time per step spent waiting while the host runs CPU work
    (see ``step.idle_host_ops_ratio``)."""
    return _idle(p, "host_ops", ratio=False)


@metric("step.idle_dependency_ratio", unit="ratio", needs=["steps.idle_dependency_us", "steps.duration_us"])
def idle_dependency_ratio(p: Profile) -> Value:
    """Share of the step the device idles although work the host launched
    earlier has not started (beyond launch latency, in idle stretches longer
    than the device's turnaround between queued operations): the queued
    work waits on another stream or an event, on work the trace does not
    show, or the trace's host and device clocks disagree.
    ``step.idle_dependency_waits`` names the waiting streams."""
    return _idle(p, "dependency", ratio=True)


@metric("step.idle_dependency_ms", unit="ms", needs=["steps.idle_dependency_us"])
def idle_dependency_ms(p: Profile) -> Value:
    """Device idle time per step with launched work waiting to start (see
    ``step.idle_dependency_ratio``)."""
    return _idle(p, "dependency", ratio=False)


@metric("step.idle_dependency_recorded_share", unit="ratio",
        needs=["steps.idle_dependency_us", "steps.dependency_recorded_us"])
def idle_dependency_recorded_share(p: Profile) -> Value:
    """Share of that waiting time (``step.idle_dependency_ms``) whose wait the
    trace records: the waiting stream has a ``Stream Wait Event`` record
    (``cudaStreamWaitEvent``) naming the stream and event it waits on. The
    rest is inferred from launch and start times alone."""
    require_device_record(p)
    waited = per_rank_mean(p, "idle_dependency_us").sum()
    if waited <= 0:
        raise NotEvaluated("no device idle time with launched work waiting")
    return Value(float(per_rank_mean(p, "dependency_recorded_us").sum() / waited))


@metric("step.launch_queue_ms", unit="ms", needs=["steps.launch_queue_us"])
def launch_queue_ms(p: Profile) -> Value:
    """How far the host runs ahead of the device: per step the median over
    its kernels of (kernel start - end of the runtime call that launched
    it), mean over steady steps and ranks. A kernel launched on an idle
    device starts a few microseconds after its launch; a queue of
    milliseconds means the device sets the pace, not the host."""
    require_device_record(p)
    return _ms(p, "launch_queue_us")


@metric("step.launch_interval_ms", unit="ms", needs=["steps.launch_interval_us"])
def launch_interval_ms(p: Profile) -> Value:
    """The host's time per launched kernel: per step the median time between
    consecutive kernel launches (Ascend ``trace_view.json``: the runtime's
    launch flows to the device's tasks), mean over steady steps and ranks.
    When it is longer than the kernels run (``step.kernel_median_ms``) the
    device finishes each kernel before the next one is issued."""
    require_device_record(p)
    return _ms(p, "launch_interval_us")


@metric("step.kernel_median_ms", unit="ms", needs=["steps.kernel_median_us"])
def kernel_median_ms(p: Profile) -> Value:
    """Median duration of the device's kernels (tasks) per step, mean over
    steady steps and ranks (Ascend ``trace_view.json``)."""
    require_device_record(p)
    return _ms(p, "kernel_median_us")


@metric("step.idle_sync_calls", unit="list", needs=["idle_causes.name", "idle_causes.idle_us"])
def idle_sync_calls(p: Profile) -> Value:
    """The synchronizations the device idled on (``step.idle_sync_ms``), the
    5 with the most time, ``{"name", "ms"}`` with ms per step: the call or
    op (a call inside a top-level op as ``op > call``, e.g. ``aten::to >
    cudaStreamSynchronize`` for ``.cpu()``), and the stream it waits on
    where the trace's cuda_sync records say; ``"frame"``: the program's
    Python frame it ran in, when the trace has Python stacks."""
    return _idle_names(p, "sync")


@metric("step.idle_host_ops_top", unit="list", needs=["idle_causes.name", "idle_causes.idle_us"])
def idle_host_ops_top(p: Profile) -> Value:
    """The host work the device idled on (``step.idle_host_ops_ms``), the 5
    with the most time, ``{"name", "ms"}`` with ms per step: top-level host
    ops, runtime calls outside any op, and ``(Python between host ops)``;
    ``"frame"``: the program's Python frame they ran in, when the trace has
    Python stacks."""
    return _idle_names(p, "host_ops")


@metric("step.idle_dependency_waits", unit="list", needs=["idle_causes.name", "idle_causes.idle_us"])
def idle_dependency_waits(p: Profile) -> Value:
    """The streams whose launched work waited while the device idled
    (``step.idle_dependency_ms``), the 5 with the most time, ``{"name",
    "ms"}`` with ms per step: the stream and the stream it waits on, where
    the trace records the wait."""
    return _idle_names(p, "dependency")
