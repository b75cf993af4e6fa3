"""Cross-rank metrics on synchronous data-parallel steps: what a straggler
and a fused all-reduce look like in the steps table, versus host noise.

Step tables here follow the CPU-trace breakdown (collectors/kineto.py): a
straggler's extra host time is free time, the others wait for it as exposed
communication; a one-off stall is one step only.
"""

from __future__ import annotations

import pandas as pd

from advisor.metrics import evaluate
from advisor.profile import Profile, RunMeta


def _profile(rows: list[dict], ranks: int) -> Profile:
    # one all-reduce per rank, long enough to hold any exposed time of these steps
    comm = pd.DataFrame({"rank": list(range(ranks)), "name": "gloo:all_reduce", "kind": "allreduce",
                         "elapse_us": 40000.0, "start_us": 0.0, "step": pd.array([1] * ranks, dtype="Int64")})
    return Profile(meta=RunMeta(ranks=list(range(ranks)), device="cpu"), steps=pd.DataFrame(rows), comm=comm)


def _step(rank, step, compute, free, exposed, overlapped=0.0):
    comm = exposed + overlapped
    return {"rank": rank, "step": step, "duration_us": compute + free + exposed,
            "computing_us": compute, "free_us": free, "communication_us": comm,
            "overlapped_us": overlapped, "exposed_comm_us": exposed, "data_wait_us": 100.0}


def _values(p: Profile) -> dict:
    metrics, _ = evaluate(p)
    return {k: m.value for k, m in metrics.items()}


def test_persistent_straggler_is_the_slow_rank():
    # rank 2 sleeps 30 ms every step; the others wait for it at the all-reduce
    rows = [_step(r, s, 2000, 1000 + (30000 if r == 2 else 0), 5000 + (0 if r == 2 else 30000))
            for r in range(4) for s in range(5)]
    v = _values(_profile(rows, 4))
    assert v["cluster.slow_rank"] == 2 and v["cluster.slow_component"] == "free (host/data)"
    assert abs(v["cluster.slow_rank_excess_ms"] - 30.0) < 1e-6


def test_one_stalled_step_is_not_a_slow_rank():
    # rank 0 is descheduled for 8 ms in one step only: the per-rank median ignores it
    rows = [_step(r, s, 2000, 1000 + (8000 if (r, s) == (0, 3) else 0), 10000)
            for r in range(4) for s in range(6)]
    v = _values(_profile(rows, 4))
    assert v["cluster.slow_rank_excess_ms"] < 0.001


def test_excess_nobody_waits_for_does_not_hold_the_cluster_back():
    # rank 1 has 3 ms more free time every step, but waits as long as the others
    rows = [_step(r, s, 2000, 1000 + (3000 if r == 1 else 0), 10000 + (0 if r == 1 else 500 * r))
            for r in range(4) for s in range(5)]
    v = _values(_profile(rows, 4))
    assert v["cluster.slow_rank_excess_ms"] < 1.0


def test_exposed_allreduce_is_the_last_arriving_ranks():
    # rank 1 is persistently slower: rank 0 waits 6 ms more for it every step;
    # only the 2 ms both ranks wait is gradient synchronization a bucket change can hide
    rows = [_step(r, s, 16000 + (6000 if r == 1 else 0), 1000, 2000 + (6000 if r == 0 else 0))
            for r in range(2) for s in range(5)]
    v = _values(_profile(rows, 2))
    assert abs(v["comm.exposed_allreduce_ms"] - 2.0) < 1e-6
    assert abs(v["comm.exposed_allreduce_ratio"] - 2000 / 25000) < 1e-6
