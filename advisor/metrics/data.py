"""Input-pipeline metrics: device data queue, dataset-pipeline operators and
the ends of epochs over a PyTorch DataLoader."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from advisor.metrics.anomaly import RECURRENCE_CONFIDENCE
from advisor.metrics.quantiles import beta_quantile
from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import US_PER_MS, run_mean_ms, run_ratio, steady_steps, step_ms_value
from advisor.metrics.window import require_steady_window
from advisor.profile import Profile

#: Leading share of queue samples treated as warm-up (prefetch during graph
#: compilation fills the queue before training starts).
QUEUE_WARMUP_SHARE = 0.1
#: Suggested dataset workers carry this much headroom over the measured need.
WORKER_HEADROOM = 2.0


def _steady_queue(p: Profile, queue: str) -> pd.DataFrame:
    q = p.table("data_queue")
    q = q[q["queue"] == queue].sort_values(["rank", "index"], kind="stable")
    if q.empty:
        raise NotEvaluated(f"no {queue} queue samples")
    skip = q.groupby("rank").cumcount() < (
        q.groupby("rank")["index"].transform("size") * QUEUE_WARMUP_SHARE
    ).apply(math.ceil)
    return q[~skip]


def _empty_ratio(p: Profile, queue: str) -> Value:
    q = _steady_queue(p, queue)
    if q.empty:
        raise NotEvaluated(f"too few {queue} queue samples")
    per_rank = (q["size"] <= 0).groupby(q["rank"]).mean()
    evidence = {"samples": int(len(q)), "mean_size": round(float(q["size"].mean()), 3)}
    return Value(float(per_rank.mean()), evidence)


@metric("data.queue_empty_ratio", unit="ratio", needs=["data_queue.size"])
def queue_empty_ratio(p: Profile) -> Value:
    """Share of device data-queue samples that found the queue empty (after
    the first 10% of samples, which see the prefetch done during graph
    compilation). Near 1 means the device waits for every batch."""
    return _empty_ratio(p, "device")


@metric("data.host_queue_empty_ratio", unit="ratio", needs=["data_queue.size"])
def host_queue_empty_ratio(p: Profile) -> Value:
    """Like ``data.queue_empty_ratio`` for the host-side queue that feeds the
    device queue (an empty host queue blames the dataset pipeline itself)."""
    return _empty_ratio(p, "host")


def _op_label(row) -> str:
    name = str(row["name"])
    return name if name.endswith(f"_{row['op_id']}") else f"{name}_{row['op_id']}"


def _bottleneck(p: Profile) -> dict:
    """The dataset op that starves the ones after it (``_find_bottleneck``)."""
    return p.memo("data_bottleneck", lambda: _find_bottleneck(p))


#: Queue usage is a mean of sampled fill levels: differences below this
#: share of the capacity are not read as a gradient (a queue "fuller"
#: downstream by less, or sources whose drops differ by less, are equal).
QUEUE_NOISE = 0.1


#: A queue more than half full on average is filling: its producer runs
#: ahead of its consumer, which holds every op before it up (below one
#: half it drains: its consumer is the faster).
BACKED_UP = 0.5


def _workers(op) -> int | None:
    return None if pd.isna(op.get("workers")) else int(op.get("workers"))


def _root_output(p: Profile, rank, ops: pd.DataFrame) -> float | None:
    """The usage of the queue the root op feeds (the host queue into the
    device, ``data_queue`` ``host`` samples with their capacity), when the
    pipeline file leaves the root's own queue empty."""
    q = p.table("data_queue")
    if q is None or "capacity" not in q.columns:
        return None
    host = q[(q["queue"] == "host") & (q["rank"] == rank) & (q["capacity"] > 0)]
    if host.empty:
        return None
    return float((host["size"] / host["capacity"]).clip(0, 1).mean())


def _rank_candidates(p: Profile, rank, group: pd.DataFrame) -> list[dict]:
    """Per op of one rank's pipeline tree: the usage of its emptiest input
    queue (1 for a source, the leaf that reads storage, which is always
    ready: an op is held up by no input when even its emptiest is full),
    of its own output queue, and the drop between them; only ops
    with no backed-up queue downstream (``BACKED_UP``, and fuller than
    their own output): an op upstream of a filling queue is held up by the
    op after that queue, not the other way round."""
    group = group.drop_duplicates("op_id")
    usage = dict(zip(group["op_id"].tolist(), group["output_queue_usage"].tolist()))
    parent = dict(zip(group["op_id"].tolist(), group["parent_id"].tolist()))
    roots = [i for i, par in parent.items() if pd.isna(par) or par not in parent]
    for root in roots:
        if pd.isna(usage.get(root)):
            usage[root] = _root_output(p, rank, group)
    children: dict = {}
    for op_id, par in parent.items():
        if not pd.isna(par):
            children.setdefault(par, []).append(op_id)
    out = []
    for _, op in group.iterrows():
        own = usage.get(op["op_id"])
        if own is None or pd.isna(own):
            continue
        fed = [usage.get(c) for c in children.get(op["op_id"], [])]
        fed = [u for u in fed if u is not None and not pd.isna(u)]
        if children.get(op["op_id"]) and not fed:
            continue  # inputs not recorded: no gradient to read
        source = not children.get(op["op_id"])
        inputs = 1.0 if source else min(fed)
        downstream, seen, node = [], set(), parent.get(op["op_id"])
        while node is not None and not pd.isna(node) and node not in seen:
            seen.add(node)
            if usage.get(node) is not None and not pd.isna(usage.get(node)):
                downstream.append(usage[node])
            node = parent.get(node)
        if any(d >= BACKED_UP and d - own >= QUEUE_NOISE for d in downstream):
            continue
        out.append({"rank": int(rank), "op": _op_label(op), "op_ids": [op["op_id"]], "drop": float(inputs - own),
                    "input_usage": float(inputs), "output_usage": float(own),
                    "workers": _workers(op), "sources": source})
    return out


def _find_bottleneck(p: Profile) -> dict:
    """Walk each rank's dataset tree from the sources (the leaves that read
    storage: input usage 1) to the queue that feeds the device, and take
    the op where the queue usage drops most from its inputs to its output
    (ops upstream of a backed-up queue excluded: ``_rank_candidates``). When
    that op is a source, the sources whose drop is as large (within
    ``QUEUE_NOISE``) are named together: every queue after them drains."""
    ops = p.table("data_ops")
    if ops is None or not {"op_id", "output_queue_usage", "parent_id"} <= set(ops.columns):
        raise NotEvaluated("dataset ops have no queue usage or pipeline links")
    best: dict | None = None
    for rank, group in ops[ops["rank"].notna()].groupby("rank", sort=True):
        candidates = _rank_candidates(p, rank, group)
        if not candidates:
            continue
        top = max(candidates, key=lambda c: c["drop"])
        if top["sources"]:
            peers = [c for c in candidates if c["sources"] and top["drop"] - c["drop"] < QUEUE_NOISE]
            workers = [c["workers"] for c in peers if c["workers"] is not None]
            top = {**top, "op": ", ".join(c["op"] for c in peers), "op_ids": [i for c in peers for i in c["op_ids"]],
                   "output_usage": max(c["output_usage"] for c in peers),
                   "workers": min(workers) if workers else None}
        if best is None or top["drop"] > best["drop"]:
            best = top
    if best is None:
        raise NotEvaluated("no dataset op with both input and output queue usage")
    return best


@metric("data.bottleneck_op", unit="text", needs=["data_ops.output_queue_usage"])
def bottleneck_op(p: Profile) -> Value:
    """The dataset-pipeline operator that starves the ones after it. From
    the sources (leaves reading storage, input usage 1: storage is always
    ready) to the queue that feeds the device (the host queue, for the
    root), the op with the largest drop from its inputs' output-queue usage
    (the emptiest input) to its own; an op with a backed-up queue (more
    than half full, and fuller than its own) downstream is held up there
    and is not a candidate. When every queue drains, that
    is the sources. Named as type_id, e.g. MapOp_3 (sources joined by
    commas)."""
    b = _bottleneck(p)
    return Value(b["op"], b)


@metric("data.bottleneck_usage_drop", unit="ratio", needs=["data_ops.output_queue_usage"])
def bottleneck_usage_drop(p: Profile) -> Value:
    """Queue-usage drop across ``data.bottleneck_op``: min usage of its input
    queues minus usage of its output queue (0..1; 1 = full before, empty after)."""
    b = _bottleneck(p)
    return Value(b["drop"], {"op": b["op"]})


@metric("data.bottleneck_input_usage", unit="ratio", needs=["data_ops.output_queue_usage"])
def bottleneck_input_usage(p: Profile) -> Value:
    """Mean usage of the queue that feeds ``data.bottleneck_op`` (0..1 of its
    capacity; the emptiest, where several feed it; 1 for sources, which read
    storage)."""
    b = _bottleneck(p)
    return Value(b["input_usage"], {"op": b["op"]})


@metric("data.bottleneck_output_usage", unit="ratio", needs=["data_ops.output_queue_usage"])
def bottleneck_output_usage(p: Profile) -> Value:
    """Mean usage of ``data.bottleneck_op``'s own output queue (0..1 of its
    capacity; the fullest, where several sources are named)."""
    b = _bottleneck(p)
    return Value(b["output_usage"], {"op": b["op"]})


@metric("data.bottleneck_is_source", unit="bool", needs=["data_ops.output_queue_usage"])
def bottleneck_is_source(p: Profile) -> Value:
    """Whether ``data.bottleneck_op`` is the pipeline's sources (the
    operations that read storage): every queue after them drains."""
    return Value(bool(_bottleneck(p)["sources"]))


@metric("data.bottleneck_cpu_per_worker", unit="%", needs=["data_ops.cpu_pct", "data_ops.workers"])
def bottleneck_cpu_per_worker(p: Profile) -> Value:
    """CPU use of ``data.bottleneck_op`` per worker, in percent of one core
    (MindSpore's MindData CPU sampling over its ``num_parallel_workers``;
    the largest of the ops when several are named). Near 100: each worker
    is busy computing, so more workers (on free cores) raise its output;
    low: the workers wait (storage, locks), and more of them help less."""
    b = _bottleneck(p)
    ops = p.table("data_ops")
    rows = ops[(ops["rank"] == b["rank"]) & ops["op_id"].isin(b["op_ids"])].dropna(subset=["cpu_pct", "workers"])
    rows = rows[rows["workers"] > 0]
    if rows.empty:
        raise NotEvaluated(f"no CPU sampling or worker count for {b['op']}")
    return Value(float((rows["cpu_pct"] / rows["workers"]).max()), {"op": b["op"]})


@metric("data.bottleneck_workers", unit="count", needs=["data_ops.workers"])
def bottleneck_workers(p: Profile) -> Value:
    """``num_parallel_workers`` of ``data.bottleneck_op``."""
    b = _bottleneck(p)
    if b["workers"] is None:
        raise NotEvaluated(f"{b['op']} has no worker count")
    return Value(b["workers"], {"op": b["op"]})


def _data_wait_ms(p: Profile) -> tuple[float, str]:
    """The mean data wait per step and its column: outside epoch ends
    (``data.batch_wait_ms``) where the loop's DataLoader time is measured,
    else the iteration interval."""
    for col in ("data_wait_us", "iteration_interval_us"):
        if p.has("steps", col):
            value = run_mean_ms(p, col)
            if value is not None:
                return (_outside_epoch_ends(p, value) if col == "data_wait_us" else value), col
    raise NotEvaluated("the profile measures no data wait per step")


@metric("data.suggested_workers", unit="count", needs=["steps.duration_us"])
def suggested_workers(p: Profile) -> Value:
    """Dataset workers to try: enough for the pipeline to deliver a batch in
    the time the device needs without waiting, with 2x headroom, rounded up
    to an even number. With w workers delivering one batch per step time T,
    of which W is data wait: need = w * T / (T - W), suggestion =
    even(ceil(2 * need)), at least w + 1. w is the bottleneck op's
    ``num_parallel_workers`` or, when unknown, 1. Workers that wait on
    storage or the network need no CPU of their own; workers that decode
    or augment do, and ``data.worker_cpus`` says how many this host gives
    them."""
    wait, source = _data_wait_ms(p)
    step = run_mean_ms(p, "duration_us")
    if step is None or not math.isfinite(step - wait):
        raise NotEvaluated("no finite step time and data wait")
    busy = step - wait
    if busy <= 0:
        raise NotEvaluated("data wait is not smaller than the step")
    try:
        workers = bottleneck_workers(p).value
    except NotEvaluated:
        workers = 1
    need = workers * step / busy
    suggestion = max(workers + 1, math.ceil(WORKER_HEADROOM * need))
    suggestion += suggestion % 2
    return Value(int(suggestion), {"current_workers": workers, "data_wait_from": source})


@metric("data.usable_cpus", unit="count", needs=[])
def usable_cpus(p: Profile) -> Value:
    """The CPUs the training process could run on (``meta.cpu.usable_cpus``,
    its affinity mask as ``advisor run`` records it), which it shares with
    its data-loader workers."""
    usable = p.meta.cpu.usable_cpus if p.meta.cpu is not None else None
    if not usable:
        raise NotEvaluated("the profile does not say which CPUs the process could use (recorded by advisor run)")
    return Value(int(usable))


@metric("data.worker_cpus", unit="count", needs=[])
def worker_cpus(p: Profile) -> Value:
    """CPUs left for data-loader worker processes: the CPUs the training
    process could run on (``meta.cpu.usable_cpus``, its affinity mask as
    ``advisor run`` records it) less the one the training loop keeps busy
    (0 on one CPU). Workers that build batches by CPU work (decoding,
    augmenting) beyond these only take CPUs from each other and from the
    loop."""
    usable = usable_cpus(p).value
    return Value(max(0, usable - 1), {"usable_cpus": usable})


@metric("data.workers_beyond_cpus", unit="bool", needs=["steps.duration_us"])
def workers_beyond_cpus(p: Profile) -> Value:
    """Whether the suggested dataset workers (``data.suggested_workers``)
    exceed the CPUs left for workers (``data.worker_cpus``): beyond those,
    more workers help only when they wait on storage or the network, not
    when building a batch is CPU work."""
    suggested, cpus = suggested_workers(p).value, worker_cpus(p).value
    return Value(bool(suggested > cpus), {"suggested_workers": suggested, "worker_cpus": cpus})


@metric("data.fetch_op_share", unit="ratio", needs=["steps.data_ops_us", "steps.data_wait_us"])
def fetch_op_share(p: Profile) -> Value:
    """Share of the DataLoader fetch time (``data_wait_us``) in which the
    fetching thread runs operators (``data_ops_us``), over the steady steps
    (``run_ratio``). Near 1 when the training process builds its batches
    with tensor operations (transforms, collate): CPU work. Low when the
    fetch waits (for worker processes, storage, the network) or runs Python
    the profiler does not record: the trace does not tell those apart."""
    share = run_ratio(p, "data_ops_us", "data_wait_us")
    if share is None:
        raise NotEvaluated("no steady step waits for data")
    return Value(share)


#: The PyTorch DataLoader iterators, as the profiler names their ``__next__``.
LOADER_KINDS = {"_MultiProcessingDataLoaderIter": "worker processes",
                "_SingleProcessDataLoaderIter": "the training process"}


@metric("data.loader_workers", unit="text", needs=["host_calls.cls"])
def loader_workers(p: Profile) -> Value:
    """Where a PyTorch DataLoader makes its batches: 'worker processes'
    (``num_workers`` above 0: ``_MultiProcessingDataLoaderIter``) or 'the
    training process' (``_SingleProcessDataLoaderIter``), from the
    ``enumerate(DataLoader)#...__next__`` spans (``host_calls`` class
    ``data_loader``); the first where a run has both."""
    calls = p.table("host_calls")
    names = calls.loc[calls["cls"] == "data_loader", "name"].astype(str).unique().tolist()
    for key, kind in LOADER_KINDS.items():
        if any(key in n for n in names):
            return Value(kind, {"spans": names[:4]})
    raise NotEvaluated("no PyTorch DataLoader span names which iterator it is")


@metric("data.op_queue_usage", unit="map", scope="op", needs=["data_ops.output_queue_usage"])
def op_queue_usage(p: Profile) -> Value:
    """Mean fill ratio (0..1) of each dataset-pipeline operator's output
    queue, keyed by op (type_id, e.g. MapOp_3), mean over ranks. Full queues
    before an op and empty ones after it mark the op that starves the pipeline."""
    ops = p.table("data_ops").dropna(subset=["output_queue_usage"])
    if "op_id" not in ops.columns:
        raise NotEvaluated("dataset ops have no pipeline ids")
    labels = pd.Series([_op_label({"name": name, "op_id": op_id})
                        for name, op_id in zip(ops["name"].tolist(), ops["op_id"].tolist())],
                       index=ops.index, dtype=object)
    usage = ops.groupby(labels, sort=False)["output_queue_usage"].mean()
    return Value({str(k): round(float(v), 4) for k, v in usage.items()})


# ---------------------------------------------------------------- epoch ends
#
# Where a pass over a PyTorch DataLoader (an epoch, or an evaluation's pass
# over its own loader) ends inside a profiled step (``steps.loader_*``,
# collectors/kineto/loader_passes.py): a step with a DataLoader call that
# returned no batch. Measured per rank over its steady steps, pooled over ranks.

_EPOCH_NEEDS = ["steps.loader_calls", "steps.loader_us", "steps.loader_end_us", "steps.loader_between_us",
                "steps.duration_us", "steps.step"]


def _epoch_ends(p: Profile) -> dict:
    return p.memo("epoch_ends", lambda: _find_epoch_ends(p))


def _find_epoch_ends(p: Profile) -> dict:
    """Per rank: its steady steps where a pass over a DataLoader ends (a
    call that ended one, ``steps.loader_end_us``), the others, and the
    steps between consecutive ends."""
    if not all(p.has("steps", need.partition(".")[2]) for need in _EPOCH_NEEDS):
        raise NotEvaluated("the steps table does not count DataLoader calls")
    steps = steady_steps(p).dropna(subset=["step", "loader_calls"])
    if steps.empty:
        raise NotEvaluated("no steady step records a DataLoader call")
    ends, others, gaps = [], [], []
    for _, own in steps.groupby("rank", sort=True):
        own = own.sort_values("step")
        end = own["loader_end_us"].notna()
        ends.append(own[end])
        others.append(own[~end])
        gaps.extend(np.diff(own.loc[end, "step"].to_numpy(float)).tolist())
    ended, rest = pd.concat(ends), pd.concat(others)
    if ended.empty:
        raise NotEvaluated("no pass over a DataLoader ends inside the profiled steps")
    if len(ended) * 2 > len(ended) + len(rest):
        raise NotEvaluated("a DataLoader call returns no batch in most steps: a loop that fetches its batch at the "
                           "end of the step, not passes that end")
    return {"ended": ended, "rest": rest, "gaps": gaps, "steady": len(ended) + len(rest)}


def epoch_end_keys(p: Profile) -> set[tuple[int, int]]:
    """(rank, step) of each steady step where a DataLoader epoch ends
    (``data.epoch_end_steps``); empty where none is told apart."""
    try:
        ended = _epoch_ends(p)["ended"]
    except NotEvaluated:
        return set()
    return {(int(r), int(s)) for r, s in zip(ended["rank"], ended["step"])}


@metric("data.epoch_end_steps", unit="list", scope="step", needs=_EPOCH_NEEDS)
def epoch_end_steps(p: Profile) -> Value:
    """Steady steps in which a pass over a PyTorch DataLoader ends: a
    DataLoader call that returned no batch (``steps.loader_end_us``: the
    loop ran next to no operator after it), as the call that ends a pass
    gets StopIteration."""
    e = _epoch_ends(p)
    return Value(sorted({int(s) for s in e["ended"]["step"]}), {"steady_steps": e["steady"]})


@metric("data.steps_per_epoch", unit="steps", needs=_EPOCH_NEEDS)
def steps_per_epoch(p: Profile) -> Value:
    """Steps from one epoch end to the next: the median distance between
    consecutive epoch-end steps of a rank (``data.epoch_end_steps``); needs
    two ends in the window."""
    gaps = _epoch_ends(p)["gaps"]
    if not gaps:
        raise NotEvaluated("one epoch end in the profiled steps: profile more steps to see how often they come")
    return Value(float(np.median(gaps)), {"distances": sorted(gaps)[:16]})


def _ended_median_ms(p: Profile, column: str) -> Value:
    ended = _epoch_ends(p)["ended"]
    values = ended[column].to_numpy(float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        raise NotEvaluated(f"no {column} in the epoch-end steps")
    return Value(float(np.median(values)) / US_PER_MS, {"epoch_ends": int(values.size)})


@metric("data.epoch_shutdown_ms", unit="ms", needs=_EPOCH_NEEDS)
def epoch_shutdown_ms(p: Profile) -> Value:
    """The DataLoader call that ends an epoch (``steps.loader_end_us``),
    median over epoch ends. It returns at once where the workers stay
    (``persistent_workers=True``) or there are none; with worker processes
    that do not stay, it shuts them down and waits for them to exit."""
    return _ended_median_ms(p, "loader_end_us")


@metric("data.epoch_between_ms", unit="ms", needs=_EPOCH_NEEDS)
def epoch_between_ms(p: Profile) -> Value:
    """Host time outside operators between the call that ends a pass and
    the next DataLoader call of its step (``steps.loader_between_us``; 0
    when none follows), median over pass ends: the next pass's start (new
    worker processes where they do not stay) and whatever the loop runs
    between passes."""
    return _ended_median_ms(p, "loader_between_us")


def _beyond_the_rest(p: Profile, column: str) -> np.ndarray:
    """Per epoch-end step, its ``column`` minus the median of its rank's
    other steady steps."""
    e = _epoch_ends(p)
    base = e["rest"].groupby("rank")[column].median()
    return e["ended"][column].to_numpy(float) - e["ended"]["rank"].map(base).to_numpy(float)


@metric("data.epoch_end_excess_ms", unit="ms", needs=_EPOCH_NEEDS)
def epoch_end_excess_ms(p: Profile) -> Value:
    """What an epoch end adds to its step: the epoch-end step's time minus
    the median of the rank's other steady steps, median over epoch ends."""
    excess = _beyond_the_rest(p, "duration_us")
    return Value(float(np.median(excess)) / US_PER_MS, {"epoch_ends": int(excess.size)})


@metric("data.epoch_restart_ms", unit="ms", needs=_EPOCH_NEEDS)
def epoch_restart_ms(p: Profile) -> Value:
    """Per step, what ending a pass and starting the next costs outside the
    first batch's wait: (``data.epoch_shutdown_ms`` +
    ``data.epoch_between_ms``) times the rate of pass ends --
    1 / ``data.steps_per_epoch`` where two or more ends give it, else the
    lowest rate consistent with k ends in n steady steps at
    ``anomaly.RECURRENCE_CONFIDENCE`` (as ``anomaly.step_outlier_recurring_ms``
    counts slow steps: one end in 5 steps supports 2.1%). With worker
    processes that do not stay, it is what keeping them
    (``persistent_workers=True``) saves; the first batch of a pass is
    waited for either way."""
    per_end = epoch_shutdown_ms(p).value + epoch_between_ms(p).value
    try:
        rate, basis = 1.0 / steps_per_epoch(p).value, "period"
    except NotEvaluated:
        e = _epoch_ends(p)
        k, n = len(e["ended"]), e["steady"]
        rate, basis = beta_quantile(1.0 - RECURRENCE_CONFIDENCE, k, n - k + 1), "lower bound"
    return Value(per_end * rate, {"per_epoch_end_ms": round(per_end, 3), "rate": round(rate, 4), "rate_from": basis})


@metric("data.epoch_wait_ms", unit="ms", needs=_EPOCH_NEEDS)
def epoch_wait_ms(p: Profile) -> Value:
    """The part of the mean data wait (``step.data_wait_ms``) that epoch
    ends add: the DataLoader time of the epoch-end steps beyond the median
    of the rank's other steps, summed and spread over the window's steady
    steps. Worker processes and prefetching do not shorten it: it is the
    ending of one epoch and the first batch of the next."""
    extra = _beyond_the_rest(p, "loader_us")
    return Value(max(float(np.nansum(extra)), 0.0) / _epoch_ends(p)["steady"] / US_PER_MS,
                 {"epoch_ends": int(extra.size)})


def _epoch_wait_or_none(p: Profile) -> float:
    try:
        return epoch_wait_ms(p).value
    except NotEvaluated:
        return 0.0


def _outside_epoch_ends(p: Profile, wait_ms: float) -> float:
    """A mean data wait per step less the part epoch ends add
    (``data.epoch_wait_ms``, 0 where none is told apart)."""
    return max(wait_ms - _epoch_wait_or_none(p), 0.0)


@metric("data.batch_wait_ms", unit="ms", needs=["steps.data_wait_us", "steps.duration_us"])
def batch_wait_ms(p: Profile) -> Value:
    """The mean data wait per step (``step.data_wait_ms``) outside epoch
    ends: less ``data.epoch_wait_ms``, the part more workers or prefetching
    do not shorten; all of it where no epoch end is told apart."""
    require_steady_window(p)
    wait = step_ms_value(p, "data_wait_us")
    return Value(_outside_epoch_ends(p, float(wait.value)),
                 {"data_wait_ms": wait.value, "epoch_wait_ms": _epoch_wait_or_none(p)},
                 stderr=wait.stderr, samples=wait.samples)


@metric("data.batch_wait_ratio", unit="ratio", needs=["steps.data_wait_us", "steps.duration_us"])
def batch_wait_ratio(p: Profile) -> Value:
    """``data.batch_wait_ms`` as a share of the mean step: the share of the
    step spent waiting for batches outside epoch ends."""
    step = run_mean_ms(p, "duration_us")
    if not step:
        raise NotEvaluated("no step time")
    return Value(batch_wait_ms(p).value / step)
