"""Slow rank on CPU traces, corroborated by collectives matched across ranks
(advisor/metrics/cluster.py, module doc).

Tables follow what the Kineto collector writes for a gloo trace on one host
(one clock): per rank and step, ``computing_us``, ``free_us`` (host time in
no op: a sleep, or the rank descheduled) and ``exposed_comm_us``; one
all-reduce per step in the comm table with its ``start_us``,
``elapse_us`` and ``exposed_us``. In every step all ranks start at the same
time, rank r reaches the all-reduce ``arrive[r]`` ms later, and all ranks
finish it 1 ms after the last one arrived; nothing overlaps it. A rank's
peer wait is then the last arrival minus its own. Expected values are
worked out in the comments from these arrivals.
"""

from __future__ import annotations

import pytest

from advisor.profile import Profile
from _profiles import cpu_profile, metrics_of

STEPS = 5  # the first is warm-up and dropped: 4 steady steps
STEP_MS = 60.0
SYNC_MS = 1.0  # the all-reduce once every rank is there


def _profile(arrive: dict[int, list[float]], free: dict[int, list[float]],
             compute: dict[int, list[float]] | None = None, source: str = "kineto") -> Profile:
    """``arrive[r][s]``, ``free[r][s]``, ``compute[r][s]`` in ms for rank r
    in steady step s (0..3); the warm-up step repeats steady step 0."""
    comm, steps = [], []
    ranks = sorted(arrive)
    for step in range(STEPS):
        s = max(step - 1, 0)
        t0 = step * STEP_MS
        end = max(arrive[r][s] for r in ranks) + SYNC_MS
        for r in ranks:
            exposed = end - arrive[r][s]
            comm.append({"rank": r, "name": "gloo:all_reduce", "kind": "allreduce", "group": None,
                         "step": step, "start_us": (t0 + arrive[r][s]) * 1000,
                         "elapse_us": exposed * 1000, "exposed_us": exposed * 1000})
            steps.append({"rank": r, "step": step, "start_us": t0 * 1000, "duration_us": end * 1000,
                          "computing_us": (compute[r][s] if compute else 2.0) * 1000,
                          "free_us": free[r][s] * 1000, "data_wait_us": 100.0,
                          "communication_us": exposed * 1000, "overlapped_us": 0.0,
                          "exposed_comm_us": exposed * 1000})
    return cpu_profile(comm, steps, ranks, source)


def _metrics(p: Profile) -> dict:
    return metrics_of(p)


def _every_step(*values: float) -> dict[int, list[float]]:
    return {r: [v] * 4 for r, v in enumerate(values)}


def test_a_rank_the_others_wait_for_is_the_slow_rank():
    # rank 2 sleeps 30 ms before forward: it arrives at 32 ms, the others at
    # 3, 3.3, 3.6 (2 ms compute + free). The runner-up (3.6) waits 28.4 ms
    # for it and the others arrived within 0.6 ms of each other: every step
    # counts 28.4. Its free time is 30 - median(1, 1.3, 1.6, 30) = 28.55 ms
    # above the median rank; the others wait 28.4 of it.
    p = _profile(_every_step(3.0, 3.3, 32.0, 3.6), _every_step(1.0, 1.3, 30.0, 1.6))
    m = _metrics(p)
    assert m["cluster.slow_rank"].value == 2
    assert m["cluster.slow_component"].value == "free (host/data)"
    assert m["cluster.slow_rank_excess_ms"].value == pytest.approx(28.4)
    evidence = m["cluster.slow_rank"].evidence
    assert evidence["component_excess_ms"] == pytest.approx(28.55)
    assert evidence["others_wait_from"].startswith("matched collectives")


def test_the_last_of_a_scattered_crowd_does_not_hold_it_back():
    # What the balanced gloo job showed on a loaded 2-core host: rank 0 is
    # descheduled 7.5 ms each step and arrives last, at 10 ms; rank 3 has no
    # extra free time but its compute stretched to 7 ms and it arrives at 9;
    # ranks 1 and 2 at 3.5 and 4.5. Rank 0 arrives 1 ms after the runner-up,
    # but the others are spread over 5.5 ms: not alone at the end, so no
    # step counts. Rank 3 waits for rank 0, so its 5 ms compute excess is
    # not corroborated either.
    arrive, free = _every_step(10.0, 3.5, 4.5, 9.0), _every_step(7.5, 1.5, 1.0, 0.0)
    compute = _every_step(2.0, 2.0, 2.0, 7.0)
    m = _metrics(_profile(arrive, free, compute))
    assert m["cluster.slow_rank_excess_ms"].value == 0.0
    # Without matched collectives, the median rank's exposed communication
    # (median(1, 7.5, 6.5, 2) = 4.25 ms) minus rank 0's (1 ms) corroborates
    # 3.25 ms of its 7.5 - 1.25 = 6.25 ms free-time excess: 30% of the 11 ms step.
    fallback = _metrics(_profile(arrive, free, compute, source="ascend_pt"))
    assert fallback["cluster.slow_rank"].value == 0
    assert fallback["cluster.slow_rank_excess_ms"].value == pytest.approx(3.25)


def test_late_in_only_half_the_steps_is_not_a_slow_rank():
    # rank 1 is descheduled 8 ms in steady steps 0 and 2 and arrives alone
    # (10 ms against 2.5-2.7), on time in steps 1 and 3: counted leads
    # 7.3, 0, 7.3, 0 ms. Its per-rank median free time is still 4 ms above
    # the others' (median of 8, 0.5, 8, 0.5 = 4.25 against 0.5), but a
    # straggler is late in every step: the lower median (reached by more
    # than half of the steps) is 0.
    arrive = {0: [2.5] * 4, 1: [10.0, 2.6, 10.0, 2.6], 2: [2.6] * 4, 3: [2.7] * 4}
    free = {0: [0.5] * 4, 1: [8.0, 0.5, 8.0, 0.5], 2: [0.5] * 4, 3: [0.5] * 4}
    assert _metrics(_profile(arrive, free))["cluster.slow_rank_excess_ms"].value == 0.0
    # Without matched collectives: exposed communication per-rank medians
    # 4.85, 1.05, 4.75, 4.65 ms; 4.7 - 1.05 = 3.65 ms of the 3.75 ms excess.
    fallback = _metrics(_profile(arrive, free, source="ascend_pt"))
    assert fallback["cluster.slow_rank"].value == 1
    assert fallback["cluster.slow_rank_excess_ms"].value == pytest.approx(3.65)


def test_late_in_three_of_four_steps_is_corroborated_by_the_least():
    # as above, late in steps 0, 1 and 2 by 7.3, 5.3 and 7.3 ms over the
    # runner-up: the lower median of (0, 5.3, 7.3, 7.3) is 5.3 ms; its
    # free-time excess, median(8, 6, 8, 0.5) - 0.5 = 6.5 ms, is capped at that.
    arrive = {0: [2.5] * 4, 1: [10.0, 8.0, 10.0, 2.6], 2: [2.6] * 4, 3: [2.7] * 4}
    free = {0: [0.5] * 4, 1: [8.0, 6.0, 8.0, 0.5], 2: [0.5] * 4, 3: [0.5] * 4}
    m = _metrics(_profile(arrive, free))
    assert m["cluster.slow_rank"].value == 1
    assert m["cluster.slow_rank_excess_ms"].value == pytest.approx(5.3)


def test_two_equally_slow_ranks_do_not_hold_it_back_one_at_a_time():
    # ranks 1 and 2 both sleep 30 ms: either alone on time would save
    # nothing (the other still arrives at 32), so neither is corroborated.
    p = _profile(_every_step(3.0, 32.0, 32.0, 3.0), _every_step(1.0, 30.0, 30.0, 1.0))
    assert _metrics(p)["cluster.slow_rank_excess_ms"].value == 0.0


def test_without_matched_collectives_exposed_communication_corroborates():
    # Start times that are not one clock (here: an Ascend export) cannot be
    # matched: the median rank's exposed communication, median(30, 29.7, 1,
    # 29.4) = 29.55 ms, minus rank 2's 1 ms corroborates 28.55 ms, all of its
    # free-time excess.
    p = _profile(_every_step(3.0, 3.3, 32.0, 3.6), _every_step(1.0, 1.3, 30.0, 1.6), source="ascend_pt")
    m = _metrics(p)
    assert m["cluster.slow_rank"].value == 2
    assert m["cluster.slow_rank_excess_ms"].value == pytest.approx(28.55)
    assert m["cluster.slow_rank"].evidence["others_wait_from"].startswith("exposed communication")
