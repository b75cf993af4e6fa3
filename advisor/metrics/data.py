"""Input-pipeline metrics: device data queue and dataset-pipeline operators."""

from __future__ import annotations

import math

import pandas as pd

from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import run_mean_ms
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
    """The dataset op that starves the ones after it: the op with the
    largest drop in queue usage across it (its inputs' output queues full,
    its own empty) or, where every queue of a rank's pipeline drains, the
    sources (see ``SOURCES_DRAIN``)."""
    return p.memo("data_bottleneck", lambda: _find_bottleneck(p))


#: A pipeline whose fullest recorded queue is below this share of its
#: capacity drains everywhere: no op is held up by a full input, so the ops
#: that read from storage (the sources, which have no inputs) set its pace.
SOURCES_DRAIN = 0.5


def _ops_by_rank(ops: pd.DataFrame):
    """(rank, op_id, own output-queue usage, frame, position of the op's row
    in frame) of every dataset op, rank by rank in table order (an op id
    listed twice in a rank has the usage of its first row)."""
    ranked = ops[ops["rank"].notna()].sort_values("rank", kind="stable")
    if not ranked.duplicated(["rank", "op_id"]).any():
        # one row per (rank, op): the op's own usage is its row's
        yield from ((rank, op_id, own, ranked, pos) for pos, (rank, op_id, own) in enumerate(zip(
            ranked["rank"].tolist(), ranked["op_id"].tolist(), ranked["output_queue_usage"].tolist())))
        return
    for rank, group in ops.groupby("rank"):
        by_id = group.set_index("op_id")["output_queue_usage"]
        by_id = by_id[~by_id.index.duplicated()]
        for pos, op_id in enumerate(group["op_id"].tolist()):
            yield rank, op_id, by_id.get(op_id), group, pos


def _workers(op) -> int | None:
    return None if pd.isna(op.get("workers")) else int(op.get("workers"))


def _draining_sources(ops: pd.DataFrame) -> dict | None:
    """The sources of the rank whose whole pipeline drains most (fullest
    recorded queue below ``SOURCES_DRAIN``), or None when none drains."""
    best: dict | None = None
    for rank, group in ops.dropna(subset=["output_queue_usage"]).groupby("rank"):
        fullest = float(group["output_queue_usage"].max())
        if fullest >= SOURCES_DRAIN:
            continue
        parents = set(ops.loc[ops["rank"] == rank, "parent_id"].dropna().tolist())
        sources = group[~group["op_id"].isin(parents)]
        if sources.empty:
            continue
        drop = 1.0 - float(sources["output_queue_usage"].max())
        if best is None or drop > best["drop"]:
            workers = [w for w in (_workers(op) for _, op in sources.iterrows()) if w is not None]
            best = {
                "rank": int(rank),
                "op": ", ".join(_op_label(op) for _, op in sources.iterrows()),
                "drop": drop,
                "input_usage": 1.0,
                "output_usage": float(sources["output_queue_usage"].max()),
                "workers": min(workers) if workers else None,
                "sources": True,
            }
    return best


def _find_bottleneck(p: Profile) -> dict:
    ops = p.table("data_ops")
    if ops is None or not {"op_id", "output_queue_usage", "parent_id"} <= set(ops.columns):
        raise NotEvaluated("dataset ops have no queue usage or pipeline links")
    # per (rank, op): the usage of its fullest input queue (the ops whose parent it is)
    fed = ops.dropna(subset=["output_queue_usage"]).groupby(["rank", "parent_id"])["output_queue_usage"].min()
    fullest = dict(zip(fed.index.tolist(), fed.tolist()))
    best: dict | None = None
    for rank, op_id, own, frame, pos in _ops_by_rank(ops):
        inputs_min = fullest.get((rank, op_id))
        if inputs_min is None:
            continue
        if own is None or pd.isna(own):
            continue
        drop = float(inputs_min - own)
        if best is None or drop > best["drop"]:
            op = frame.iloc[pos]
            best = {
                "rank": int(rank),
                "op": _op_label(op),
                "drop": drop,
                "input_usage": float(inputs_min),
                "output_usage": float(own),
                "workers": _workers(op),
            }
    sources = _draining_sources(ops)
    if sources is not None and (best is None or sources["drop"] > best["drop"]):
        best = sources
    if best is None:
        raise NotEvaluated("no dataset op with both input and output queue usage")
    return best


@metric("data.bottleneck_op", unit="text", needs=["data_ops.output_queue_usage"])
def bottleneck_op(p: Profile) -> Value:
    """The dataset-pipeline operator that starves the ones after it: the op
    with the largest drop from its inputs' output-queue usage (the fullest
    input) to its own output-queue usage; or, when a rank's whole pipeline
    drains, its sources (input usage 1: storage is always ready). Named as
    type_id, e.g. MapOp_3 (sources joined by commas)."""
    b = _bottleneck(p)
    return Value(b["op"], b)


@metric("data.bottleneck_usage_drop", unit="ratio", needs=["data_ops.output_queue_usage"])
def bottleneck_usage_drop(p: Profile) -> Value:
    """Queue-usage drop across ``data.bottleneck_op``: min usage of its input
    queues minus usage of its output queue (0..1; 1 = full before, empty after)."""
    b = _bottleneck(p)
    return Value(b["drop"], {"op": b["op"]})


@metric("data.bottleneck_workers", unit="count", needs=["data_ops.workers"])
def bottleneck_workers(p: Profile) -> Value:
    """``num_parallel_workers`` of ``data.bottleneck_op``."""
    b = _bottleneck(p)
    if b["workers"] is None:
        raise NotEvaluated(f"{b['op']} has no worker count")
    return Value(b["workers"], {"op": b["op"]})


def _data_wait_ms(p: Profile) -> tuple[float, str]:
    for col in ("data_wait_us", "iteration_interval_us"):
        if p.has("steps", col):
            value = run_mean_ms(p, col)
            if value is not None:
                return value, col
    raise NotEvaluated("the profile measures no data wait per step")


@metric("data.suggested_workers", unit="count", needs=["steps.duration_us"])
def suggested_workers(p: Profile) -> Value:
    """Dataset workers to try: enough for the pipeline to deliver a batch in
    the time the device needs without waiting, with 2x headroom, rounded up
    to an even number. With w workers delivering one batch per step time T,
    of which W is data wait: need = w * T / (T - W), suggestion =
    even(ceil(2 * need)), at least w + 1. w is the bottleneck op's
    ``num_parallel_workers`` or, when unknown, 1."""
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
