"""``step_trace_raw_{rank}_detail_time.csv`` -> ``steps``.

Values are Ascend system-counter ticks of 10 ns (``SYSCNT_PER_US``); the
columns are described in ``advisor.collectors.mindinsight.collector``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from advisor.collectors import vocab
from advisor.collectors.io.csv_files import read_columns, read_header
from advisor.collectors.mindinsight.hccl_raw import operator_kind, short_name
from advisor.errors import InputError

#: Ascend system counter: one tick is 10 ns, so ticks / 100 = microseconds.
SYSCNT_PER_US = 100.0


_STEP_COLS = {
    "step_num": ("step_num",),
    "start_point": ("start_point",),
    "end_point": ("end_point",),
    "total": ("total",),
    "fp_point": ("fp_point",),
    "bp_point": ("bp_point",),
    "iteration_interval": ("iteration_interval",),
    "fp_and_bp": ("fp_and_bp",),
    "fp": ("fp",),
    "tail": ("tail",),
}


def load(path: Path) -> pd.DataFrame:
    """The step trace rows (average row dropped), raw tick values.

    Reduce columns are kept under their own names. InputError when the file
    is unusable or has no step rows.
    """
    header = read_header(path)
    reduce_cols = _reduce_columns(header)
    wanted = dict(_STEP_COLS)
    for col in reduce_cols:
        for suffix in ("", "_start_point", "_end_point"):
            wanted[col + suffix] = (col + suffix,)
    numeric = [c for c in wanted if c != "step_num"]
    frame = read_columns(path, wanted, numeric=numeric, required=("step_num", "total"))
    step = pd.to_numeric(frame["step_num"], errors="coerce")
    keep = step.notna() & ~_summary_row(step)
    frame = frame[keep].copy()
    frame["step_num"] = step[keep].astype("int64")
    if frame.empty:
        raise InputError(path, "no step rows (only a header or the average row)")
    if frame["total"].isna().all():
        raise InputError(path, "column 'total' has no numeric values")
    impossible = (frame["total"] < 0) | np.isinf(frame["total"])
    if impossible.any():
        row = frame[impossible].iloc[0]
        raise InputError(path, f"step {int(row['step_num'])}: total {row['total']:.0f} is impossible "
                               "(a negative or infinite step time)")
    frame.attrs["reduce_cols"] = reduce_cols
    frame.attrs["path"] = str(path)
    return frame


def _summary_row(step: pd.Series) -> pd.Series:
    """The average row MindSpore ends the file with: its step number is
    ``-`` (non-numeric, dropped by the caller), or ``0`` in older releases
    (MindInsight r1.3 ``ClusterStepTraceAnalyser`` reads "the last line"
    as "the average value" when asked for step 0; steps count from 1).
    A last row numbered 0 after steps numbered from 1 is that row."""
    out = pd.Series(False, index=step.index)
    numbered = step.dropna()
    if len(numbered) >= 2 and numbered.iloc[-1] == 0 and (numbered.iloc[:-1] >= 1).all():
        out[numbered.index[-1]] = True
    return out


def _reduce_columns(header: list[str]) -> list[str]:
    """Duration columns that have ``_start_point``/``_end_point`` siblings."""
    names = set(header)
    return [
        h
        for h in header
        if not h.endswith("_point")
        and f"{h}_start_point" in names
        and f"{h}_end_point" in names
        and h not in ("start", "end")
    ]


def steps_table(frame: pd.DataFrame, rank: int) -> pd.DataFrame:
    """Normalized ``steps`` rows from the raw step-trace frame (ticks -> us)."""
    us = lambda c: frame[c] / SYSCNT_PER_US  # noqa: E731 - tiny local helper
    out = pd.DataFrame(
        {
            "rank": rank,
            "step": pd.array(frame["step_num"].to_numpy(), dtype="Int64"),
            "duration_us": us("total").to_numpy(),
        }
    )
    if "start_point" in frame:
        out["start_us"] = us("start_point").to_numpy()
    if "iteration_interval" in frame:
        out["iteration_interval_us"] = us("iteration_interval").to_numpy()
    if "fp_and_bp" in frame:
        out["fp_bp_us"] = us("fp_and_bp").to_numpy()
    elif "fp" in frame:  # inference: forward only, tail folded in
        out["fp_bp_us"] = us("fp").to_numpy()
    if "tail" in frame and "fp_and_bp" in frame:
        out["tail_us"] = us("tail").to_numpy()
    receive = [c for c in frame.attrs.get("reduce_cols", []) if operator_kind(short_name(c)) == vocab.RECEIVE]
    if receive:
        # Pipeline point-to-point: the stage waits for its neighbour in its
        # Receive operators (their whole span; the cluster analysis file,
        # where present, replaces this with the time they run alone).
        wait = frame[receive].fillna(0).sum(axis=1) / SYSCNT_PER_US
        out["receive_us"] = wait.to_numpy()
        out["stage_us"] = out["duration_us"] - out["receive_us"]
    return out

