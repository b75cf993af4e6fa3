"""All-reduces -> ``comm``: timed by the step trace's reduce points, with
the tensors each fuses from ``framework_raw``."""

from __future__ import annotations

import re

import pandas as pd

from advisor.collectors import vocab
from advisor.collectors.mindinsight.step_trace import SYSCNT_PER_US
from advisor.profile import Profile


def comm_table(profile: Profile, steps: pd.DataFrame | None, framework: pd.DataFrame | None, rank: int):
    """``comm`` rows: all-reduces timed by the step trace, each with the
    number of tensors its framework op takes (the gradients it fuses)."""
    rows = []
    if steps is not None:
        for col in steps.attrs.get("reduce_cols", []):
            m = re.match(r"^stream_(\d+)_(\d+)_(.+)$", col)
            name = m.group(3) if m else col
            block = pd.DataFrame(
                {
                    "rank": rank,
                    "name": name,
                    "kind": _reduce_kind(name),
                    "elapse_us": (steps[col] / SYSCNT_PER_US).to_numpy(),
                    "step": pd.array(steps["step_num"].to_numpy(), dtype="Int64"),
                    "start_us": (steps[col + "_start_point"] / SYSCNT_PER_US).to_numpy(),
                }
            )
            rows.append(block[block["elapse_us"].notna() & (block["elapse_us"] > 0)])
    if rows:
        comm = pd.concat(rows, ignore_index=True)
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


def _reduce_kind(name: str) -> str:
    """The kind of a step-trace reduce point: what its name says, else
    ``allreduce`` (the points mark the gradient all-reduces)."""
    kind = vocab.collective_kind(name)
    return vocab.ALLREDUCE if kind == vocab.OTHER else kind
