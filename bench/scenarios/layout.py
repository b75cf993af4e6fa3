"""Where each kernel of a generated scenario sits in time (shared by the
Ascend and Kineto writers).

Per step on rank ``r``: host/data time first (no device work), then (with
pipeline stages) one Receive for the bubble, then the compute kernels back
to back, and the gradient all-reduce starting ``overlapped`` before the end
of compute and ending when the slowest rank's transfer ends. So the union
of compute kernels is ``computing``, the all-reduce is ``transfer + wait``,
and their overlap is ``overlapped``: the same numbers the step trace holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.scenarios.model import Scenario


@dataclass(frozen=True)
class OpTemplate:
    """A compute operator: names, core, inputs, and its share of compute."""

    name: str
    type: str
    core: str
    dtypes: str
    shapes: str
    share: float


@dataclass
class RankKernels:
    """Kernels of one rank, flat arrays over all steps (absolute us)."""

    step: np.ndarray
    template: np.ndarray  # index into the template list
    start: np.ndarray
    dur: np.ndarray
    ar_start: np.ndarray  # (steps,) all-reduce start
    ar_dur: np.ndarray
    recv_start: np.ndarray  # (steps,) Receive start (pipeline); dur = bubble
    recv_dur: np.ndarray


def layout(sc: Scenario, rank: int, templates: list[OpTemplate], per_step: int) -> RankKernels:
    """Kernel placement of ``rank`` (see module doc); ``per_step`` compute
    kernels per step (times the rank's ``Scenario.work``) cycle through
    ``templates`` in proportion to shares."""
    S = sc.spec.steps
    per_step *= sc.work.get(rank, 1)
    shares = np.array([t.share for t in templates])
    idx = np.arange(per_step) % len(templates)
    counts = np.bincount(idx, minlength=len(templates)).astype(float)
    weight = shares[idx] / counts[idx]
    weight = weight / weight.sum()
    rng = np.random.default_rng([sc.spec.seed, rank, 7])
    jitter = 1 + rng.normal(0, 0.02, (S, per_step))
    w = weight[None, :] * jitter
    w = w / w.sum(axis=1, keepdims=True)
    comp = sc.computing[:, rank]
    dur = w * comp[:, None]
    begin = sc.start_us + sc.data_wait[:, rank] + sc.bubble[:, rank]
    start = begin[:, None] + np.concatenate([np.zeros((S, 1)), np.cumsum(dur, axis=1)[:, :-1]], axis=1)
    comp_end = begin + comp
    ar_start = comp_end - sc.overlapped[:, rank]
    ar_dur = sc.transfer + sc.wait[:, rank]
    return RankKernels(
        step=np.repeat(sc.step_ids, per_step), template=np.tile(idx, S),
        start=start.ravel(), dur=dur.ravel(), ar_start=ar_start, ar_dur=ar_dur,
        recv_start=sc.start_us + sc.data_wait[:, rank], recv_dur=sc.bubble[:, rank],
    )
