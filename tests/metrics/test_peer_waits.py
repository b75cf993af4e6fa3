"""Exposed all-reduce net of waiting for late peers (advisor/metrics/comm.py).

Tables here follow what the Kineto collector writes for a CPU (gloo) trace:
one comm row per collective span and rank with its ``start_us``,
``elapse_us`` and ``exposed_us`` (the part of the span not overlapped by
compute), and per step the rank's ``exposed_comm_us``. Every collective is
laid out on a timeline in milliseconds; the expected values are worked out
in the comments from that timeline.
"""

from __future__ import annotations

import pytest

from advisor.metrics.comm import peer_waits
from advisor.profile import Profile
from _profiles import cpu_profile, metrics_of

STEP_MS = 20.0
STEPS = 5  # the first is warm-up and dropped


def _profile(spans: dict[int, list[tuple]], *, source: str = "kineto", shift_ms: dict | None = None,
             front_ends: bool = False) -> Profile:
    """``spans[rank]`` lists ``(name, start_ms, end_ms)`` of one step's
    collectives, all exposed (nothing computes while they run, as after
    backward). Every step repeats the layout ``STEP_MS`` later; a rank's
    clock may be shifted by ``shift_ms[rank]``."""
    comm, steps = [], []
    for rank, layout in spans.items():
        shift = (shift_ms or {}).get(rank, 0.0)
        for step in range(STEPS):
            t0 = step * STEP_MS + shift
            exposed = 0.0
            for name, start, end in layout:
                exposed += end - start
                comm.append({"rank": rank, "name": name, "kind": "allreduce", "group": None,
                             "elapse_us": (end - start) * 1000, "start_us": (t0 + start) * 1000,
                             "step": step, "exposed_us": (end - start) * 1000})
                if front_ends:  # the enqueueing call on the training thread, 10 us
                    exposed += 0.01
                    comm.append({"rank": rank, "name": "c10d::allreduce_", "kind": "allreduce",
                                 "group": None, "elapse_us": 10.0, "start_us": (t0 + start) * 1000 - 20,
                                 "step": step, "exposed_us": 10.0})
            steps.append({"rank": rank, "step": step, "start_us": t0 * 1000,
                          "duration_us": STEP_MS * 1000, "communication_us": exposed * 1000,
                          "overlapped_us": 0.0, "exposed_comm_us": exposed * 1000,
                          "computing_us": (STEP_MS - exposed) * 1000})
    ranks = sorted(spans)
    return cpu_profile(comm, steps, ranks, source)


def _values(p: Profile) -> dict:
    return {k: m.value for k, m in metrics_of(p).items()}


# Two all-reduces after backward, different ranks late at each. Rank 1
# reaches the first at 7 ms, rank 0 at 10 ms; both finish at 11. Rank 1 then
# computes 2 ms more, so rank 0 waits at the second from 11 to 13; both
# finish at 14. Exposed: rank 0 1 + 3 = 4 ms, rank 1 4 + 1 = 5 ms. The
# gradient sync is the 1 ms each all-reduce takes once both ranks are there.
LATE_AT_DIFFERENT_COLLECTIVES = {
    0: [("gloo:all_reduce", 10.0, 11.0), ("gloo:all_reduce", 11.0, 14.0)],
    1: [("gloo:all_reduce", 7.0, 11.0), ("gloo:all_reduce", 13.0, 14.0)],
}


def test_waits_at_different_collectives_are_not_gradient_sync():
    p = _profile(LATE_AT_DIFFERENT_COLLECTIVES)
    v = _values(p)
    # rank 0: 4 - 2 (waits at the second); rank 1: 5 - 3 (at the first)
    assert v["comm.exposed_allreduce_ms"] == pytest.approx(2.0)
    assert v["comm.exposed_allreduce_ratio"] == pytest.approx(2.0 / STEP_MS)
    waits = peer_waits(p).groupby("rank")["wait_us"].sum() / STEPS / 1000
    assert waits.to_dict() == pytest.approx({0: 2.0, 1: 3.0})


def test_the_least_exposed_rank_alone_cannot_separate_them():
    # Ascend start times are per rank (not one clock): no matching, and the
    # least-exposed rank's 4 ms still holds rank 0's 2 ms wait.
    v = _values(_profile(LATE_AT_DIFFERENT_COLLECTIVES, source="ascend_pt"))
    assert v["comm.exposed_allreduce_ms"] == pytest.approx(4.0)


def test_clocks_that_disagree_are_not_matched():
    # rank 1's clock runs 1 s ahead: by the timestamps it would start every
    # all-reduce after rank 0 finished it, which cannot happen.
    p = _profile(LATE_AT_DIFFERENT_COLLECTIVES, shift_ms={1: 1000.0})
    assert peer_waits(p) is None
    assert _values(p)["comm.exposed_allreduce_ms"] == pytest.approx(4.0)


def test_front_end_calls_are_not_matched():
    # gloo traces hold the c10d:: call that enqueues the collective too; the
    # ranks meet in gloo's span, so only those are matched (their 10 us
    # exposure stays in the exposed time).
    p = _profile(LATE_AT_DIFFERENT_COLLECTIVES, front_ends=True)
    assert set(peer_waits(p)["name"]) == {"gloo:all_reduce"}
    assert _values(p)["comm.exposed_allreduce_ms"] == pytest.approx(2.02)


def test_unequal_counts_are_not_matched():
    # rank 1 runs one all-reduce more per step: which is which is unknown
    extra = {0: LATE_AT_DIFFERENT_COLLECTIVES[0],
             1: LATE_AT_DIFFERENT_COLLECTIVES[1] + [("gloo:all_reduce", 15.0, 15.5)]}
    assert peer_waits(_profile(extra)) is None


def test_collectives_in_flight_together_wait_once():
    # rank 0 starts two buckets at 0 and waits for rank 1, which starts both
    # at 5; both finish at 6. Rank 0 is exposed 0..6 once, its wait is 5 ms
    # (not 5 per bucket); rank 1 is exposed 5..6.
    together = {0: [("gloo:all_reduce", 0.0, 6.0), ("gloo:all_reduce", 0.0, 6.0)],
                1: [("gloo:all_reduce", 5.0, 6.0), ("gloo:all_reduce", 5.0, 6.0)]}
    p = _profile(together)
    for step_rows in p.steps.itertuples():  # the spans overlap: exposed once
        p.steps.loc[step_rows.Index, "exposed_comm_us"] = 6000.0 if step_rows.rank == 0 else 1000.0
    v = _values(p)
    assert v["comm.exposed_allreduce_ms"] == pytest.approx(1.0)
    per_step = peer_waits(p).groupby(["rank", "step"])["exposed_wait_us"].sum()
    assert per_step.loc[0].to_list() == pytest.approx([5000.0] * STEPS)
    assert per_step.loc[1].to_list() == pytest.approx([0.0] * STEPS)


def test_overlapped_waiting_is_not_taken_out():
    # DDP: rank 0's first bucket waits 0..8 for rank 1 while rank 0 still
    # computes backward until 9; then both finish at 10. Only 9..10 is
    # exposed on rank 0 and none of its wait is: nothing to take out.
    overlapped = {0: [("gloo:all_reduce", 0.0, 10.0)], 1: [("gloo:all_reduce", 8.0, 10.0)]}
    p = _profile(overlapped)
    p.comm.loc[p.comm["rank"] == 0, "exposed_us"] = 1000.0
    p.steps.loc[p.steps["rank"] == 0, "exposed_comm_us"] = 1000.0
    assert peer_waits(p)["exposed_wait_us"].sum() == 0.0
    assert _values(p)["comm.exposed_allreduce_ms"] == pytest.approx(1.0)
