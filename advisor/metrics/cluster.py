"""Cross-rank metrics: which rank is slow, in which step component, which
link is slow, and which rank the others wait for in collectives.

Spread statistics (per component, over per-rank *medians* of steady steps,
so that one stalled step on a busy host does not make a rank "slow"; a
straggler is slow in every step and keeps its excess in the median):
``excess`` = max(rank value) - median(rank values), in ms and as a share of
the step; the robust z-score of the worst rank is 0.6745 * (x - median) / MAD
(Iglewicz and Hoaglin; above 3.5 is a clear outlier, below it the spread is
broad rather than one rank standing out).

Small clusters (fewer than ``SMALL_CLUSTER`` ranks) have no spread across
ranks to speak of: with two ranks the median sits halfway between them
(the excess would be half the gap) and the robust z of the slower one is
always 0.6745, whatever the gap. There the worst rank (largest per-rank
median) is measured by the *paired gap*: per steady step that every rank
recorded, its value minus the median of the other ranks' (two ranks: minus
the other rank's), and the median over those steps. What noise looks like
is then the scatter of that gap across steps: its robust z is 0.6745 *
median / MAD of the per-step gaps, and a gap that does not stand out from
it (z < ``OUTLIER_Z``) counts as no excess: a straggler is late by about
the same in every step, a rank slowed now and then by its shared host is
not. On a 2-core host under load 5-8, 2-rank gloo runs with a rank
sleeping 30 ms per step gave z 3.9-220 (10 runs), balanced runs below 3
in 29 of 30 (one run kept one rank 6-12 ms late in each of its 4 steps:
4.5). Fewer than ``MIN_SCATTER_STEPS`` common steps show no scatter: the
excess is then the paired gap, with no z; without common steps, the worst
median minus the median of the others' medians, with no z. A gap in
operator time (``WORK_COMPONENTS``) also counts, whatever its z, when the
profile records each rank's work (``flops``) and the worst rank executes
at least ``MORE_WORK`` times the others' median: a rank given more work
is late for that reason in every step, however much the host's load
scatters its lateness. (Two gloo ranks, one given 2x and 4x the batch:
z 1.3-3.1 in three runs at load 5-8, slower in every step.)
Likewise a gap in free time counts, whatever its z, as far as the worst
rank's *recurring* free time (``step.recurring_free_ms``: per place in the
step, the median over steps) exceeds the others' at one site of the step
(``_own_host_us``): host code that rank alone runs at the same place in
every step (a checkpoint or a log written by rank 0 only), where the time
a process waits for a CPU on a busy host lands at random places and keeps
no median at any, and a core that runs the rank's Python slower adds a
little at every place. The counted excess is the smaller of the paired gap
and that site's excess, the part of the gap the rank's own code accounts
for. (Two gloo ranks, rank 0 saving a
2.2 MB checkpoint every step: paired gap z 0.3-1.4 in three runs at load
3-6, recurring free 4.5-9.6 ms on rank 0 against 1.4-1.7 ms on rank 1;
balanced ranks differ by at most 0.4 ms.)

Slow ranks come in groups when their cause is shared: every rank of a host
starved of data, or of a slow stage. The *slow group* of a component is
the ranks that are clear outliers (robust z >= ``OUTLIER_Z``) with at least
``GROUP_SHARE`` of the worst rank's excess; named by ``cluster.slow_ranks``
and, when they all sit on one host (``RunMeta.hosts``), ``cluster.slow_host``.
Where the worst rank is not a clear outlier the group is that rank alone,
and so on CPU-only traces, whose excess is corroborated per rank (below).

In synchronous training every rank waits at the next collective for the
slowest one, so the slow rank shows *more* time in the component that makes
it slow and *less* waiting at collectives; the others wait about its excess.
On CPU-only traces (components are host time, which includes OS
descheduling on a shared host) the excess is capped by that corroborating
wait, ``others_wait``: time nobody waits for does not hold the cluster back.
In operator time of a rank given more work (``MORE_WORK``, above) there is
no cap: the recorded FLOPs make it late by design, while the others' waits
scatter with the host's load (two gloo ranks, one given 4x the batch, with
three busy processes on the two cores: ``others_wait`` 0 in 1 of 5 runs).
In free time the cap is at least the rank's own recurring host code
(``cluster.slow_rank_own_host_ms``, measured at one site of the step, where
descheduling keeps no median, and net of the rank's pace: a rank whose
operators also run slower is on a slower or busier core, which stretches
its Python alike): four gloo ranks on two cores, one spinning
20 ms per step, are all starved of CPU, the others' waits scattered so
widely that ``others_wait`` came out 0 in one of three runs.

* Collectives matched across ranks (:func:`advisor.metrics.comm.peer_waits`,
  Kineto traces): per steady step, a rank's *lead* is the least peer wait
  of the other ranks minus its own (``exposed_wait_us``, else ``wait_us``,
  summed over the step's matched collectives): how long the runner-up
  waited for it, i.e. how much sooner the step's collectives could have
  completed had this rank alone been on time. A step counts the lead only
  when it is longer than the other ranks' *spread* (their most minus their
  least wait): the rank arrived alone after the others, not at the end of a
  scattered crowd. ``others_wait`` is the lower median over steps of the
  counted leads (0 for a step not counted): the hold-back that more than
  half of the steps reach, since a straggler is late in every step. Why:
  on a shared 2-core host running 4 gloo ranks (load 2-8), descheduling
  kept one rank late by a few ms for several steps in a row (free-time
  excess up to half the step), with another rank nearly as late or the
  others scattered as widely. Capped by the median rank's wait minus that
  rank's, its excess reached 39% of the step; by the runner-up's lead
  without the spread test, 21%; by ``others_wait``, 0 in 59 of 59 runs
  (the rule fires at 5%). A rank sleeping 30 ms per step kept 38-71% of
  the step (26 runs); 10 ms, about half the step, was found in 5 of 5
  runs, 5 ms in 2 of 5: a straggler smaller than the host's own scatter is
  not told apart from it. Two equally slow ranks do not hold the cluster
  back one at a time, so neither is corroborated.
* Otherwise: ``others_wait`` is the median rank's exposed communication
  (``exposed_comm_us``, per-rank medians) minus the slow rank's.

Pipeline stages run different layers, so their ranks are not expected to
take equal time: where the run has stages (``advisor.metrics.pipeline.
stage_of``), ranks are compared within their stage (MindInsight's cluster
guide: the stage time finds the slow stage, and inside a stage the slow
card) and the component's worst rank is the one with the largest excess in
its stage; the slow stage itself is ``pipeline.slowest_stage``. A rank
whose step is mostly pipeline Receive wait (``VICTIM_RECEIVE_SHARE``)
waits for another stage: a victim, never named slow.

Per collective (``cluster.late_rank``): where the profiler measured each
rank's wait inside its communication operators (``comm.wait_us``, Ascend:
the time an operator waits for its peers), per collective kind
(``COLLECTIVE_KINDS``: rendezvous of a whole group; a pipeline receive
waits for the previous stage by design) and group, and per rank, the
median over steady steps of the step's summed wait. The rank that waits
*least* arrives last: its *lead* is the median rank's wait minus its own,
the time the others wait for it there every step. It
is named when it stands out (robust z of its lead >= ``OUTLIER_Z``) by at
least ``LATE_MIN_SHARE`` of the median step, in a group of at least
``LATE_MIN_RANKS`` ranks; of several such collectives, the one with the
largest lead.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.collectors.vocab import size_classes
from advisor.metrics.comm import peer_waits
from advisor.metrics.ops import _compute_ops
from advisor.metrics.pipeline import stage_of
from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.step import recurring_free_by_place
from advisor.metrics.steps_view import (US_PER_MS, common_steady_steps, lower_median, per_rank_mean, per_rank_median,
                                        steady_steps, steps_per_rank)
from advisor.profile import Profile

#: Step components a rank can be slow in (the column, and what it means).
COMPONENTS = {
    "computing_us": "compute",
    "free_us": "free (host/data)",
    "data_wait_us": "data loading",
    "iteration_interval_us": "iteration interval (host/data)",
    "fp_bp_us": "forward/backward",
}
#: Below this many ranks there is no cluster to compare.
MIN_RANKS = 2
#: Below this many ranks the worst rank is measured against the others by the
#: paired gap (module doc): a median and MAD of 2 or 3 values cannot set
#: one of them apart (with 2 the robust z is always 0.6745).
SMALL_CLUSTER = 4
#: Robust z-score from which a rank is a clear outlier (Iglewicz and Hoaglin).
OUTLIER_Z = 3.5
#: Common steady steps a small cluster's paired gap needs for its scatter
#: (and a z-score) to mean anything: the MAD of two gaps is half their
#: difference, so two close steps would make any gap an outlier.
MIN_SCATTER_STEPS = 3
#: A rank executing at least this many times the FLOPs of the others'
#: median (``flops`` table) was given more work (module doc). Ranks running
#: the same program on equal shapes execute equal FLOPs, so the ratio of
#: balanced data-parallel ranks is 1 to the operator; 1.2 is also the
#: slow-rank rule's ``min_flops_ratio``, from which its message says the rank
#: was given more work.
MORE_WORK = 1.2
#: ``cluster.slow_rank_kernel_excess_ms`` compares per-call times over the
#: operators the slow rank shares with the ranks it is compared with; when
#: those hold less than this share of its kernel time, the two ran
#: different work (other shapes, other operators), which per-call times do
#: not compare.
MATCHED_SHARE = 0.5
#: ... and when under this share of its kernel time has recorded input
#: shapes, the rest (kernels known by name only) could hold its excess
#: unseen. Real torch_npu kernel files record shapes for 98-100% of compute
#: time.
SHAPED_SHARE = 0.9
#: The columns that make two ranks' operators the same kernel (as many as the table has).
KERNEL_KEYS = ("name", "type", "input_dtypes", "input_shapes")
#: Step components made of operator time, which grow with a rank's work.
WORK_COMPONENTS = ("computing_us", "fp_bp_us")
#: The step component of free time, whose recurring part (per place in the
#: step) is the loop's own host code (module doc).
FREE_COMPONENT = "free_us"
#: The slow rank's free-time excess is called its own host code
#: (``cluster.slow_rank_own_host_ms``) when at least this share of it
#: recurs at one site of every step: then most of it is the loop's code,
#: the rest CPU waits at random places.
OWN_HOST_SHARE = 0.5
#: Components that are part of another (the DataLoader's fetch is free time
#: of a CPU trace, and falls in MindSpore's iteration interval): the part
#: is named when its excess is at least ``PART_SHARE`` of the whole's, since
#: it says where the time goes and so what to fix.
PART_OF = {"data_wait_us": ("free_us", "iteration_interval_us")}
#: See ``PART_OF``: the part accounts for most of the whole's excess (the
#: rest is the host around it, e.g. the fetch's own Python).
PART_SHARE = 0.8
#: A rank joins the slow group with at least this share of the worst excess.
GROUP_SHARE = 0.5
#: A slow group up to half the ranks is set apart by a gap this many times
#: wider than the range inside it and inside the rest.
SPLIT_GAP = 2.0
#: Slow links: links are compared within (transport, size class); a size
#: class is a power of two in MB.
MIN_LINK_PEERS = 3
#: A link below this share of its peers' median bandwidth is slow (the
#: slow-link rule's default threshold); two or more slow links through one
#: rank point at that rank's port (``cluster.slow_link_rank``).
SLOW_LINK_RATIO = 0.5
#: Per-collective late rank (module doc): smallest group compared, and the
#: least lead named, as a share of the median step.
LATE_MIN_RANKS = 4
LATE_MIN_SHARE = 0.02
COLLECTIVE_KINDS = ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall")
#: A rank whose step is at least this share pipeline Receive wait spends
#: most of it waiting for another stage: a victim (module doc).
VICTIM_RECEIVE_SHARE = 0.5


def _robust_z(values: pd.Series, x: float) -> float:
    med = float(values.median())
    mad = float((values - med).abs().median())
    if mad == 0:
        return float("inf") if x > med else 0.0
    return 0.6745 * (x - med) / mad


def _slow_group(values: pd.Series, worst: int, worst_z: float) -> list[int]:
    """The slow group of one component (module doc), in rank order;
    ``worst_z`` is the worst rank's robust z-score."""
    med = float(values.median())
    excess = values - med
    if excess[worst] <= 0:
        return [worst]
    if worst_z < OUTLIER_Z:
        return _upper_cluster(values) or [worst]
    mad = float(excess.abs().median())
    z = np.inf if mad == 0 else 0.6745 * excess / mad
    members = (excess > 0) & (z >= OUTLIER_Z) & (excess >= GROUP_SHARE * excess[worst])
    return sorted(int(r) for r in values.index[members.to_numpy()])


def _upper_cluster(values: pd.Series) -> list[int] | None:
    """Up to half of the ranks, two or more, set apart from the rest by a gap
    wider than ``SPLIT_GAP`` times either side's own range: a slow group
    too large for the median to stand clear of it (one host of two)."""
    order = values.sort_values(kind="stable")
    v = order.to_numpy(dtype=float)
    k = np.arange((len(v) + 1) // 2, len(v) - 1)  # upper part v[k:], 2 .. n/2 ranks
    if not len(k):
        return None
    gaps = v[k] - v[k - 1]
    gaps[gaps <= SPLIT_GAP * np.maximum(v[k - 1] - v[0], v[-1] - v[k])] = np.nan
    if np.isnan(gaps).all():
        return None
    return sorted(int(r) for r in order.index[k[int(np.nanargmax(gaps))]:])


def _comparison_groups(p: Profile) -> list[list[int]]:
    """The sets of ranks compared with each other (module doc, pipeline
    stages): each pipeline stage's ranks where the run has stages, else
    all ranks."""
    steps = p.table("steps")
    ranks = sorted(int(r) for r in steps["rank"].dropna().unique())
    mapping, grouping = stage_of(p, ranks)
    if grouping != "stage":
        return [ranks]
    stages: dict[int, list[int]] = {}
    for rank in ranks:
        stages.setdefault(mapping[rank], []).append(rank)
    return list(stages.values())


def _victims(p: Profile) -> set[int]:
    """Ranks whose step is mostly pipeline Receive wait (median ``receive_us``
    at least ``VICTIM_RECEIVE_SHARE`` of the median step): they wait for
    another stage and are never named slow."""
    if not p.has("steps", "receive_us"):
        return set()
    receive = per_rank_median(p, "receive_us")
    step = per_rank_median(p, "duration_us").reindex(receive.index)
    return {int(r) for r in receive.index[(receive >= VICTIM_RECEIVE_SHARE * step).to_numpy()]}


def _candidates(p: Profile, values: pd.Series, members: list[int]) -> pd.Series:
    """``values`` of the ranks in ``members``, victims left out."""
    victims = p.memo("cluster.victims", lambda: _victims(p))
    keep = [r for r in members if r in values.index and r not in victims]
    return values.reindex(keep).dropna()


def _require_real_ranks(p: Profile) -> None:
    if p.meta.ranks_inferred:
        raise NotEvaluated("ranks were assigned to trace files without rank information; "
                           "they may be captures of one worker, so they are not compared")


def _component_spreads(p: Profile) -> list[dict]:
    _require_real_ranks(p)
    ranks = p.meta.ranks or sorted(p.table("steps")["rank"].unique())
    if len(ranks) < MIN_RANKS:
        raise NotEvaluated("a single rank: nothing to compare")
    step = per_rank_mean(p, "duration_us")
    if step.empty or step.median() <= 0:
        raise NotEvaluated("no step durations")
    out = []
    # CPU-only traces: the components are host time, which on a shared host
    # includes OS descheduling that peers do not wait for (see module doc).
    cpu = p.meta.device == "cpu"
    held = p.memo("cluster.held_back", lambda: _held_back(p)) if cpu else None
    waits = per_rank_median(p, "exposed_comm_us") if cpu and held is None else pd.Series(dtype=float)
    groups = _comparison_groups(p)
    for column, label in COMPONENTS.items():
        entries = []
        for members in groups:
            values = _candidates(p, per_rank_median(p, column), members)
            if len(values) < MIN_RANKS:
                continue
            waits_here = waits.reindex(values.index).dropna() if len(waits) else waits
            worst = int(values.idxmax())
            extra = {}
            own_host = _own_host_us(p, worst, values.index) if column == FREE_COMPONENT else None
            more_work = column in WORK_COMPONENTS and (_work_ratio(p, worst, values.index) or 0) >= MORE_WORK
            if len(values) < SMALL_CLUSTER:
                excess, extra = _paired_gap(p, column, values, worst, more_work, own_host)
                zscore = extra.pop("zscore")
            else:
                excess = float(values.max() - values.median())
                zscore = _robust_z(values, float(values.max()))
            saved = None
            if held is not None and worst in held.index:
                saved, source = float(held[worst]), "matched collectives: lead over the runner-up"
            elif len(waits_here) == len(values) and worst in waits_here.index:
                # in a small cluster against the other ranks (the median of two is halfway)
                base = (waits_here.drop(worst).median() if len(values) < SMALL_CLUSTER
                        else waits_here.median())
                saved = max(float(base - waits_here[worst]), 0.0)
                source = "exposed communication: median rank minus this rank"
            if saved is not None:
                # Corroboration (module doc): excess the others do not wait for
                # (a rank descheduled between two of its own ops, made up before
                # the collective, or late among scattered peers) holds nobody back.
                extra |= {"component_excess_ms": round(excess / US_PER_MS, 6),  # as metric values: never under the excess
                          "others_wait_ms": round(saved / US_PER_MS, 3), "others_wait_from": source}
                # the rank's own recurring host code is no descheduling either, nor more work (module doc)
                if not more_work:
                    excess = min(excess, max(saved, own_host or 0.0))
            if own_host is not None:
                extra["own_host_ms"] = round(own_host / US_PER_MS, 6)
            small = len(values) < SMALL_CLUSTER
            group = [worst] if saved is not None or small else _slow_group(values, worst, zscore)
            if len(group) > 1:
                # a group: measured against the ranks outside it (the median may sit inside it)
                rest = values.drop(group)
                excess = float(values.max() - rest.median())
                zscore = _robust_z(rest, float(values.max()))
            entries.append(
                {
                    **extra,
                    "component": label,
                    "column": column,
                    "rank": worst,
                    "group": group,
                    "excess_ms": excess / US_PER_MS,
                    "excess_ratio": excess / float(step.median()),
                    "zscore": zscore,
                    "per_rank_ms": {int(k): round(float(v) / US_PER_MS, 3) for k, v in values.items()},
                }
            )
        if entries:
            out.append(max(entries, key=lambda e: e["excess_ms"]))
    if not out:
        raise NotEvaluated("no step component measured on two or more ranks")
    return out


def _own_host_us(p: Profile, rank: int, ranks) -> float | None:
    """Host code ``rank`` alone runs at one place of every step (module
    doc), in us: per *site* of the step (``step.recurring_free_ms``'s places
    less their occurrence number, so a loop's repeated gaps between the
    same two operators are one site), its recurring free time minus the
    median of the other ``ranks``' scaled by its pace, the largest over
    sites, at least 0; None where the recurring free time is not evaluated
    on all of them.

    One site: code of the rank's own (a checkpoint, a log, an evaluation,
    a spin) is inserted at one place of the loop and its time recurs there,
    while a rank whose Python the host slows (a busier core) pays a little
    more at every place. Four balanced gloo ranks on two cores beside three
    busy processes: one rank's recurring free time exceeded the others' by
    0.9-1.0 ms (7% of the step) in 2 of 16 runs, spread over 46 of some 49
    places, the largest 0.31-0.33 ms; rank 0 saving a checkpoint every step
    (two ranks): 4.6-9.4 ms, 91-97% of it at one place.

    The pace is its operator time (``computing_us``, per-rank medians) over
    the others' median, when above 1: a rank on a busier or slower core
    runs its operators and the Python between them slower alike (two
    healthy gloo ranks: rank 1 computing 1.58 times as long as rank 0 had
    1.40 times its recurring free time, 6% of the step), while code of its
    own adds free time alone."""
    try:
        places = p.memo("cluster.recurring_sites", lambda: _by_site(recurring_free_by_place(p)))
    except NotEvaluated:
        return None
    others = [r for r in ranks if r != rank]
    if rank not in places.columns or not others or not set(others) <= set(places.columns):
        return None
    excess = places[rank] - _pace(p, rank, others) * places[others].median(axis=1)
    return max(float(excess.max()), 0.0) if len(excess) else 0.0


#: The occurrence number that ends a place of the step (``'a > b #3'``).
_OCCURRENCE = r" #\d+$"


def _by_site(places: pd.DataFrame) -> pd.DataFrame:
    """Recurring free time per place and rank summed per site: the place
    without its occurrence number."""
    return places.groupby(places.index.str.replace(_OCCURRENCE, "", regex=True)).sum()


def _pace(p: Profile, rank: int, others) -> float:
    """``rank``'s operator time over the median of ``others``' (per-rank
    medians of ``computing_us``), at least 1; 1 where it is not recorded."""
    if not p.has("steps", "computing_us"):
        return 1.0
    computing = per_rank_median(p, "computing_us")
    base = computing.reindex(others).dropna()
    if rank not in computing.index or len(base) != len(others) or not base.median() > 0:
        return 1.0
    return max(float(computing[rank] / base.median()), 1.0)


def _paired_gap(p: Profile, column: str, values: pd.Series, worst: int,
                more_work: bool = False, own_host: float | None = None) -> tuple[float, dict]:
    """The worst rank's excess in a small cluster (module doc): the median
    over common steady steps of its value minus the median of the others';
    the difference of per-rank medians without common steps. It counts
    only when it stands out from its scatter across steps (robust z >=
    ``OUTLIER_Z``), when there are ``MIN_SCATTER_STEPS`` steps to judge
    that from, or when the rank was given ``more_work``; otherwise up to
    ``own_host`` (us), the part of it the rank's own recurring host code
    accounts for. Evidence: ``steps_slower`` ("k of n" steps in which it
    exceeded the others)."""
    steps = steady_steps(p)
    others = values.index[values.index != worst]
    if "step" in steps.columns and column in steps.columns:
        table = steps.dropna(subset=["step", column]).pivot_table(
            index="step", columns="rank", values=column, aggfunc="mean").dropna()
        if not table.empty and set(values.index) <= set(table.columns):
            gap = table[worst] - table[list(others)].median(axis=1)
            median = float(gap.median())
            mad = float((gap - median).abs().median())
            z = (float("nan") if len(gap) < MIN_SCATTER_STEPS else 0.0 if median <= 0
                 else float("inf") if mad == 0 else 0.6745 * median / mad)
            evidence = {"paired_gap": "per step, minus the other ranks' median",
                        "paired_gap_ms": round(max(median, 0.0) / US_PER_MS, 3),
                        "steps_slower": f"{int((gap > 0).sum())} of {len(gap)}",
                        "step_share": float((gap > 0).mean()), "zscore": z}
            if more_work:
                evidence["counted_for"] = f"more work: at least {MORE_WORK} times the others' FLOPs"
            gap = max(median, 0.0)
            # a NaN z (too few steps) is not below OUTLIER_Z: the gap stands
            if z < OUTLIER_Z and not more_work:
                gap = min(gap, own_host or 0.0)
                if gap > 0:
                    evidence["counted_for"] = "the rank's own host code: recurring free time over the others'"
            return gap, evidence
    return float(max(values[worst] - values[others].median(), 0.0)), {
        "paired_gap": "per-rank medians: minus the other ranks' median", "zscore": float("nan")}


def _held_back(p: Profile) -> pd.Series | None:
    """``others_wait`` per rank from collectives matched across ranks (see
    module doc: lower median over steady steps of the lead counted when it
    exceeds the other ranks' spread), in us; None when the profile has no
    matched collectives in a steady step that every rank recorded."""
    waits = peer_waits(p)
    steps = common_steady_steps(p)
    if waits is None or steps.empty:
        return None
    column = "exposed_wait_us" if "exposed_wait_us" in waits.columns else "wait_us"
    ranks = steps["rank"].nunique()
    # rows: steady steps; columns: ranks; NaN where a rank has no matched collective
    w = waits.groupby(["step", "rank"])[column].sum().unstack("rank")
    w = w.reindex(pd.Index(np.sort(steps["step"].unique()), name="step")).dropna()
    if w.empty or w.shape[1] != ranks or ranks < MIN_RANKS:
        return None
    # Per step, the least and most wait of the *other* ranks: the second
    # smallest / largest where the rank itself is the smallest / largest.
    x = w.to_numpy(dtype=float)
    order = np.sort(x, axis=1)
    lo = np.where(x == order[:, :1], order[:, 1:2], order[:, :1])
    hi = np.where(x == order[:, -1:], order[:, -2:-1], order[:, -1:])
    lead = lo - x
    # over steps: the lead more than half of them reach
    out = dict(zip(w.columns.astype(int), lower_median(np.where(lead > hi - lo, lead, 0.0), axis=0)))
    return pd.Series(out, dtype=float)


def _slowest(p: Profile) -> dict:
    """The component with the largest excess, or a part of it (``PART_OF``)
    with at least ``PART_SHARE`` of that excess."""
    spreads = p.memo("component_spreads", lambda: _component_spreads(p))
    best = max(spreads, key=lambda s: s["excess_ms"])
    for s in spreads:
        if (best["column"] in PART_OF.get(s["column"], ()) and s["rank"] == best["rank"]
                and s["excess_ms"] >= PART_SHARE * best["excess_ms"] > 0):
            return s
    return best


@metric("cluster.rank_count", unit="count", needs=["steps"])
def rank_count(p: Profile) -> Value:
    """Ranks with step data in this profile."""
    return Value(int(p.table("steps")["rank"].nunique()))


@metric("cluster.slow_rank", unit="rank", scope="rank", needs=["steps.duration_us"])
def slow_rank(p: Profile) -> Value:
    """The rank with the largest excess over the cluster median in any step
    component (compute, free, data loading, iteration interval, fp/bp),
    comparing each rank's median over its steady steps (a straggler is slow
    in every step; one stalled step is not a slow rank). With fewer than
    ``SMALL_CLUSTER`` ranks the excess is the paired gap over the other
    ranks (module doc)."""
    s = _slowest(p)
    evidence = {k: s[k] for k in ("component", "excess_ms", "zscore", "paired_gap", "paired_gap_ms", "steps_slower",
                                  "component_excess_ms", "others_wait_ms", "others_wait_from", "own_host_ms",
                                  "counted_for")
                if k in s and not (k == "zscore" and np.isnan(s[k]))}
    if len(s["per_rank_ms"]) <= 64:
        evidence["per_rank_ms"] = s["per_rank_ms"]
    return Value(s["rank"], evidence)


@metric("cluster.slow_ranks", unit="rank", scope="rank", needs=["steps.duration_us"])
def slow_ranks(p: Profile) -> Value:
    """The slow group of ``cluster.slow_component`` (module doc): the ranks
    that stand out with ``cluster.slow_rank``, itself included; that rank
    alone when it is not a clear outlier."""
    return Value(_slowest(p)["group"])


@metric("cluster.slow_host", unit="text", needs=["steps.duration_us"])
def slow_host(p: Profile) -> Value:
    """The host of every rank in ``cluster.slow_ranks`` when those are two or
    more and share one (the output must name hosts: worker folders or trace
    files named ``{host}_{pid}_...``); evidence: its ranks, slow and all."""
    group = _slowest(p)["group"]
    hosts = {p.meta.hosts.get(r) for r in group}
    if len(group) < 2 or len(hosts) != 1 or None in hosts:
        raise NotEvaluated("the slow ranks are one rank, on several hosts, or on hosts the output does not name")
    host = hosts.pop()
    return Value(host, {"slow_ranks_on_host": len(group),
                        "ranks_on_host": sum(1 for h in p.meta.hosts.values() if h == host)})


@metric("cluster.slow_component", unit="text", needs=["steps.duration_us"])
def slow_component(p: Profile) -> Value:
    """The step component in which ``cluster.slow_rank`` exceeds the median
    the most."""
    return Value(_slowest(p)["component"])


@metric("cluster.slow_rank_excess_ms", unit="ms", needs=["steps.duration_us"])
def slow_rank_excess_ms(p: Profile) -> Value:
    """How far the slow rank's component is above the cluster median, per
    step: the time every rank loses waiting for it at the next collective
    (on CPU-only traces at most the others' corroborating wait, module doc)."""
    return Value(_slowest(p)["excess_ms"])


@metric("cluster.slow_rank_excess_ratio", unit="ratio", needs=["steps.duration_us"])
def slow_rank_excess_ratio(p: Profile) -> Value:
    """``cluster.slow_rank_excess_ms`` as a share of the median step time."""
    return Value(_slowest(p)["excess_ratio"])


@metric("cluster.slow_rank_zscore", unit="z", needs=["steps.duration_us"])
def slow_rank_zscore(p: Profile) -> Value:
    """Robust z-score of the slow rank in its component (see module doc);
    above 3.5 one rank stands out, below it the spread is broad. With
    fewer than ``SMALL_CLUSTER`` ranks, that of its paired gap against the
    gap's scatter across steps; not evaluated with fewer than
    ``MIN_SCATTER_STEPS`` common steps."""
    z = _slowest(p)["zscore"]
    if np.isnan(z):
        raise NotEvaluated(f"fewer than {SMALL_CLUSTER} ranks and fewer than {MIN_SCATTER_STEPS} common "
                           "steps: no scatter to judge the paired gap against")
    return Value(min(z, 1e6))


@metric("cluster.slow_rank_step_share", unit="ratio", needs=["steps.duration_us", "steps.step"])
def slow_rank_step_share(p: Profile) -> Value:
    """In a cluster of fewer than ``SMALL_CLUSTER`` ranks, the share of the
    steady steps every rank recorded in which ``cluster.slow_rank`` exceeds
    the other ranks (their median) in ``cluster.slow_component``: a
    straggler is slower in every step, host noise moves between ranks."""
    share = _slowest(p).get("step_share")
    if share is None:
        raise NotEvaluated(f"only measured for fewer than {SMALL_CLUSTER} ranks with common step ids")
    return Value(round(share, 4))


@metric("cluster.slow_rank_own_host_ms", unit="ms", needs=["steps.duration_us", "free_gaps.gap_us"])
def slow_rank_own_host_ms(p: Profile) -> Value:
    """Where the slowest component is free time: how much more recurring free time
    (``step.recurring_free_ms``, the free time at the same places in every
    step) ``cluster.slow_rank`` has at one site of the step than the
    others' median scaled by its pace (``_own_host_us``), per step: host
    code that rank alone runs in every step (module doc). Not
    evaluated when it is under ``OWN_HOST_SHARE`` of
    ``cluster.slow_rank_excess_ms``: most of the excess is not its code."""
    s = _slowest(p)
    own = s.get("own_host_ms")
    if s["column"] != FREE_COMPONENT or own is None:
        raise NotEvaluated("only measured for free time, from the free gaps of each step")
    if not own > 0 or own < OWN_HOST_SHARE * s["excess_ms"]:
        raise NotEvaluated(f"under {OWN_HOST_SHARE:.0%} of the slow rank's excess recurs at one place "
                           "of every step: not its own host code")
    return Value(own)


@metric("cluster.slow_rank_flops_ratio", unit="ratio", needs=["steps.duration_us", "flops.mflops"])
def slow_rank_flops_ratio(p: Profile) -> Value:
    """FLOPs ``cluster.slow_rank`` executed (per step where the ``flops``
    rows name steps, else in the profiled window) over the median of the
    other ranks it was compared with (its stage in a pipeline run), from
    MindSpore's ``flops_summary`` or the shapes a PyTorch trace recorded
    (``collectors/kineto/work.py``): well above 1 means it was given more
    work (uneven split, longer sequences), near 1 that it is slower at the
    same work (device, host)."""
    s = _slowest(p)
    flops = _mflops(p)
    peers = [r for r in s["per_rank_ms"] if r != s["rank"]]
    ratio = _work_ratio(p, s["rank"], peers)
    if ratio is None:
        raise NotEvaluated("FLOPs not recorded for the slow rank and the ranks it is compared with")
    return Value(ratio, {"mflops": round(float(flops[s["rank"]]), 1),
                         "peers_median_mflops": round(float(flops.reindex(peers).dropna().median()), 1)})


def _mflops(p: Profile) -> pd.Series:
    """Per rank, the mean ``mflops`` of its ``flops`` rows (per step where
    the rows name steps, else the window); empty without the table."""
    if not p.has("flops", "mflops"):
        return pd.Series(dtype=float)
    return p.memo("cluster.mflops", lambda: p.table("flops").groupby("rank")["mflops"].mean())


def _work_ratio(p: Profile, rank: int, ranks) -> float | None:
    """``rank``'s FLOPs over the median of the other ``ranks``'; None where
    the profile does not record them for both."""
    flops = _mflops(p)
    others = flops.reindex([r for r in ranks if r != rank]).dropna()
    if rank not in flops.index or others.empty or others.median() <= 0:
        return None
    return float(flops[rank] / others.median())


@metric("cluster.slow_rank_kernel_excess_ms", unit="ms", needs=["steps.duration_us", "ops.total_us"])
def slow_rank_kernel_excess_ms(p: Profile) -> Value:
    """How much longer per step ``cluster.slow_rank``'s kernels ran than the
    same kernels (``KERNEL_KEYS``: operator, type, input dtypes and shapes)
    take on the ranks it is compared with whose kernels were read: over its
    operators that they ran too, its time minus its calls times their median
    time per call, divided by its steps. Close to ``cluster.slow_rank_excess_ms``
    in compute: its device runs the same work slower (clock, temperature,
    memory); close to 0: its kernels run at its peers' speed, and its excess
    is more or larger kernels. Only kernels with recorded input shapes are
    compared (a kernel name alone does not tell a larger problem from a
    slower call: Kineto traces record none), and they must hold at least
    ``SHAPED_SHARE`` of its kernel time; communication operators are
    left out (their time includes waiting for peers). Evidence: the share of
    its kernel time in such kernels its peers ran (at least
    ``MATCHED_SHARE``)."""
    c = _kernel_comparison(p)
    return Value(c["excess_ms"], {k: c[k] for k in ("rank", "matched_share", "peers_read")})


@metric("cluster.slow_rank_kernel_calls_ratio", unit="ratio", needs=["steps.duration_us", "ops.total_us"])
def slow_rank_kernel_calls_ratio(p: Profile) -> Value:
    """``cluster.slow_rank``'s kernel calls (those
    ``cluster.slow_rank_kernel_excess_ms`` compares) over the median of the
    ranks compared with it whose kernels were read: 1 where it runs the same
    program as they do; above 1 it runs more kernels (more micro-batches,
    layers or tokens); at 1 with an excess in compute, larger ones."""
    c = _kernel_comparison(p)
    return Value(c["calls_ratio"], {k: c[k] for k in ("rank", "peers_read")})


def _kernel_comparison(p: Profile) -> dict:
    """The slow rank's kernels beside its peers' (``cluster.slow_rank_kernel_excess_ms``);
    memoized."""
    return p.memo("cluster.kernel_comparison", lambda: _compare_kernels(p))


def _compare_kernels(p: Profile) -> dict:
    s = _slowest(p)
    rank = s["rank"]
    every = _compute_ops(p)
    if "input_shapes" not in every.columns:
        raise NotEvaluated("the profile does not record the kernels' input shapes: a kernel's time per call "
                           "on one rank cannot be compared with the same work on another")
    keys = [c for c in KERNEL_KEYS if c in every.columns]
    shaped = every["input_shapes"].astype("string").fillna("").str.strip() != ""
    ops = every[(every["count"] > 0) & shaped]
    own = ops[ops["rank"] == rank]
    peers = ops[ops["rank"].isin([r for r in s["per_rank_ms"] if r != rank])]
    mine = every["rank"] == rank
    own_total = float(every.loc[mine, "total_us"].sum())
    if own_total <= 0:
        raise NotEvaluated(f"the kernels of rank {rank} were not read (the kernel sample, --kernel-ranks)")
    shaped_share = float(every.loc[mine & shaped, "total_us"].sum()) / own_total
    if shaped_share < SHAPED_SHARE:
        raise NotEvaluated(f"only {shaped_share:.0%} of rank {rank}'s kernel time is in kernels with recorded input "
                           "shapes: the rest could hold its excess unseen")
    if peers.empty:
        raise NotEvaluated(f"the kernels of the ranks compared with rank {rank} were not read")
    per_call = (peers["total_us"] / peers["count"]).groupby(_kernel_key(peers, keys)).median()
    own_key = _kernel_key(own, keys)
    expected = own["count"].to_numpy(dtype=float) * per_call.reindex(own_key).to_numpy(dtype=float)
    matched = np.isfinite(expected)
    total = own["total_us"].to_numpy(dtype=float)
    share = float(total[matched].sum() / own_total)
    if share < MATCHED_SHARE:
        raise NotEvaluated(f"only {share:.0%} of rank {rank}'s kernel time is in kernels (operator and input shapes) "
                           "the ranks compared with it ran: different work, or shapes not recorded; not comparable "
                           "per call")
    steps = p.table("steps")
    n_steps = max(1, int((steps["rank"] == rank).sum()))
    calls = peers.groupby("rank")["count"].sum()
    return {"rank": rank, "matched_share": round(share, 3), "peers_read": int(calls.size),
            "excess_ms": float((total[matched] - expected[matched]).sum()) / n_steps / US_PER_MS,
            "calls_ratio": float(own["count"].sum() / calls.median())}


def _kernel_key(ops: pd.DataFrame, keys: list[str]) -> pd.Series:
    """One text per row naming its kernel by ``keys`` (missing values as "")."""
    key = ops[keys[0]].astype("string").fillna("")
    for c in keys[1:]:
        key = key + "\x1f" + ops[c].astype("string").fillna("")
    return key


@metric("cluster.compute_spread_ratio", unit="ratio", needs=["steps.computing_us"])
def compute_spread_ratio(p: Profile) -> Value:
    """(max - min) / median of per-rank compute time: how unequal the compute
    load is across ranks."""
    _require_real_ranks(p)
    values = per_rank_mean(p, "computing_us")
    if len(values) < MIN_RANKS or values.median() <= 0:
        raise NotEvaluated("compute time measured on fewer than two ranks")
    return Value(float((values.max() - values.min()) / values.median()))


@metric("cluster.waiting_rank", unit="rank", scope="rank", needs=["steps.exposed_comm_us"])
def waiting_rank(p: Profile) -> Value:
    """The rank with the most exposed communication: it arrives first at the
    collectives and waits for the others (the fastest rank, not the slowest)."""
    _require_real_ranks(p)
    values = per_rank_mean(p, "exposed_comm_us")
    if len(values) < MIN_RANKS:
        raise NotEvaluated("exposed communication measured on fewer than two ranks")
    return Value(
        int(values.idxmax()),
        {"per_rank_ms": {int(k): round(float(v) / US_PER_MS, 3) for k, v in values.items()}},
    )


def _late_collectives(p: Profile) -> list[dict]:
    """Per (kind, group) collective, its last-arriving rank when it stands
    out (module doc), largest lead first."""
    _require_real_ranks(p)
    comm = p.table("comm")
    steps = steady_steps(p)
    if comm is None or "wait_us" not in comm.columns or "step" not in comm.columns or "step" not in steps.columns:
        raise NotEvaluated("no per-step wait times of communication operators")
    step_ms = per_rank_mean(p, "duration_us").median() / US_PER_MS
    if not step_ms > 0:
        return []
    keys = ["kind", "group"] if "group" in comm.columns else ["kind"]
    steady = steps[["rank", "step"]].dropna().astype({"step": "int64"})
    rows = comm[comm["kind"].isin(COLLECTIVE_KINDS)].dropna(subset=["step", "wait_us"])
    rows = rows.astype({"step": "int64"}).merge(steady, on=["rank", "step"])
    per_step = rows.groupby([*keys, "rank", "step"], dropna=False)["wait_us"].sum()
    medians = per_step.groupby(level=[*keys, "rank"], dropna=False).median()
    out = []
    for key, waits in medians.groupby(level=list(range(len(keys))), dropna=False):
        waits = waits.droplevel(list(range(len(keys))))
        if len(waits) < LATE_MIN_RANKS:
            continue
        lead = float(waits.median() - waits.min())
        zscore = _robust_z(-waits, float(-waits.min()))
        if zscore < OUTLIER_Z or lead / US_PER_MS < LATE_MIN_SHARE * step_ms:
            continue
        key = key if isinstance(key, tuple) else (key,)
        out.append({"rank": int(waits.idxmin()), "kind": str(key[0]),
                    "group": None if len(key) < 2 or pd.isna(key[1]) else str(key[1]),
                    "lead_ms": round(lead / US_PER_MS, 3), "zscore": round(min(zscore, 1e6), 2)})
    return sorted(out, key=lambda c: -c["lead_ms"])


def _late_list(p: Profile) -> list[dict]:
    return p.memo("late_collectives", lambda: _late_collectives(p))


def _latest(p: Profile) -> dict:
    late = _late_list(p)
    if not late:
        raise NotEvaluated("no collective with a rank that arrives last by a clear margin")
    return late[0]


@metric("cluster.late_rank", unit="rank", scope="rank", needs=["comm.wait_us", "steps.duration_us"])
def late_rank(p: Profile) -> Value:
    """The rank that arrives last at a collective, by the largest lead
    (module doc: per collective); evidence: the collective's kind and
    group, the lead and its robust z, and the other collectives where a
    rank stands out."""
    late = _latest(p)
    others = _late_list(p)[1:8]
    return Value(late["rank"], {k: late[k] for k in ("kind", "group", "lead_ms", "zscore")} |
                 ({"also": others} if others else {}))


@metric("cluster.late_rank_lead_ms", unit="ms", needs=["comm.wait_us", "steps.duration_us"])
def late_rank_lead_ms(p: Profile) -> Value:
    """How long the other ranks wait, per step, for ``cluster.late_rank`` at
    its collective: the median rank's wait there minus its own."""
    return Value(_latest(p)["lead_ms"])


@metric("cluster.late_collective", unit="text", needs=["comm.wait_us", "steps.duration_us"])
def late_collective(p: Profile) -> Value:
    """The collective kind at which ``cluster.late_rank`` arrives last."""
    return Value(_latest(p)["kind"])


def _slow_links(p: Profile) -> list[dict]:
    return p.memo("slow_links", lambda: _rank_links(p))


def _rank_links(p: Profile, threshold: float = 1.0) -> list[dict]:
    """Links in (transport, size class) groups of MIN_LINK_PEERS or more,
    below ``threshold`` times their group's median bandwidth, worst first."""
    links = p.table("links")
    links = links[(links["bandwidth_gbps"] > 0) & (links["size_mb"] > 0)].copy()
    links = links[links["src"] != links["dst"]]
    if links.empty:
        raise NotEvaluated("no point-to-point links with traffic")
    if "size_class" not in links.columns:  # records not rolled up (``comm_rollup``)
        links["size_class"] = size_classes(links["size_mb"])[0]  # the sizes are positive here
    if "step" not in links.columns:
        links["step"] = np.nan  # no step ids: every link counts 0 steps
    agg = (
        links.groupby(["src", "dst", "transport", "size_class"])
        .agg(size_mb=("size_mb", "sum"), time_ms=("time_ms", "sum"), steps=("step", "nunique"))
        .reset_index()
    )
    agg["bandwidth_gbps"] = agg["size_mb"] / agg["time_ms"]
    groups = agg.groupby(["transport", "size_class"])["bandwidth_gbps"]
    agg["peers"] = groups.transform("size")
    agg["median"] = groups.transform("median")
    agg = agg[agg["peers"] >= MIN_LINK_PEERS]
    median = agg["median"].to_numpy(dtype=float)
    bandwidth = agg["bandwidth_gbps"].to_numpy(dtype=float)
    with np.errstate(all="ignore"):
        agg["ratio"] = np.where(median > 0, bandwidth / np.where(median > 0, median, 1.0), 1.0)
    # group by group (transport, then size class), each in src/dst order
    slow = agg[agg["ratio"] < threshold].sort_values(["transport", "size_class"], kind="stable")
    out = [
        {
            "link": f"{src}-{dst}",
            "src": src,
            "dst": dst,
            "transport": str(transport),
            "bandwidth_gbps": round(bw, 3),
            "peer_median_gbps": round(med, 3),
            "ratio": round(ratio, 4),
            "size_mb": size,
            "time_ms": time,
            "steps": steps,
        }
        for src, dst, transport, bw, med, ratio, size, time, steps in zip(
            slow["src"].astype("int64").tolist(), slow["dst"].astype("int64").tolist(),
            slow["transport"].tolist(), slow["bandwidth_gbps"].astype(float).tolist(),
            slow["median"].astype(float).tolist(), slow["ratio"].astype(float).tolist(),
            slow["size_mb"].astype(float).tolist(), slow["time_ms"].astype(float).tolist(),
            slow["steps"].astype("int64").tolist(),
        )
    ]
    if not out:
        raise NotEvaluated(f"no transport/size class with {MIN_LINK_PEERS} or more links")
    return sorted(out, key=lambda r: r["ratio"])


@metric("cluster.slowest_link", unit="text", scope="link", needs=["links.bandwidth_gbps"])
def slowest_link(p: Profile) -> Value:
    """The point-to-point link (src-dst) with the lowest bandwidth relative to
    the median of links of the same transport and size class."""
    worst = _slow_links(p)[0]
    return Value(worst["link"], worst)


@metric("cluster.slowest_link_ratio", unit="ratio", scope="link", needs=["links.bandwidth_gbps"])
def slowest_link_ratio(p: Profile) -> Value:
    """Bandwidth of ``cluster.slowest_link`` / median bandwidth of its peers
    (same transport and size class); 1 = as fast as its peers."""
    links = _slow_links(p)
    return Value(links[0]["ratio"], {"links_below_half": [lk["link"] for lk in _below_half(links)][:20]})


@metric("cluster.slowest_link_excess_ms", unit="ms", scope="link", needs=["links.bandwidth_gbps"])
def slowest_link_excess_ms(p: Profile) -> Value:
    """Per step, how much longer the transfers over ``cluster.slowest_link``
    take than the same bytes would at its peers' median bandwidth (each
    size class against its own peers, summed): what repairing the link
    saves each step at most. A ring waits for its slowest hop, so the whole
    job gains it where the collective is exposed, less where it overlaps
    computation. Needs the links' step ids."""
    links = _slow_links(p)
    entries = [e for e in links if e["link"] == links[0]["link"]]
    if not all(e["steps"] and e["peer_median_gbps"] > 0 for e in entries):
        raise NotEvaluated("the communication matrix gives no step ids for this link")
    per_step = [(e["time_ms"] - e["size_mb"] / e["peer_median_gbps"]) / e["steps"] for e in entries]
    return Value(round(max(0.0, sum(per_step)), 3), {"per_size_class_ms": [round(x, 3) for x in per_step]})


def _below_half(links: list[dict]) -> list[dict]:
    """The slow links (``SLOW_LINK_RATIO``), one entry per link, worst first."""
    seen: dict[str, dict] = {}
    for lk in links:
        if lk["ratio"] < SLOW_LINK_RATIO:
            seen.setdefault(lk["link"], lk)
    return list(seen.values())


@metric("cluster.slow_link_rank", unit="rank", scope="rank", needs=["links.bandwidth_gbps"])
def slow_link_rank(p: Profile) -> Value:
    """The rank at one end of every slow link (below ``SLOW_LINK_RATIO`` of
    its peers), when there are two or more: the fault is that rank's network
    port or NIC, not one cable. Evidence: the links, and the rank's host
    where the output names it."""
    slow = _below_half(_slow_links(p))
    if len(slow) < 2:
        raise NotEvaluated("fewer than two links below half their peers' bandwidth")
    common = set.intersection(*({lk["src"], lk["dst"]} for lk in slow))
    if len(common) != 1:
        raise NotEvaluated("the slow links do not all run through one rank")
    rank = common.pop()
    evidence = {"links": [lk["link"] for lk in slow][:20], "transports": sorted({lk["transport"] for lk in slow})}
    if rank in p.meta.hosts:
        evidence["host"] = p.meta.hosts[rank]
    return Value(int(rank), evidence)


@metric("cluster.slow_link_host", unit="text", needs=["links.bandwidth_gbps"])
def slow_link_host(p: Profile) -> Value:
    """The host of ``cluster.slow_link_rank``, where the output names hosts."""
    host = slow_link_rank(p).evidence.get("host")
    if host is None:
        raise NotEvaluated("the output does not name the host of that rank")
    return Value(host)


@metric("cluster.slowest_link_hosts", unit="text", scope="link", needs=["links.bandwidth_gbps"])
def slowest_link_hosts(p: Profile) -> Value:
    """The hosts at the ends of ``cluster.slowest_link`` ("a → b", or "a" for
    a link inside one host), where the output names hosts."""
    worst = _slow_links(p)[0]
    ends = [p.meta.hosts.get(worst["src"]), p.meta.hosts.get(worst["dst"])]
    if None in ends:
        raise NotEvaluated("the output does not name the hosts of that link's ranks")
    return Value(ends[0] if ends[0] == ends[1] else f"{ends[0]} \u2192 {ends[1]}")


@metric("cluster.slow_link_count", unit="count", needs=["links.bandwidth_gbps"])
def slow_link_count(p: Profile) -> Value:
    """Links below ``SLOW_LINK_RATIO`` of the median bandwidth of their peers
    (same transport and size class)."""
    return Value(len(_below_half(_slow_links(p))))


@metric("cluster.slowest_link_ranks", unit="list", scope="link", needs=["links.bandwidth_gbps"])
def slowest_link_ranks(p: Profile) -> Value:
    """The two ranks ``[src, dst]`` at the ends of ``cluster.slowest_link``."""
    worst = _slow_links(p)[0]
    return Value([worst["src"], worst["dst"]], {"transport": worst["transport"]})


@metric("cluster.component_spread", unit="map", scope="rank", needs=["steps.duration_us"])
def component_spread(p: Profile) -> Value:
    """Cross-rank spread of each step component: for compute, free time,
    data loading, iteration interval and forward/backward, the rank furthest
    above the median (``max_rank``), its excess over the median in ms and in
    % of the median step (``excess_ms``, ``excess_pct``), the robust z-score
    of that rank, and the lowest rank (``min_rank``)."""
    out = {}
    for s in p.memo("component_spreads", lambda: _component_spreads(p)):
        values = s["per_rank_ms"]
        out[s["component"]] = {
            "max_rank": s["rank"],
            "min_rank": min(values, key=values.get),
            "excess_ms": round(s["excess_ms"], 3),
            "excess_pct": round(100 * s["excess_ratio"], 2),
            "zscore": None if np.isnan(s["zscore"]) else round(min(s["zscore"], 1e6), 2),
        }
    return Value(out)


@metric("cluster.collective_straggler", unit="rank", scope="rank", needs=["comm.elapse_us"])
def collective_straggler(p: Profile) -> Value:
    """The rank the others wait for in collectives: in synchronous training
    a collective completes only when the last rank joins, so the straggler
    spends the *least* time in collectives and every other rank's collective
    time grows by its delay. Per rank, collective time per step is the sum
    of its collectives' elapsed time in each step (the whole window when
    steps are unknown), summarized by the median over steps; the straggler
    is the rank with the lowest value. Evidence: ``wait_ms``, how much longer
    the median rank spends in collectives per step (what the others lose
    waiting), the robust z-score 0.6745 * (median - min) / MAD (meaningful
    from 3 ranks on; above 3.5 one rank stands out), and per-rank ms.
    Not evaluated for a single rank, or when ranks were inferred from file
    order (they may be captures of one worker)."""
    if p.meta.ranks_inferred:
        raise NotEvaluated("ranks were assigned to trace files without rank information; "
                           "they may be captures of one worker, so they are not compared")
    comm = p.table("comm")
    comm = comm[comm["elapse_us"].notna()]
    if comm["rank"].nunique() < MIN_RANKS:
        raise NotEvaluated("collectives of a single rank: nothing to compare")
    if "step" in comm.columns and comm["step"].notna().any():
        comm = comm[comm["step"].notna()]
        per_step = comm.groupby(["rank", "step"])["elapse_us"].sum()
        per_rank = per_step.groupby(level="rank").median()
    else:
        per_rank = comm.groupby("rank")["elapse_us"].sum() / steps_per_rank(p).reindex(
            comm["rank"].unique()).fillna(1)
    median = float(per_rank.median())
    low = float(per_rank.min())
    mad = float((per_rank - median).abs().median())
    z = 0.6745 * (median - low) / mad if mad > 0 else (1e6 if median > low else 0.0)
    evidence = {
        "wait_ms": (median - low) / US_PER_MS,
        "zscore": min(z, 1e6),
        "ranks": int(len(per_rank)),
    }
    if len(per_rank) <= 64:
        evidence["per_rank_ms"] = {int(r): round(float(v) / US_PER_MS, 3) for r, v in per_rank.items()}
    return Value(int(per_rank.idxmin()), evidence)
