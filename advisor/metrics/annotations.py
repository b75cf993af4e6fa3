"""Annotation metrics: where the step's time goes by ``record_function``
range (the ``annotations`` table of Kineto traces), as HTA's user-annotation
breakdown does: each range's device time per step and its share of the step.
"""

from __future__ import annotations

import pandas as pd

from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import US_PER_MS, per_rank_mean, steady_steps
from advisor.profile import Profile

#: Ranges listed in the value, the longest first (the evidence counts the rest).
MAX_LISTED = 20


@metric("annotations.time_by_name", unit="list", needs=["annotations.name", "annotations.total_us"])
def time_by_name(p: Profile) -> Value:
    """Time per ``record_function`` range name per steady step, longest
    first (at most ``MAX_LISTED``): ``{"name", "ms", "share", "source"}``
    with ``ms`` the range's time per step (mean over ranks), ``share`` that
    over the mean step time (None without step times) and ``source`` device
    (the range's device time: gpu_user_annotation spans or the device work
    launched in it) or host (a CPU-only trace: the range's own host time).
    Nested ranges each count their own time, so shares can sum past 1."""
    ann = p.table("annotations")
    steady = steady_steps(p)
    if not steady.empty and ann["step"].notna().any():
        ann = ann.merge(steady[["rank", "step"]].drop_duplicates(), on=["rank", "step"])
        n_steps = steady.groupby("rank").size()
    else:
        n_steps = pd.Series(1, index=pd.Index(ann["rank"].unique(), name="rank"))
    if ann.empty:
        raise NotEvaluated("no record_function range in the steady steps")
    per = ann.groupby(["name", "rank"])["total_us"].sum().unstack("rank", fill_value=0.0)
    per = per.reindex(columns=n_steps.index, fill_value=0.0) / n_steps
    step_us = per_rank_mean(p, "duration_us").reindex(n_steps.index)
    ms = per.mean(axis=1) / US_PER_MS
    share = (per / step_us).mean(axis=1) if step_us.notna().all() and (step_us > 0).all() else None
    source = ann.groupby("name")["source"].first()
    order = ms.sort_values(ascending=False, kind="stable").index
    out = [{"name": str(n), "ms": round(float(ms[n]), 4),
            "share": None if share is None else round(float(share[n]), 4), "source": str(source[n])}
           for n in order[:MAX_LISTED]]
    return Value(out, {"ranges": int(ann["count"].sum()), "names": len(order), "steps": int(n_steps.sum()),
                       "listed": len(out)})
