"""The run model of the scenario generator: what a generated run is.

``build(Spec)`` draws one synchronous data-parallel (optionally pipeline-
parallel) training run of N ranks and S steps as per-step, per-rank time
arrays, with at most one injected fault, and the labels that name it.

Timing model (all times us, per step ``s`` and rank ``r``):

* compute ``C`` = a per-run share of the step x rank factor (~0.4% sd) x
  step factor (~0.8% sd) x rank-step jitter (~0.6% sd);
* host/data time before the first kernel ``F`` (log-normal, ~4% of the
  step), with rare host hiccups (1% of rank-steps get +0.5..2% of the step);
* one gradient all-reduce per step: transfer ``T`` (20-35% of the step), of
  which ``O`` (80-95% of it, as in a tuned job) overlaps the end of
  compute, so a healthy run's exposed all-reduce stays under the 10% of
  the step at which the exposed-allreduce rule speaks;
* synchronous collectives: a rank reaches the all-reduce at
  ``arrive = F + C`` (``F + P`` with pipeline stages, ``P`` the pipeline
  time set by the slowest stage); every rank leaves it at
  ``max(arrive - O) + T``; the wait ``W = max(arrive - O) - (arrive - O)`` shows as
  communication on the ranks that were *not* slow. So Computing +
  Communication(Not Overlapped) + Free = the same step time on every rank,
  as in real ``step_trace_time.csv`` files;
* step 1 is a warm-up step (compute x2, +80% host time).

Faults (``FAULTS``), drawn severity given as a share of the step unless said:

* ``slow-rank``: one rank computes 6-30% of the step longer;
* ``data-starved``: every rank of one host waits 6-30% of the step longer
  for data (free time); ranks per host is 8, or ranks/2 below 16 ranks so
  a host is never the whole job;
* ``slow-link``: one point-to-point link (HCCS in a host or RDMA between
  hosts) reaches 15-45% of its peers' bandwidth (all its transfers); the
  all-reduce gets 15% longer on every rank;
* ``slow-nic``: the network port of one rank runs at 15-45% of its peers'
  bandwidth: both RDMA links of the ring through it (the one it sends on
  and the one it receives on); the all-reduce gets 15% longer on every rank;
* ``slow-stage``: pipeline parallel (pp=2 below 16 ranks, else 4); the ranks
  of one stage compute 6-30% of the step longer, the other stages wait in
  Receive (Bubble);
* ``stall``: every K-th step (K = 4 or 5) all ranks stall 25-80% of the
  step in host time (a synchronous checkpoint, say);
* ``small-packets``: the gradient all-reduce goes as ``SMALL_PACKET_BUCKETS``
  operators (per-layer collectives, no bucketing): every SDMA transfer is
  below 16 MB, and the all-reduce takes 5-20% longer (small messages are
  latency bound);
* ``rdma-retransmission``: in one step one rank's RDMA transfer of the
  all-reduce takes ``RETRANSMIT_MS`` (a retransmission timeout); every rank
  waits for it, so that step is as much longer (Ascend layouts write the
  transfer; Kineto traces show only the longer collective).
* ``exposed-allreduce``: the gradient all-reduce starts after all compute
  (``EXPOSED_OVERLAP`` of it overlapped) and its exposed part is 15-30% of
  the step on every rank.
* ``slow-link-type``: every HCCS link runs at 30-60% of its healthy
  bandwidth (a link type held back as a whole, not one link); the
  all-reduce gets 15% longer on every rank;
* ``bandwidth-contention``: the gradient all-reduce goes as
  ``CONTENTION_BUCKETS`` operators, ``CONTENTION_OVERLAP`` of its transfer
  overlapping compute; the operators that run beside compute move their
  bytes at 35-60% of the bandwidth of those that run alone (compute and the
  copy engines share the memory), and the all-reduce gets 15% longer.
* ``more-work``: one rank is given twice the work of the others (twice
  the sequences, an uneven split): it computes twice as long, running
  each step's kernels twice, each as long as on the other ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Order matters: a fault's index seeds its draws, so new kinds go last.
FAULTS = ("healthy", "slow-rank", "data-starved", "slow-link", "slow-stage", "stall", "slow-nic",
          "small-packets", "rdma-retransmission", "exposed-allreduce", "slow-link-type",
          "bandwidth-contention", "more-work")
#: ``exposed-allreduce``: share of the all-reduce compute overlaps (a job
#: that reduces every gradient in one all-reduce issued after backward;
#: what overlaps is the optimizer's first kernels and timestamp skew).
EXPOSED_OVERLAP = 0.04
#: Micro-batches per step of a pipeline of ``pp`` stages: at least
#: ``MICROBATCHES_PER_STAGE`` per stage (the usual 1F1B guidance, m >= 4p),
#: and never fewer than ``MICROBATCHES``; a healthy pipeline's bubble,
#: (p-1)/(m+p-1), then stays under a fifth of the step.
MICROBATCHES = 8
MICROBATCHES_PER_STAGE = 4
#: Operators the all-reduce is split into under ``small-packets``: 350 MB of
#: SDMA transfer in 64 parts of 5.5 MB each, below msprof-analyze's 16 MB.
SMALL_PACKET_BUCKETS = 64
#: Range of the retransmitted transfer's time (ms) under
#: ``rdma-retransmission``: above msprof-analyze's 4 s retransmission bound.
RETRANSMIT_MS = (4500.0, 6500.0)
#: Operators the all-reduce is split into under ``bandwidth-contention``
#: (43.75 MB each: large enough to reach a link's bandwidth), and the share
#: of its transfer that overlaps compute: the first buckets run beside
#: compute, the last alone after it.
CONTENTION_BUCKETS = 8
CONTENTION_OVERLAP = 0.6


@dataclass
class Spec:
    """What to generate. ``None`` fields are drawn from the seed."""

    ranks: int = 8
    steps: int = 20
    fault: str = "healthy"
    seed: int = 0
    ranks_per_host: int | None = None
    pp: int | None = None
    stall_every: int | None = None
    severity: float | None = None
    step_ms: float | None = None
    kernels_per_step: int = 24
    #: gradient buckets: the step's large all-reduce as this many operators
    #: (sizes and times split evenly), as a job with bucketed gradients or
    #: many layers' collectives writes them; 1 = one large all-reduce
    collectives: int = 1
    #: micro-batches per step of a pipeline (None: ``MICROBATCHES`` and at
    #: least ``MICROBATCHES_PER_STAGE`` per stage)
    microbatches: int | None = None

    def __post_init__(self):
        if self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r} (choose from {', '.join(FAULTS)})")
        if self.ranks < 1 or self.steps < 1 or self.collectives < 1:
            raise ValueError("ranks, steps and collectives must be >= 1")


@dataclass
class Link:
    """One directed point-to-point link of the all-reduce ring."""

    src: int
    dst: int
    transport: str
    local_src: int
    local_dst: int
    group: str
    factor: float  # bandwidth relative to a healthy link


@dataclass
class Scenario:
    """A drawn run: per-step arrays of shape (steps, ranks), in us."""

    spec: Spec
    ranks_per_host: int
    pp: int
    step_ids: np.ndarray
    start_us: np.ndarray  # (steps,) step start, common to all ranks
    computing: np.ndarray
    free: np.ndarray
    data_wait: np.ndarray  # host time before the first kernel (part of free)
    transfer: np.ndarray  # (steps,) all-reduce transfer time
    overlapped: np.ndarray
    wait: np.ndarray
    bubble: np.ndarray
    duration: np.ndarray
    links: list[Link]
    labels: dict = field(default_factory=dict)
    #: operators the step's large all-reduce is split into (``Spec.collectives``, or the small-packets fault's)
    buckets: int = 1
    #: (step index, rank) -> extra RDMA transfer time (ms) of a retransmission
    retransmit: dict = field(default_factory=dict)
    #: bandwidth of the transfers of operators that run beside compute,
    #: relative to those that run alone (``bandwidth-contention``; 1 = none)
    contention: float = 1.0
    #: rank -> how many times it runs each step's kernels (``more-work``; 1 for the others)
    work: dict = field(default_factory=dict)

    @property
    def communication(self) -> np.ndarray:
        return self.transfer[:, None] + self.wait + self.bubble

    @property
    def exposed(self) -> np.ndarray:
        return self.transfer[:, None] - self.overlapped + self.wait + self.bubble

    def stage_of(self, rank: int) -> int:
        return rank // (self.spec.ranks // self.pp)

    def group_ranks(self, rank: int) -> list[int]:
        """The data-parallel group of ``rank`` (its pipeline stage's ranks)."""
        per = self.spec.ranks // self.pp
        first = self.stage_of(rank) * per
        return list(range(first, first + per))


def _hosts(spec: Spec) -> int:
    if spec.ranks_per_host:
        return spec.ranks_per_host
    if spec.ranks >= 16:
        return 8
    return max(1, spec.ranks // 2)


def _pp(spec: Spec) -> int:
    if spec.pp:
        return spec.pp
    if spec.fault != "slow-stage":
        return 1
    return 2 if spec.ranks < 16 else 4


def build(spec: Spec) -> Scenario:
    """Draw the run described by ``spec`` (deterministic in ``spec.seed``)."""
    rng = np.random.default_rng([spec.seed, FAULTS.index(spec.fault), spec.ranks, spec.steps])
    S, R = spec.steps, spec.ranks
    rph = min(_hosts(spec), R)
    pp = _pp(spec)
    if R % pp:
        raise ValueError(f"ranks ({R}) must be a multiple of pp ({pp})")
    d0 = (spec.step_ms or rng.uniform(80.0, 200.0)) * 1000.0
    comp = rng.uniform(0.55, 0.70) * d0
    host = rng.uniform(0.02, 0.06) * d0
    t0 = rng.uniform(0.20, 0.35) * d0
    o0 = rng.uniform(0.8, 0.95) * t0  # a tuned job hides most of it: exposed 1-7% of the step

    computing = (comp * (1 + rng.normal(0, 0.004, R))[None, :] * (1 + rng.normal(0, 0.008, S))[:, None]
                 * (1 + rng.normal(0, 0.006, (S, R))))
    data_wait = host * rng.lognormal(0.0, 0.15, (S, R))
    hiccup = rng.random((S, R)) < 0.01
    data_wait = data_wait + hiccup * d0 * rng.uniform(0.005, 0.02, (S, R))
    transfer = t0 * (1 + rng.normal(0, 0.01, S))
    overlapped = o0 * (1 + rng.normal(0, 0.02, (S, R)))
    computing[0] *= 2.0
    data_wait[0] += 0.8 * d0

    labels: dict = {"fault": spec.fault, "ranks": [], "steps": [], "link": None}
    sev = spec.severity
    links = _ring_links(R, rph, pp, rng)
    reps: dict[int, int] = {}  # Scenario.work
    if spec.fault == "slow-rank":
        sev = sev if sev is not None else rng.uniform(0.06, 0.30)
        rank = int(rng.integers(R))
        computing[:, rank] += sev * d0
        labels["ranks"] = [rank]
    elif spec.fault == "data-starved":
        sev = sev if sev is not None else rng.uniform(0.06, 0.30)
        host_id = int(rng.integers(max(1, R // rph)))
        ranks = list(range(host_id * rph, min(R, (host_id + 1) * rph)))
        data_wait[:, ranks] += sev * d0 * (1 + rng.normal(0, 0.1, (S, len(ranks))))
        labels.update(ranks=ranks, host=host_id)
    elif spec.fault == "slow-link":
        sev = sev if sev is not None else rng.uniform(0.15, 0.45)
        candidates = [lk for lk in links if lk.transport != "LOCAL"]
        if candidates:
            bad = candidates[int(rng.integers(len(candidates)))]
            bad.factor *= sev
            transfer *= 1.15
            labels.update(link=f"{bad.src}-{bad.dst}", ranks=[bad.src, bad.dst],
                          transport=bad.transport)
    elif spec.fault == "slow-nic":
        sev = sev if sev is not None else rng.uniform(0.15, 0.45)
        through = sorted({end for lk in links if lk.transport == "RDMA" for end in (lk.src, lk.dst)})
        if through:
            rank = through[int(rng.integers(len(through)))]
            bad = [lk for lk in links if lk.transport == "RDMA" and rank in (lk.src, lk.dst)]
            for lk in bad:
                lk.factor *= sev
            transfer *= 1.15
            labels.update(ranks=[rank], nic=rank, transport="RDMA",
                          links=[f"{lk.src}-{lk.dst}" for lk in bad])
    elif spec.fault == "slow-stage":
        sev = sev if sev is not None else rng.uniform(0.06, 0.30)
        stage = int(rng.integers(pp))
        per = R // pp
        ranks = list(range(stage * per, (stage + 1) * per))
        computing[:, ranks] += sev * d0
        labels.update(ranks=ranks, stage=stage)
    elif spec.fault == "more-work":
        rank = int(rng.integers(R))
        reps[rank] = 2
        computing[:, rank] *= reps[rank]
        labels["ranks"] = [rank]
    elif spec.fault == "stall":
        sev = sev if sev is not None else rng.uniform(0.25, 0.80)
        every = spec.stall_every or int(rng.choice([4, 5]))
        steps = [s for s in range(2, S + 1) if s % every == 0]
        for s in steps:
            data_wait[s - 1] += sev * d0 * (1 + rng.normal(0, 0.05, R))
        labels.update(steps=steps, every=every)
    buckets, retransmit, contention = spec.collectives, {}, 1.0
    if spec.fault == "small-packets":
        sev = sev if sev is not None else rng.uniform(0.05, 0.20)
        buckets = SMALL_PACKET_BUCKETS
        transfer = transfer * (1 + sev)
        labels.update(buckets=buckets)
    elif spec.fault == "rdma-retransmission" and R // rph > 1:
        extra = float(rng.uniform(*RETRANSMIT_MS))
        j, rank = (1 + int(rng.integers(S - 1)) if S > 1 else 0), int(rng.integers(R))
        retransmit[(j, rank)] = extra
        transfer[j] += extra * 1000.0
        labels.update(ranks=[rank], steps=[j + 1], retransmit_ms=round(extra, 1))
    elif spec.fault == "slow-link-type":
        sev = sev if sev is not None else rng.uniform(0.30, 0.60)
        for lk in links:
            if lk.transport == "HCCS":
                lk.factor *= sev
        transfer = transfer * 1.15
        labels.update(ranks=list(range(R)), transport="HCCS")
    elif spec.fault == "bandwidth-contention":
        sev = sev if sev is not None else rng.uniform(0.35, 0.60)
        buckets, contention = CONTENTION_BUCKETS, sev
        transfer = transfer * 1.15
        overlapped = CONTENTION_OVERLAP * transfer[:, None] * (1 + rng.normal(0, 0.02, (S, R)))
        labels.update(ranks=list(range(R)), buckets=buckets)
    elif spec.fault == "exposed-allreduce":
        sev = sev if sev is not None else rng.uniform(0.15, 0.30)
        # exposed = t (1 - EXPOSED_OVERLAP) = sev of the step (compute + host + exposed)
        t_new = sev / (1 - sev) * (comp + host) / (1 - EXPOSED_OVERLAP)
        transfer *= t_new / t0
        overlapped *= EXPOSED_OVERLAP * t_new / o0
        labels.update(ranks=list(range(R)))
    overlapped = np.minimum(overlapped, computing * 0.9)
    overlapped = np.minimum(overlapped, transfer[:, None] * 0.95)

    if pp > 1:
        stage_c = computing.reshape(S, pp, R // pp).mean(axis=2)
        m = spec.microbatches or max(MICROBATCHES, MICROBATCHES_PER_STAGE * pp)
        pipe = stage_c.max(axis=1) * (m + pp - 1) / m
        work = np.repeat(pipe[:, None], R, axis=1)
        bubble = work - computing
    else:
        work = computing
        bubble = np.zeros((S, R))
    arrive = data_wait + work
    # The all-reduce starts `overlapped` before a rank's compute ends and
    # ends at the same moment on every rank: its wait fills the difference.
    comm_start = arrive - overlapped
    wait = comm_start.max(axis=1, keepdims=True) - comm_start
    tail = 300.0 * (1 + rng.random((S, 1)))
    free = data_wait + tail
    duration = computing + (transfer[:, None] - overlapped + wait + bubble) + free
    start = 1_736_413_971_000_000.0 + np.concatenate([[0.0], np.cumsum(duration[:, 0])[:-1]])
    labels.update(severity=None if sev is None else round(float(sev), 4), ranks_total=R,
                  steps_total=S, ranks_per_host=rph, pp=pp, seed=spec.seed,
                  step_ms=round(float(np.median(duration[1:, 0] if S > 1 else duration[:, 0])) / 1000, 3))
    return Scenario(spec=spec, ranks_per_host=rph, pp=pp, step_ids=np.arange(1, S + 1),
                    start_us=start, computing=computing, free=free, data_wait=data_wait,
                    transfer=transfer, overlapped=overlapped, wait=wait, bubble=bubble,
                    duration=duration, links=links, labels=labels, buckets=buckets, retransmit=retransmit,
                    contention=contention, work=reps)


def _ring_links(R: int, rph: int, pp: int, rng: np.random.Generator) -> list[Link]:
    """The all-reduce ring of each data-parallel group: HCCS between the
    ranks of a host (ring in the host), RDMA between hosts (same local
    index on the next host), LOCAL self-copies. Local ranks are indices in
    the group, as real per-rank communication matrices write them."""
    per = R // pp
    out = []
    for stage in range(pp):
        ranks = list(range(stage * per, (stage + 1) * per))
        group = f"dp_{stage}"
        for i, r in enumerate(ranks):
            out.append(Link(r, r, "LOCAL", i, i, group, 1.0))
            host = r // rph
            in_host = [x for x in ranks if x // rph == host]
            if len(in_host) > 1:
                nxt = in_host[(in_host.index(r) + 1) % len(in_host)]
                out.append(Link(r, nxt, "HCCS", i, ranks.index(nxt), group,
                                float(1 + rng.normal(0, 0.04))))
            nxt = r + rph
            if nxt not in ranks:
                nxt = ranks[0] + (r - ranks[0]) % rph if per > rph else None
            if nxt is not None and nxt != r and nxt // rph != host:
                out.append(Link(r, nxt, "RDMA", i, ranks.index(nxt), group,
                                float(1 + rng.normal(0, 0.04))))
    return out

