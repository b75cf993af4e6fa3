"""Chart-ready tables for reports (aggregated here so templates never compute).

``step_breakdown``: per step id, mean over ranks of each component in ms.
``rank_breakdown``: per rank, mean over steady steps in ms (clusters only).
Large inputs are bounded: at most ``MAX_ROWS`` rows per table (steps and
ranks beyond that are sampled evenly, keeping the first and last).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.metrics.steps_view import US_PER_MS, steady_steps
from advisor.profile import Profile

COMPONENTS = {
    "duration_us": "step_ms",
    "computing_us": "computing_ms",
    "exposed_comm_us": "exposed_comm_ms",
    "overlapped_us": "overlapped_ms",
    "free_us": "free_ms",
    "iteration_interval_us": "iteration_interval_ms",
    "fp_bp_us": "fp_bp_ms",
    "tail_us": "tail_ms",
    "data_wait_us": "data_wait_ms",
}
MAX_ROWS = 512


def _sample(df: pd.DataFrame) -> pd.DataFrame:
    if len(df) <= MAX_ROWS:
        return df
    idx = np.unique(np.linspace(0, len(df) - 1, MAX_ROWS).round().astype(int))
    return df.iloc[idx]


def _rows(df: pd.DataFrame, key: str) -> list[dict]:
    cols = [c for c in COMPONENTS if c in df.columns and df[c].notna().any()]
    if not cols:
        return []
    out = df[cols].div(US_PER_MS).round(4).rename(columns=COMPONENTS)
    out.insert(0, key, df.index.astype(int))
    return _sample(out).replace({np.nan: None}).to_dict("records")


def build_tables(profile: Profile, metrics: dict) -> dict[str, list[dict]]:
    """The report's chart tables (see module doc)."""
    tables: dict[str, list[dict]] = {}
    steps = profile.table("steps")
    if steps is not None:
        if "step" in steps.columns and steps["step"].notna().any():
            per_step = steps.dropna(subset=["step"]).groupby("step").mean(numeric_only=True)
            tables["step_breakdown"] = _rows(per_step, "step")
        if steps["rank"].nunique() > 1:
            per_rank = steady_steps(profile).groupby("rank").mean(numeric_only=True)
            tables["rank_breakdown"] = _rows(per_rank, "rank")
    top = metrics.get("ops.top")
    if top is not None:
        tables["top_ops"] = top.value
    links = profile.table("links")
    if links is not None and "bandwidth_gbps" in links.columns:
        agg = (
            links.groupby(["src", "dst", "transport"])[["size_mb", "time_ms"]].sum().reset_index()
        )
        agg = agg[agg["time_ms"] > 0]
        agg["bandwidth_gbps"] = (agg["size_mb"] / agg["time_ms"]).round(4)
        tables["links"] = _sample(agg.sort_values("bandwidth_gbps")).to_dict("records")
    return {k: v for k, v in tables.items() if v}
