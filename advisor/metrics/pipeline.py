"""Pipeline-parallel stage metrics (MindSpore Insight's cluster "pipeline
parallel" view; Ascend ``step_trace_time`` Stage / Bubble columns).

Per rank, means over steady steps (see ``steps_view``):

* stage time (``stage_us``): the step time minus the time of the Receive
  operators in it -- how long the rank's own stage works;
* pure receive time (``receive_us``): only point-to-point Receive operators
  run, no compute -- the stage waits for its neighbour; it shows how out of
  step the stages are;
* pure communication (``exposed_comm_us``): communication not overlapped by
  compute, with and without the Receive part;
* bubble share: ``bubble_us`` / step duration (``receive_us`` where the
  source has no Bubble column) -- the pipeline bubble.

Stages: where the profiler metadata lists every rank's pipeline-parallel
group (``RunMeta.stages``: a rank's stage is its place among the group's
ranks), those; else, with ``meta.parallel['pp'] = P`` > 1 and a known world
size ``W`` divisible by ``P``, rank ``r`` is in stage ``r // (W / P)``
(pipeline parallel is the outermost dimension in Megatron-LM and MindSpore's
default layouts, not in every rank order Megatron-LM offers). A stage's
values are the means of its ranks. Otherwise each rank is its own group,
and "stage" below means rank.
"""

from __future__ import annotations

import pandas as pd

from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import US_PER_MS, per_rank_mean
from advisor.profile import Profile

#: Below this many stages there is nothing to compare.
MIN_STAGES = 2


def stage_of(p: Profile, ranks: list[int]) -> tuple[dict[int, int], str]:
    """rank -> stage id, and "stage" or "rank" (how ranks were grouped)."""
    known = p.meta.stages
    if all(r in known for r in ranks) and len({known[r] for r in ranks}) >= MIN_STAGES:
        return {r: known[r] for r in ranks}, "stage"
    pp = p.meta.parallel.get("pp")
    world = p.meta.world_size
    if pp and pp > 1 and world and world % pp == 0 and all(0 <= r < world for r in ranks):
        per_stage = world // pp
        return {r: r // per_stage for r in ranks}, "stage"
    return {r: r for r in ranks}, "rank"


def _per_rank(p: Profile) -> pd.DataFrame:
    """Per-rank means (us) of the pipeline columns, one row per rank."""
    if p.meta.parallel.get("pp") == 1:
        raise NotEvaluated("pipeline parallel size is 1 (pp=1): no pipeline stages")
    cols = {}
    for column in ("stage_us", "duration_us", "receive_us", "bubble_us", "exposed_comm_us"):
        values = per_rank_mean(p, column)
        if not values.empty:
            cols[column] = values
    if "stage_us" not in cols or "duration_us" not in cols:
        raise NotEvaluated("no stage time in the steps table")
    df = pd.DataFrame(cols)
    wait = df["bubble_us"] if "bubble_us" in df else df.get("receive_us")
    if not p.meta.parallel.get("pp") and (wait is None or not (wait.fillna(0) > 0).any()):
        raise NotEvaluated("no pipeline layout (pp) in the metadata and no receive/bubble time: "
                           "not a pipeline-parallel run")
    df["bubble_ratio"] = (wait / df["duration_us"]) if wait is not None else float("nan")
    return df


def stage_table(p: Profile) -> tuple[pd.DataFrame, str]:
    """Per stage (or per rank): stage, receive, pure communication with and
    without receive (ms), bubble share and the ranks; plus the grouping."""
    ranks = _per_rank(p)
    mapping, grouping = stage_of(p, [int(r) for r in ranks.index])
    ranks = ranks.assign(stage=[mapping[int(r)] for r in ranks.index])
    ms = ranks.drop(columns=["stage", "bubble_ratio"]) / US_PER_MS
    ms["bubble_ratio"] = ranks["bubble_ratio"]
    ms["stage"] = ranks["stage"]
    if "exposed_comm_us" in ms and "receive_us" in ms:
        ms["comm_no_receive_us"] = ms["exposed_comm_us"] - ms["receive_us"].fillna(0)
    table = ms.groupby("stage").mean(numeric_only=True)
    table = table.rename(columns=lambda c: c.replace("_us", "_ms"))
    members = {s: sorted(int(r) for r in idx) for s, idx in ranks.groupby("stage").groups.items()}
    table["ranks"] = pd.Series(members, dtype=object)
    return table, grouping


def _stages(p: Profile) -> tuple[pd.DataFrame, str]:
    table, grouping = stage_table(p)
    if len(table) < MIN_STAGES:
        raise NotEvaluated(f"fewer than {MIN_STAGES} pipeline stages with step data")
    return table, grouping


def _evidence(table: pd.DataFrame, grouping: str) -> dict:
    rows = {}
    for stage, r in table.head(64).iterrows():
        rows[int(stage)] = {
            "stage_ms": round(float(r["stage_ms"]), 3),
            **({"receive_ms": round(float(r["receive_ms"]), 3)} if "receive_ms" in r and pd.notna(r["receive_ms"]) else {}),
            **({"pure_comm_ms": round(float(r["exposed_comm_ms"]), 3)} if "exposed_comm_ms" in r and pd.notna(r["exposed_comm_ms"]) else {}),
            **({"pure_comm_no_receive_ms": round(float(r["comm_no_receive_ms"]), 3)}
               if "comm_no_receive_ms" in r and pd.notna(r["comm_no_receive_ms"]) else {}),
            **({"bubble_ratio": round(float(r["bubble_ratio"]), 4)} if pd.notna(r["bubble_ratio"]) else {}),
            "ranks": r["ranks"][:16],
        }
    return {"grouped_by": grouping, "per_stage": rows}


@metric("pipeline.slowest_stage", unit="stage", scope="rank", needs=["steps.stage_us"])
def slowest_stage(p: Profile) -> Value:
    """The pipeline stage with the longest stage time (step time minus its
    Receive time, mean over the stage's ranks and steady steps). Ranks are
    grouped into stages by ``pp`` and the world size (stage = rank // (world
    / pp)); without that layout each rank is its own group and the value is
    a rank. The evidence lists, per stage, stage time, pure receive time,
    pure communication with and without receive, and bubble share."""
    table, grouping = _stages(p)
    return Value(int(table["stage_ms"].idxmax()), _evidence(table, grouping))


@metric("pipeline.slowest_stage_ranks", unit="list", scope="rank", needs=["steps.stage_us"])
def slowest_stage_ranks(p: Profile) -> Value:
    """The ranks of ``pipeline.slowest_stage``."""
    table, _ = _stages(p)
    return Value(table.loc[table["stage_ms"].idxmax(), "ranks"])


@metric("pipeline.grouped_by", unit="text", needs=["steps.stage_us"])
def grouped_by(p: Profile) -> Value:
    """How ranks were grouped into the stages the other ``pipeline``
    metrics compare: ``stage`` (a pipeline layout is known) or ``rank``
    (none is: each rank is its own group)."""
    _, grouping = _stages(p)
    return Value(grouping)


def _excess_ms(table: pd.DataFrame) -> float:
    """Stage time of the slowest stage minus the median of the *other*
    stages: with two stages the median of all sits halfway between them and
    gave half the gap."""
    stage = table["stage_ms"]
    return float(stage.max() - stage.drop(stage.idxmax()).median())


@metric("pipeline.slowest_stage_excess_ms", unit="ms", needs=["steps.stage_us"])
def slowest_stage_excess_ms(p: Profile) -> Value:
    """Stage time of ``pipeline.slowest_stage`` minus the median stage time
    of the other stages, per step: they wait about this long for it (as
    bubble)."""
    table, _ = _stages(p)
    return Value(_excess_ms(table))


@metric("pipeline.slowest_stage_excess_ratio", unit="ratio", needs=["steps.stage_us"])
def slowest_stage_excess_ratio(p: Profile) -> Value:
    """``pipeline.slowest_stage_excess_ms`` as a share of the median step time."""
    table, _ = _stages(p)
    step = float(table["duration_ms"].median())
    if step <= 0:
        raise NotEvaluated("no step durations")
    return Value(_excess_ms(table) / step)


@metric("pipeline.stage_spread_ratio", unit="ratio", needs=["steps.stage_us"])
def stage_spread_ratio(p: Profile) -> Value:
    """(max - min) / median of the per-stage stage times: how unequal the
    pipeline split is (0 = perfectly balanced stages)."""
    table, _ = _stages(p)
    median = float(table["stage_ms"].median())
    if median <= 0:
        raise NotEvaluated("stage times are zero")
    return Value(float((table["stage_ms"].max() - table["stage_ms"].min()) / median))


@metric("pipeline.bubble_ratio", unit="ratio", needs=["steps.stage_us"])
def bubble_ratio(p: Profile) -> Value:
    """Pipeline bubble share of the step: Bubble time (time in Receive
    operators waiting for the previous stage; the pure receive time where
    the source has no Bubble column) / step duration, mean over ranks."""
    ranks = _per_rank(p)
    values = ranks["bubble_ratio"].dropna()
    if values.empty:
        raise NotEvaluated("no bubble or receive time in the steps table")
    table, grouping = stage_table(p)
    return Value(float(values.mean()), _evidence(table, grouping))


@metric("pipeline.slowest_stage_flops_ratio", unit="ratio", needs=["steps.stage_us", "flops.mflops"])
def slowest_stage_flops_ratio(p: Profile) -> Value:
    """Floating-point work per rank of ``pipeline.slowest_stage`` over the
    median of the other stages' (each stage: the mean over its ranks of
    the FLOPs they executed in the profiled window, MindSpore's
    ``flops_summary``). Well above 1: the split gives that stage more work;
    near 1: its devices are slower at the same work. Evidence: per stage
    MFLOPs."""
    table, _ = _stages(p)
    flops = p.table("flops").groupby("rank")["mflops"].mean()
    per_stage = {int(s): float(flops.reindex(r).mean()) for s, r in table["ranks"].items()}
    slowest = int(table["stage_ms"].idxmax())
    others = pd.Series({s: v for s, v in per_stage.items() if s != slowest}).dropna()
    if pd.isna(per_stage[slowest]) or others.empty or others.median() <= 0:
        raise NotEvaluated("FLOPs not recorded for the slowest stage and another stage")
    return Value(per_stage[slowest] / float(others.median()),
                 {"mflops_per_stage": {s: round(v, 1) for s, v in per_stage.items() if v == v}})
