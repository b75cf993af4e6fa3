"""Chart-ready tables for reports (aggregated here so templates never compute).

``step_breakdown``: per step id, mean over ranks of each component in ms.
``rank_breakdown``: per rank, mean over steady steps in ms (clusters only).
``ops`` / ``comm`` / ``data_ops``: what ``advisor compare`` matches across
runs by name: the top ``MAX_OPS`` operators (``name``, ``type``, ``core``,
``input_dtypes`` where recorded, ``count``, ``total_ms`` summed over ranks, ``per_step_ms`` = mean per rank
and step), collectives per (``kind``, ``name``) likewise, and dataset-pipeline
ops (``name``, ``op_id``, ``avg_ms``, ``workers``) where the profile has them.
``step_series``: per step id, the step time (mean over ranks, and the
fastest and slowest rank's time on clusters), ``outlier``: whether the
anomaly model flagged the step (metric ``anomaly.step_outliers``), and
``after_gap``: steps before this one were not recorded (the step id is not
the previous recorded one + 1: a second capture window of the run, steps
10 then 16), so a chart does not draw the two as neighbours.
``rank_heatmap``: per rank, mean over steady steps of each component in ms
(clusters only). Beyond ``HEATMAP_MAX_ROWS`` ranks, contiguous ranks are
grouped and each group shows its *slowest* member per component (the max),
so a straggler stays visible; ``rank`` is then a label like ``"0-3"``,
with ``rank_first``, ``rank_last`` and ``ranks`` (group size).
``top_ops``: the metric ``ops.top``. ``links``: per (src, dst, transport)
total size, time and bandwidth, slowest first.
Large inputs are bounded: at most ``MAX_ROWS`` rows per table (steps and
ranks beyond that are sampled evenly, keeping the first and last; flagged
outlier steps are always kept).
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
MAX_OPS = 200
HEATMAP_MAX_ROWS = 256
HEATMAP_COMPONENTS = (
    "duration_us", "computing_us", "exposed_comm_us", "free_us",
    "iteration_interval_us", "fp_bp_us", "tail_us", "data_wait_us",
)


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


def _step_series(steps: pd.DataFrame, metrics: dict) -> list[dict]:
    """Per step id: mean step time over ranks, min/max over ranks (clusters),
    and whether the anomaly model flagged the step."""
    if "duration_us" not in steps.columns or "step" not in steps.columns:
        return []
    rows = steps.dropna(subset=["step", "duration_us"])
    if rows.empty:
        return []
    grouped = rows.groupby("step")["duration_us"]
    out = pd.DataFrame({"step_ms": grouped.mean()})
    if rows["rank"].nunique() > 1:
        out["min_ms"] = grouped.min()
        out["max_ms"] = grouped.max()
    out = (out / US_PER_MS).round(4)
    flagged = metrics.get("anomaly.step_outliers")
    outliers = {int(s) for s in (flagged.value or [])} if flagged is not None and isinstance(flagged.value, list) else set()
    out.insert(0, "step", out.index.astype(int))
    out["outlier"] = out["step"].isin(outliers)
    out["after_gap"] = out["step"].diff().fillna(1) > 1
    if len(out) > MAX_ROWS:
        keep = set(_sample(out).index) | set(out.index[out["outlier"]])
        out = out.loc[sorted(keep)]
    return out.replace({np.nan: None}).to_dict("records")


def _rank_heatmap(per_rank: pd.DataFrame) -> list[dict]:
    """Per rank (or group of contiguous ranks, max per component) component
    means in ms; see the module doc."""
    cols = [c for c in HEATMAP_COMPONENTS if c in per_rank.columns and per_rank[c].notna().any()]
    if not cols or len(per_rank) < 2:
        return []
    frame = (per_rank[cols] / US_PER_MS).rename(columns=COMPONENTS).sort_index()
    if len(frame) <= HEATMAP_MAX_ROWS:
        out = frame.round(4)
        out.insert(0, "rank", frame.index.astype(int))
        return out.replace({np.nan: None}).to_dict("records")
    size = int(np.ceil(len(frame) / HEATMAP_MAX_ROWS))
    group = np.arange(len(frame)) // size
    ranks = pd.Series(frame.index.astype(int), index=frame.index)
    agg = frame.groupby(group).max().round(4)
    first = ranks.groupby(group).min()
    last = ranks.groupby(group).max()
    count = ranks.groupby(group).size()
    agg.insert(0, "rank", [f"{a}-{b}" if a != b else str(a) for a, b in zip(first, last)])
    agg.insert(1, "rank_first", first.to_numpy())
    agg.insert(2, "rank_last", last.to_numpy())
    agg.insert(3, "ranks", count.to_numpy())
    return agg.replace({np.nan: None}).to_dict("records")


def build_tables(profile: Profile, metrics: dict) -> dict[str, list[dict]]:
    """The report's chart tables (see module doc). Absurd values (a duration
    near 1e308 in a damaged file) overflow to inf quietly instead of printing
    numpy warnings at the user."""
    with np.errstate(all="ignore"):
        return _build_tables(profile, metrics)


def _build_tables(profile: Profile, metrics: dict) -> dict[str, list[dict]]:
    tables: dict[str, list[dict]] = {}
    steps = profile.table("steps")
    if steps is not None:
        if "step" in steps.columns and steps["step"].notna().any():
            per_step = steps.dropna(subset=["step"]).groupby("step").mean(numeric_only=True)
            tables["step_breakdown"] = _rows(per_step, "step")
        tables["step_series"] = _step_series(steps, metrics)
        if steps["rank"].nunique() > 1:
            per_rank = steady_steps(profile).groupby("rank").mean(numeric_only=True)
            tables["rank_breakdown"] = _rows(per_rank, "rank")
            tables["rank_heatmap"] = _rank_heatmap(per_rank)
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
    tables.update(_time_tables(profile))
    return {k: v for k, v in tables.items() if v}


def _distinct(rows: pd.DataFrame, keys: list[str], column: str) -> pd.api.extensions.ExtensionArray:
    """Per group of ``rows`` by ``keys`` (in ``groupby`` order, NaN keys
    kept), the distinct non-empty values of ``column``, " | "-joined (an
    operator name may run with several input dtype combinations); missing
    where it has none; of the column's dtype. One pass over the rows: a per-group ``agg`` of a
    Python function builds a Series per group, seconds for the thousands
    of operator names a run can have."""
    group = rows.groupby(keys, dropna=False).ngroup().to_numpy()
    found: list[set[str]] = [set() for _ in range(int(group.max()) + 1 if group.size else 0)]
    present = rows[column].notna().to_numpy()
    for g, value in zip(group[present].tolist(), rows[column][present].tolist()):
        text = str(value)
        if text:
            found[g].add(text)
    return pd.array([" | ".join(sorted(f)) or None for f in found], dtype=rows[column].dtype)


def _steps_per_rank(profile: Profile) -> float | None:
    steps = profile.table("steps")
    if steps is None or "step" not in steps.columns or steps["step"].isna().all():
        return None
    return len(steps.dropna(subset=["step"])) / max(steps["rank"].nunique(), 1)


def _time_tables(profile: Profile) -> dict[str, list[dict]]:
    """``ops``, ``comm`` and ``data_ops`` tables (see module doc)."""
    out: dict[str, list[dict]] = {}
    per_rank_steps = _steps_per_rank(profile)
    for name, keys, value in (("ops", ["name", "type", "core"], "total_us"),
                              ("comm", ["kind", "name"], "elapse_us")):
        df = profile.table(name)
        if df is None or value not in df.columns or not set(keys) <= set(df.columns):
            continue
        ranks = max(df["rank"].nunique(), 1)
        counted = next((c for c in ("count", "ops") if c in df.columns), None)  # rows that sum several
        agg = df.groupby(keys, dropna=False).agg(total=(value, "sum"),
                                                 count=(counted, "sum") if counted else (value, "size"))
        if "input_dtypes" in df.columns and df["input_dtypes"].notna().any():
            rows = df[[*keys, "input_dtypes"]]
            if pd.api.types.infer_dtype(rows["input_dtypes"], skipna=True) in ("string", "empty"):
                # strings (equal ones print the same), repeated by every rank:
                # join each distinct (group, dtypes) once
                rows = rows.drop_duplicates()
            agg["input_dtypes"] = _distinct(rows, keys, "input_dtypes")  # the same groups, in agg's order
        agg = agg.sort_values("total", ascending=False).head(MAX_OPS).reset_index()
        agg["total_ms"] = (agg.pop("total") / US_PER_MS).round(4)
        agg["per_step_ms"] = (agg["total_ms"] / (ranks * per_rank_steps)).round(4) if per_rank_steps else None
        out[name] = agg.replace({np.nan: None}).to_dict("records")
    data_ops = profile.table("data_ops")
    if data_ops is not None and "avg_time_us" in data_ops.columns:
        cols = [c for c in ("name", "op_id", "workers") if c in data_ops.columns]
        agg = data_ops.groupby(cols, dropna=False)["avg_time_us"].mean().div(US_PER_MS).round(4)
        out["data_ops"] = agg.rename("avg_ms").reset_index().replace({np.nan: None}).to_dict("records")
    return out
