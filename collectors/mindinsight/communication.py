"""Communication operators -> ``comm``: timed by the step trace's per-stream
columns (``stream_*_parallel_*`` and other reduce points: gradient
all-reduces; ``stream_*_Receive-op*`` / ``Send-op*``: pipeline
point-to-point), with each operator's transfer and wait time per step from
``hccl_raw`` and the tensors it fuses from ``framework_raw``; from
``hccl_raw`` alone when the step trace has no such columns."""

from __future__ import annotations

import pandas as pd

from advisor.collectors import vocab
from advisor.collectors.mindinsight.hccl_raw import operator_kind, short_name
from advisor.collectors.mindinsight.step_trace import SYSCNT_PER_US
from advisor.profile import Profile


def comm_table(profile: Profile, steps: pd.DataFrame | None, framework: pd.DataFrame | None, rank: int,
               hccl: pd.DataFrame | None = None):
    """``comm`` rows: communication operators timed by the step trace, each
    with its per-step wait from ``hccl`` (``hccl_raw.operator_rows``) and
    the number of tensors its framework op takes (the gradients it fuses)."""
    rows = []
    if steps is not None:
        for col in steps.attrs.get("reduce_cols", []):
            name = short_name(col)
            block = pd.DataFrame(
                {
                    "rank": rank,
                    "name": name,
                    "kind": operator_kind(name),
                    "elapse_us": (steps[col] / SYSCNT_PER_US).to_numpy(),
                    "step": pd.array(steps["step_num"].to_numpy(), dtype="Int64"),
                    "start_us": (steps[col + "_start_point"] / SYSCNT_PER_US).to_numpy(),
                }
            )
            rows.append(block[block["elapse_us"].notna() & (block["elapse_us"] > 0)])
    if rows:
        comm = pd.concat(rows, ignore_index=True)
        if hccl is not None:
            comm = _with_waits(comm, hccl)
    elif hccl is not None:
        comm = hccl
    elif framework is not None:
        kinds = [vocab.collective_kind(t) for t in framework["type"]]
        collective = [k != vocab.OTHER for k in kinds]
        coll = framework[collective]
        if coll.empty:
            return None
        comm = pd.DataFrame({"rank": rank, "name": coll["full_op_name"].to_numpy(),
                             "kind": [k for k, keep in zip(kinds, collective) if keep]})
        profile.meta.notes.append("comm: no step-trace reduce points; collective ops listed without times")
    else:
        return None
    if framework is not None and not comm.empty:
        counts = dict(zip(framework["full_op_name"], framework["tensor_count"]))
        short = {str(k).rsplit("/", 1)[-1]: v for k, v in counts.items()}
        tc = [counts.get(n, short.get(str(n).rsplit("/", 1)[-1], pd.NA)) for n in comm["name"]]
        arr = pd.array(tc, dtype="Int64")
        if pd.notna(arr).any():
            comm["tensor_count"] = arr
    return comm if len(comm) else None


def _with_waits(comm: pd.DataFrame, hccl: pd.DataFrame) -> pd.DataFrame:
    """The step-trace rows with ``transit_us`` and ``wait_us`` of the same
    operator and step from ``hccl_raw`` (matched by name)."""
    waits = hccl.groupby(["name", "step"], as_index=False)[["transit_us", "wait_us"]].sum()
    out = comm.merge(waits, on=["name", "step"], how="left")
    if out["wait_us"].isna().all():
        return comm
    return out
