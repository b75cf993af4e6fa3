"""A synthetic cluster Profile for the report tests: ``ranks`` ranks x
``steps`` steps of a data-parallel job with one slow rank (more free time),
a stall every ``period`` steps, an operator table and a ring of links with
one degraded link. Built directly as normalized tables (the Profile
contract), so the whole pipeline after the collector runs for real."""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.profile import Profile, RunMeta

SLOW_RANK = 5
SLOW_LINK = (3, 4)


def cluster_profile(ranks: int = 8, steps: int = 40, period: int = 10, seed: int = 0) -> Profile:
    rng = np.random.default_rng(seed)
    n = ranks * steps
    rank = np.repeat(np.arange(ranks), steps)
    step = np.tile(np.arange(1, steps + 1), ranks)
    computing = 60_000 + rng.normal(0, 800, n)
    overlapped = 8_000 + rng.normal(0, 300, n)
    exposed = 14_000 + rng.normal(0, 500, n)
    free = 9_000 + rng.normal(0, 400, n)
    free[rank == SLOW_RANK] += 12_000
    stall = (step % period == 0) & (step > 1)
    free[stall] += 45_000
    duration = computing + exposed + free
    start = (step - 1) * 120_000.0
    steps_df = pd.DataFrame(
        {
            "rank": rank,
            "step": pd.array(step, dtype="Int64"),
            "start_us": start,
            "duration_us": duration,
            "computing_us": computing,
            "communication_us": exposed + overlapped,
            "overlapped_us": overlapped,
            "exposed_comm_us": exposed,
            "free_us": free,
        }
    )
    names = ["MatMulV2", "Conv2D", "LayerNorm", "Softmax", "Cast", "TransData"]
    ops = pd.DataFrame(
        {
            "rank": np.repeat(np.arange(ranks), len(names)),
            "name": names * ranks,
            "type": names * ranks,
            "core": ["AI_CORE"] * (ranks * len(names)),
            "count": [steps * 10] * (ranks * len(names)),
            "total_us": np.tile([900_000.0, 600_000.0, 200_000.0, 150_000.0, 90_000.0, 60_000.0], ranks),
            "input_dtypes": ["FLOAT16"] * (ranks * len(names)),
        }
    )
    src = np.arange(ranks)
    dst = (src + 1) % ranks
    bw = 18.0 + rng.normal(0, 0.3, ranks)
    bw[(src == SLOW_LINK[0]) & (dst == SLOW_LINK[1])] = 4.0
    size = np.full(ranks, 2048.0)
    links = pd.DataFrame(
        {
            "rank": src,
            "src": src,
            "dst": dst,
            "transport": ["HCCS" if a // 8 == b // 8 else "RDMA" for a, b in zip(src, dst)],
            "name": ["hcom_allReduce_"] * ranks,
            "size_mb": size,
            "time_ms": size / bw,
            "bandwidth_gbps": bw,
        }
    )
    meta = RunMeta(
        framework="torch_npu",
        device="ascend",
        source_format="ascend_pt",
        source_path=f"/synthetic/cluster_{ranks}p",
        ranks=list(range(ranks)),
        world_size=ranks,
        parallel={"dp": ranks},
    )
    return Profile(meta=meta, steps=steps_df, ops=ops, links=links)
