"""``ascend_cluster_analyse_{mode}_{stages}_{rank_size}_{rank}.csv`` -> the
parallel columns of ``steps`` and the run's pipeline layout.

MindSpore's timeline generator writes it per rank
(``_write_cluster_metrices`` in ``mindspore/profiler/parser/
base_timeline_generator.py``; MindInsight reads it in
``mindinsight/profiler/analyser/cluster_analyser.py``): a header, then one
row per step in step order, in milliseconds (GPU runs: the
``gpu_cluster_analyse_`` twin, also ms), then, when the run has more than
one step, a row of means (over all steps, or over the steps after the
first in later releases) with no step marker. Columns:

* ``computation_time``: step time minus ``communication_alone_time``;
* ``communication_alone_time``: communication not overlapped by compute;
* pipeline-parallel runs only: ``stage_time`` (step time minus
  ``receive_alone_time``), ``receive_alone_time`` (only Receive operators
  run: the stage waits for its neighbour) and
  ``collective_communication_alone_time`` (other communication alone).

The file name carries the parallel mode (``data-parallel``,
``model-parallel``, ``pipeline-parallel``), the number of pipeline stages
and the rank size; MindInsight puts rank ``r`` in stage
``r // (rank_size / stages)`` (``_get_cluster_step_bottleneck_info``).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from advisor.collectors.io.csv_files import read_columns
from advisor.errors import InputError
from advisor.profile import Profile

FILE = re.compile(r"^(ascend|gpu)_cluster_analyse_([a-z]+-parallel)_(\d+)_(\d+)_(\d+)\.csv$")
US_PER_MS = 1000.0
#: Written values are rounded to 4 decimals (``time_decimal_digits``): a
#: row of means matches its recomputation within this.
ROUNDING_MS = 1e-3

_COLUMNS = {
    "computation": ("computation_time",),
    "comm_alone": ("communication_alone_time",),
    "stage": ("stage_time",),
    "receive_alone": ("receive_alone_time",),
    "collective": ("collective_communication_alone_time",),
}


def find(folder: Path, fid: int) -> tuple[Path, str, int, int] | None:
    """(path, parallel mode, stages, rank size) of rank ``fid``'s file."""
    try:
        names = [p.name for p in folder.iterdir()]
    except OSError:
        return None
    for name in sorted(names):
        m = FILE.match(name)
        if m and int(m.group(5)) == fid:
            return folder / name, m.group(2), int(m.group(3)), int(m.group(4))
    return None


def load(path: Path, steps: int | None) -> pd.DataFrame:
    """The per-step rows in ms, the row of means dropped (``steps``: the
    step trace's step count, when known)."""
    frame = read_columns(path, _COLUMNS, numeric=tuple(_COLUMNS), required=("computation", "comm_alone"))
    frame = frame.dropna(subset=["computation", "comm_alone"]).reset_index(drop=True)
    if frame.empty:
        raise InputError(path, "no step rows")
    if (frame.select_dtypes("number") < 0).any(axis=None):
        raise InputError(path, "negative time")
    if _has_mean_row(frame, steps):
        frame = frame.iloc[:-1]
    return frame


def _has_mean_row(frame: pd.DataFrame, steps: int | None) -> bool:
    """Whether the last row is the row of means: one row more than the step
    trace has steps, or (without a step trace) a last row equal to the mean
    of the rows before it (all, or all after the first)."""
    if steps is not None:
        return len(frame) == steps + 1
    if len(frame) < 3:
        return False
    values = frame.to_numpy(dtype=float)
    last, body = values[-1], values[:-1]
    for part in (body, body[1:]):
        if np.allclose(np.nanmean(part, axis=0), last, atol=ROUNDING_MS, rtol=1e-4, equal_nan=True):
            return True
    return False


def apply(profile: Profile, folder: Path, fid: int, rank: int) -> None:
    """Add the file's columns to ``profile.steps`` (or make a ``steps``
    table from them when there is no step trace) and set the run's
    parallel layout. Unusable file -> ``profile.skip``."""
    hit = find(folder, fid)
    if hit is None:
        return
    path, mode, stages, rank_size = hit
    _layout(profile, mode, stages, rank_size, rank)
    steps = profile.steps
    try:
        frame = load(path, None if steps is None else len(steps))
    except InputError as exc:
        profile.skip(exc.path, exc.problem)
        return
    if steps is not None and len(frame) != len(steps):
        profile.skip(str(path), f"{len(frame)} step rows against {len(steps)} steps in the step trace: "
                                "not aligned, not used")
        return
    us = lambda c: (frame[c] * US_PER_MS).to_numpy(dtype=float)  # noqa: E731 - tiny local helper
    if steps is None:
        steps = pd.DataFrame({"rank": rank, "step": pd.array(np.arange(1, len(frame) + 1), dtype="Int64"),
                              "duration_us": us("computation") + us("comm_alone")})
        profile.meta.notes.append("steps: from the cluster analysis file (no step trace): "
                                  "step time = computation + communication alone")
    else:
        steps = steps.copy()
    steps["exposed_comm_us"] = us("comm_alone")
    steps["computing_us"] = _computing(us("computation"), steps)
    if "stage" in frame and frame["stage"].notna().any():
        steps["stage_us"] = us("stage")
    if "receive_alone" in frame and frame["receive_alone"].notna().any():
        steps["receive_us"] = us("receive_alone")
    profile.steps = steps


def _computing(computation: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """MindInsight's computation time (the step outside communication that
    runs alone), less the iteration interval where the step trace has it:
    the step's device time outside exposed communication."""
    if "iteration_interval_us" not in steps:
        return computation
    rest = computation - steps["iteration_interval_us"].to_numpy(dtype=float)
    return np.where(np.isfinite(rest) & (rest >= 0), rest, computation)


def _layout(profile: Profile, mode: str, stages: int, rank_size: int, rank: int) -> None:
    """World size, parallel sizes and the rank's stage from the file name."""
    if rank_size <= 0:
        return
    profile.meta.world_size = profile.meta.world_size or rank_size
    if mode == "pipeline-parallel" and stages > 1 and rank_size % stages == 0:
        profile.meta.parallel = {**profile.meta.parallel, "pp": stages}
        profile.meta.stages[rank] = rank // (rank_size // stages)
    elif mode == "data-parallel":
        profile.meta.parallel = {"dp": rank_size, "tp": 1, "pp": 1}
    elif "pp" not in profile.meta.parallel:
        profile.meta.parallel = {**profile.meta.parallel, "pp": 1}
