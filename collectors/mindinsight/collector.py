"""MindSpore / MindInsight profiler folder (the ``profiler/`` layout) -> Profile.

This is the layout MindSpore 1.x-2.2 wrote next to the raw CANN data and
MindInsight read: flat files named by rank id in one folder.

``step_trace_raw_{rank}_detail_time.csv``  (required when present)
    One row per step: ``step_num, start_point, end_point, total, fp_point,
    bp_point, iteration_interval, fp_and_bp, tail`` then, per all-reduce
    caught by the step-trace points, ``stream_{s}_{i}_{op}`` (duration),
    ``..._start_point`` and ``..._end_point``. All values are Ascend
    system-counter ticks of **10 ns** (MindInsight ``PER_MS_SYSCNT = 100000``,
    "one sys count takes 10 ns"; MindSpore 2.x writes msprof milliseconds
    times ``1e5``), so microseconds = value / 100. The last row is an
    average row with ``step_num`` = ``-``; it is dropped. Inference runs
    have no ``bp_point``/``tail`` and name the forward time ``fp``.

``minddata_pipeline_raw_{rank}.csv`` / ``pipeline_profiling_{rank}.json``
    The dataset pipeline: per op its type, workers, output connector queue
    (samples of its size and its capacity) and tree links.

``device_queue_profiling_{rank}.txt`` / ``dataset_iterator_profiling_{rank}.txt``
    Lines ``type extra batch value [timestamp_ms]``; type 1 records the
    size (``value``) and capacity (``extra``) of the host connector that
    feeds the device (MindInsight's "host queue"); type 0 records times.

``minddata_aicpu_{rank}.txt``
    ``GetNext_dequeue_wait start_us end_us queue_size``: the size of the
    on-device data queue each time the network takes a batch (MindInsight's
    "data queue" / device queue).

``aicore_intermediate_{rank}_detail.csv`` (+ ``framework_raw_{rank}.csv``,
``output_op_compute_time_{rank}.txt``)
    Per-operator average AI Core time; the framework file adds the type and
    ``op_info`` JSON with each input's ``data_type`` and ``shape``.

Tables: ``steps``, ``data_ops``, ``data_queue``, ``ops``, ``comm``.
``examples/README.md`` describes the example profiles built in these formats.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from advisor.collectors.io.csv_files import read_columns, read_header
from advisor.collectors.io.files import load_json
from advisor.collectors.protocol import Capabilities
from advisor.errors import InputError
from advisor.profile import Profile, RunMeta

#: ``discover`` and ``read`` only.
CAPABILITIES = Capabilities(label="MindInsight profiler output(s)")

#: Ascend system counter: one tick is 10 ns, so ticks / 100 = microseconds.
SYSCNT_PER_US = 100.0

STEP_TRACE = "step_trace_raw_{}_detail_time.csv"
PIPELINE_CSV = "minddata_pipeline_raw_{}.csv"
PIPELINE_JSON = "pipeline_profiling_{}.json"
DEVICE_QUEUE_TXT = "device_queue_profiling_{}.txt"
ITERATOR_TXT = "dataset_iterator_profiling_{}.txt"
AICPU_QUEUE_TXT = "minddata_aicpu_{}.txt"
OP_DETAIL = "aicore_intermediate_{}_detail.csv"
OP_COMPUTE_TXT = "output_op_compute_time_{}.txt"
FRAMEWORK = "framework_raw_{}.csv"
PROFILER_INFO = "profiler_info_{}.json"

#: File-name patterns that mark a folder as this layout, in anchor order:
#: the first one present for a rank id is that rank's unit.
_ANCHORS = (
    re.compile(r"^step_trace_raw_(\d+)_detail_time\.csv$"),
    re.compile(r"^minddata_pipeline_raw_(\d+)\.csv$"),
    re.compile(r"^pipeline_profiling_(\d+)\.json$"),
    re.compile(r"^aicore_intermediate_(\d+)_detail\.csv$"),
    re.compile(r"^framework_raw_(\d+)\.csv$"),
    re.compile(r"^device_queue_profiling_(\d+)\.txt$"),
    re.compile(r"^dataset_iterator_profiling_(\d+)\.txt$"),
    re.compile(r"^minddata_aicpu_(\d+)\.txt$"),
)
#: Folders never searched: other collectors' layouts and raw CANN data.
_SKIP_DIR = re.compile(r"(_ascend_pt|_ascend_ms)$|^(PROF_|JOB)|^(ASCEND_PROFILER_OUTPUT|FRAMEWORK)$")
#: Folder names that carry a rank (MindInsight r1.3 ``cluster_profiler/{rank}/profiler``).
_RANK_DIR = re.compile(r"^(?:rank[_-]?)?(\d+)$", re.IGNORECASE)
_MAX_DEPTH = 4

# ----------------------------------------------------------------- discovery


def discover(root: Path) -> list[Path]:
    """One anchor file per (folder, rank id) of this layout under ``root``.

    Looks at names only: ``root`` itself, then sub-folders up to a few
    levels deep (skipping ``*_ascend_pt``/``*_ascend_ms``/``PROF_*``).
    """
    root = Path(root)
    if root.is_file():
        return [root] if _anchor_id(root.name) is not None else []
    units: list[Path] = []
    for folder in _folders(root, 0):
        units.extend(_folder_anchors(folder))
    return units


def _folders(folder: Path, depth: int):
    """``folder`` and its sub-folders (breadth first by depth), names only."""
    yield folder
    if depth >= _MAX_DEPTH:
        return
    try:
        subs = sorted(p for p in folder.iterdir() if p.is_dir() and not _SKIP_DIR.search(p.name))
    except OSError:
        return
    for sub in subs:
        yield from _folders(sub, depth + 1)


def _anchor_id(name: str) -> tuple[int, int] | None:
    """(anchor priority, rank id) when ``name`` is one of our file names."""
    for prio, pattern in enumerate(_ANCHORS):
        m = pattern.match(name)
        if m:
            return prio, int(m.group(1))
    return None


def _folder_anchors(folder: Path) -> list[Path]:
    """The best anchor file of each rank id present in ``folder``.

    A rank whose only anchors are not readable files (a dangling symlink, a
    folder with a file's name) still yields one, so that reading it fails
    with a message naming the file instead of the rank vanishing silently.
    """
    best: dict[int, tuple[bool, int, Path]] = {}
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    for path in entries:
        hit = _anchor_id(path.name)
        if hit is None:
            continue
        prio, rid = hit
        key = (not path.is_file(), prio, path)
        if rid not in best or key[:2] < best[rid][:2]:
            best[rid] = key
    return [best[r][2] for r in sorted(best)]


def _not_a_file(path: Path) -> str:
    """Why ``path`` (present by name) cannot be read as a file."""
    if path.is_symlink() and not path.exists():
        return "dangling symbolic link (its target is missing)"
    if path.is_dir():
        return "is a folder, not a file"
    return "not a readable regular file"


def _ids_in(folder: Path) -> set[int]:
    """All rank ids named by this layout's files in ``folder``."""
    try:
        return {h[1] for p in folder.iterdir() if (h := _anchor_id(p.name))}
    except OSError:
        return set()


def _rank_of(folder: Path, file_id: int) -> int:
    """The rank of ``file_id`` in ``folder``.

    The id in the file names is the rank id (MindSpore >= 1.3 on Ascend).
    The MindInsight r1.3 cluster layout ``{rank}/profiler/..._0...`` names
    files by device id instead; there the rank folder wins when the folder
    holds a single id and the rank folder has rank-folder siblings. The
    folder names are looked at first: a folder of thousands of ranks' files
    is then never listed once per rank.
    """
    named = [(cand, m) for cand in (folder, folder.parent) if (m := _RANK_DIR.match(cand.name))]
    if not named or len(_ids_in(folder)) != 1:
        return file_id
    for cand, m in named:
        if _has_rank_sibling(cand):
            return int(m.group(1))
    return file_id


def _has_rank_sibling(folder: Path) -> bool:
    """Whether another sub-folder of ``folder``'s parent is named like a rank
    folder (stops at the first: a cluster holds thousands)."""
    try:
        with os.scandir(folder.parent) as entries:
            return any(e.name != folder.name and _RANK_DIR.match(e.name) and e.is_dir() for e in entries)
    except OSError:
        return False


# ---------------------------------------------------------------------- read


def read(unit: Path) -> Profile:
    """Read one rank (``unit`` is that rank's anchor file) into a Profile.

    The step trace is required when present (unusable -> InputError); the
    other files are optional (unusable -> ``profile.skip``). A unit whose
    files all fail raises the first error.
    """
    unit = Path(unit)
    hit = _anchor_id(unit.name)
    if hit is None:
        raise InputError(unit, "not a MindSpore/MindInsight profiler file")
    if not unit.is_file():
        raise InputError(unit, _not_a_file(unit))
    folder, fid = unit.parent, hit[1]
    rank = _rank_of(folder, fid)
    meta = RunMeta(
        framework="mindspore",
        device="ascend",
        source_format="mindinsight",
        source_path=str(folder),
        ranks=[rank],
        time_unit="us",
    )
    profile = Profile(meta=meta)
    _read_profiler_info(profile, folder / PROFILER_INFO.format(fid))
    step_file = folder / STEP_TRACE.format(fid)
    failures: list[InputError] = []
    step_frame = None
    if step_file.is_file():
        step_frame = _load_step_trace(step_file)  # required: errors propagate
        profile.steps = _steps_table(step_frame, rank)
    elif os.path.lexists(step_file):
        raise InputError(step_file, _not_a_file(step_file))
    framework = _framework_for(profile, folder, fid)
    readers = (
        ("data_ops", _data_ops_for),
        ("data_queue", _data_queue_for),
        ("ops", lambda p, f, i, r: _ops_for(p, f, i, r, framework)),
    )
    for name, fn in readers:
        try:
            table = fn(profile, folder, fid, rank)
        except InputError as exc:
            failures.append(exc)
            profile.skip(exc.path, exc.problem)
            continue
        if table is not None and len(table):
            setattr(profile, name, table)
    profile.comm = _comm_table(profile, step_frame, framework, rank)
    if not any(profile.table(t) is not None for t in ("steps", "data_ops", "data_queue", "ops")):
        if failures:
            raise failures[0]
        raise InputError(folder, f"no usable MindSpore profiler data for rank id {fid}")
    return profile


def _read_profiler_info(profile: Profile, path: Path) -> None:
    """World size, parallel mode and MindSpore version from profiler_info."""
    if not path.is_file():
        return
    try:
        info = load_json(path)
        if not isinstance(info, dict):
            raise InputError(path, "expected a JSON object")
    except InputError as exc:
        profile.skip(exc.path, exc.problem)
        return
    size = info.get("rank_size")
    if isinstance(size, int) and size > 0:
        profile.meta.world_size = size
        if str(info.get("parallel_mode", "")).lower() == "data_parallel":
            profile.meta.parallel = {"dp": size, "tp": 1, "pp": 1}
    version = info.get("ms_version")
    if isinstance(version, str) and version:
        profile.meta.source_version = version


# ---------------------------------------------------------------- step trace

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


def _load_step_trace(path: Path) -> pd.DataFrame:
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
    frame = frame[step.notna()].copy()  # drops the '-' average row
    frame["step_num"] = step[step.notna()].astype("int64")
    if frame.empty:
        raise InputError(path, "no step rows (only a header or the average row)")
    if frame["total"].isna().all():
        raise InputError(path, "column 'total' has no numeric values")
    frame.attrs["reduce_cols"] = reduce_cols
    frame.attrs["path"] = str(path)
    return frame


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


def _steps_table(frame: pd.DataFrame, rank: int) -> pd.DataFrame:
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
    return out


# ------------------------------------------------------------------ minddata


def _data_ops_for(profile: Profile, folder: Path, fid: int, rank: int) -> pd.DataFrame | None:
    """``data_ops`` from the pipeline CSV, else the pipeline JSON."""
    csv_path = folder / PIPELINE_CSV.format(fid)
    json_path = folder / PIPELINE_JSON.format(fid)
    if csv_path.is_file():
        try:
            return _data_ops_from_csv(csv_path, rank)
        except InputError as exc:
            if not json_path.is_file():
                raise
            profile.skip(exc.path, exc.problem + "; used " + json_path.name)
    if json_path.is_file():
        return _data_ops_from_json(json_path, rank)
    return None


def _data_ops_from_csv(path: Path, rank: int) -> pd.DataFrame:
    """``minddata_pipeline_raw_{rank}.csv`` -> ``data_ops``."""
    wanted = {
        "op_id": ("op_id",),
        "op_type": ("op_type",),
        "num_workers": ("num_workers",),
        "avg": ("output_queue_average_size",),
        "length": ("output_queue_length",),
        "usage": ("output_queue_usage_rate",),
        "parent_id": ("parent_id",),
    }
    frame = read_columns(
        path,
        wanted,
        numeric=("op_id", "num_workers", "avg", "length", "usage", "parent_id"),
        required=("op_id", "op_type"),
    )
    frame = frame[frame["op_id"].notna()]
    if frame.empty:
        raise InputError(path, "no pipeline operators")
    out = pd.DataFrame({"rank": rank, "op_id": frame["op_id"].astype("int64").to_numpy()})
    out["name"] = frame["op_type"].astype("string").to_numpy()
    _put_int(out, "workers", frame.get("num_workers"))
    usage = frame.get("usage")
    if usage is None and "avg" in frame and "length" in frame:
        usage = frame["avg"] / frame["length"].where(frame["length"] > 0)
    _put_float(out, "output_queue_usage", usage)
    _put_float(out, "output_queue_size", frame.get("avg"))
    _put_float(out, "output_queue_capacity", frame.get("length"))
    _put_int(out, "parent_id", frame.get("parent_id"), keep_all_na=True)
    return out


def _data_ops_from_json(path: Path, rank: int) -> pd.DataFrame:
    """``pipeline_profiling_{rank}.json`` (``sampling_interval``, ``op_info``
    with ``metrics.output_queue.{size,length}`` and ``children``) -> ``data_ops``."""
    data = load_json(path)
    ops = data.get("op_info") if isinstance(data, dict) else None
    if not isinstance(ops, list) or not ops:
        raise InputError(path, "no 'op_info' list of pipeline operators")
    parent: dict[int, int] = {}
    rows = []
    for op in ops:
        if not isinstance(op, dict) or not isinstance(op.get("op_id"), int):
            raise InputError(path, "an 'op_info' entry lacks an integer 'op_id'")
        for child in op.get("children") or []:
            if isinstance(child, int):
                parent[child] = op["op_id"]
        rows.append(_json_op_row(op))
    out = pd.DataFrame(rows)
    out.insert(0, "rank", rank)
    out["parent_id"] = pd.array([parent.get(i) for i in out["op_id"]], dtype="Int64")
    out["workers"] = pd.array(out["workers"], dtype="Int64")
    return _drop_empty(out)


def _json_op_row(op: dict) -> dict:
    """One pipeline op of the JSON as a ``data_ops`` row (queue stats computed)."""
    queue = (op.get("metrics") or {}).get("output_queue") or {}
    sizes = [s for s in queue.get("size") or [] if isinstance(s, (int, float))]
    length = queue.get("length")
    avg = float(np.mean(sizes)) if sizes else np.nan
    cap = float(length) if isinstance(length, (int, float)) and length > 0 else np.nan
    return {
        "op_id": op["op_id"],
        "name": str(op.get("op_type", "")),
        "workers": op.get("num_workers") if isinstance(op.get("num_workers"), int) else None,
        "output_queue_usage": avg / cap if sizes and cap == cap else np.nan,
        "output_queue_size": avg,
        "output_queue_capacity": cap,
    }


def _drop_empty(out: pd.DataFrame) -> pd.DataFrame:
    """Drop optional columns that hold no value at all (keep ``parent_id``)."""
    keep = [c for c in out.columns if c in ("rank", "op_id", "name", "parent_id") or out[c].notna().any()]
    return out[keep]


def _put_int(out: pd.DataFrame, col: str, values, keep_all_na: bool = False) -> None:
    """Set a nullable-int column when ``values`` has data (or keep_all_na)."""
    if values is None:
        return
    arr = pd.array(np.round(values.to_numpy(dtype="float64")), dtype="Float64").astype("Int64")
    if keep_all_na or pd.notna(arr).any():
        out[col] = arr


def _put_float(out: pd.DataFrame, col: str, values) -> None:
    """Set a float column when ``values`` has at least one number."""
    if values is None:
        return
    arr = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype="float64")
    if np.isfinite(arr).any():
        out[col] = arr


# ---------------------------------------------------------------- data queue


def _data_queue_for(profile: Profile, folder: Path, fid: int, rank: int) -> pd.DataFrame | None:
    """``data_queue`` rows: host queue (device_queue / dataset_iterator
    tracing) and device queue (GetNext in minddata_aicpu)."""
    parts = []
    host = folder / DEVICE_QUEUE_TXT.format(fid)
    if not host.is_file():
        host = folder / ITERATOR_TXT.format(fid)
    for path, fn in ((host, _host_queue), (folder / AICPU_QUEUE_TXT.format(fid), _device_queue)):
        if not path.is_file():
            continue
        try:
            parts.append(fn(path))
        except InputError as exc:
            profile.skip(exc.path, exc.problem)
    parts = [p for p in parts if len(p)]
    if not parts:
        return None
    out = pd.concat(parts, ignore_index=True)
    out.insert(0, "rank", rank)
    return _drop_empty(out)


def _read_space_table(path: Path, min_fields: int) -> pd.DataFrame:
    """A whitespace-separated text file as a DataFrame of strings.

    Lines with fewer than ``min_fields`` fields make the file unusable
    (a cut-off last line included): InputError naming the file.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read text file ({exc})") from None
    rows = [line.split() for line in text.replace("\x00", "\n").splitlines() if line.strip()]
    if not rows:
        raise InputError(path, "empty file")
    bad = next((i for i, r in enumerate(rows) if len(r) < min_fields), None)
    if bad is not None:
        raise InputError(path, f"line {bad + 1} has {len(rows[bad])} fields, expected >= {min_fields} (truncated?)")
    width = max(len(r) for r in rows)
    return pd.DataFrame([r + [None] * (width - len(r)) for r in rows], dtype="string")


def _host_queue(path: Path) -> pd.DataFrame:
    """``device_queue_profiling`` / ``dataset_iterator_profiling`` type-1
    records (``1 capacity batch size [time_ms]``) -> host queue samples."""
    raw = _read_space_table(path, 4)
    num = raw.apply(pd.to_numeric, errors="coerce")
    if num[[0, 1, 2, 3]].isna().any(axis=None):
        raise InputError(path, "non-numeric field in 'type extra batch value [time]' records")
    conn = num[num[0] == 1]
    out = pd.DataFrame(
        {
            "queue": "host",
            "index": conn[2].astype("int64").to_numpy(),
            "size": conn[3].to_numpy(dtype="float64"),
            "capacity": conn[1].to_numpy(dtype="float64"),
        }
    )
    if 4 in conn and conn[4].notna().all() and len(conn):
        out["time_us"] = conn[4].to_numpy(dtype="float64") * 1000.0
    return out.sort_values("index", kind="stable").reset_index(drop=True)


def _device_queue(path: Path) -> pd.DataFrame:
    """``minddata_aicpu`` ``GetNext* start_us end_us queue_size`` -> device
    queue samples, numbered in file order."""
    raw = _read_space_table(path, 1)
    rows = raw[raw[0].str.startswith("GetNext", na=False)]
    if rows.empty:
        raise InputError(path, "no GetNext records")
    if rows.shape[1] < 4 or rows[3].isna().any():
        raise InputError(path, "GetNext record without a queue size (truncated?)")
    size = pd.to_numeric(rows[3], errors="coerce")
    if size.isna().any():
        raise InputError(path, "non-numeric queue size in a GetNext record")
    out = pd.DataFrame({"queue": "device", "index": np.arange(1, len(rows) + 1), "size": size.to_numpy(dtype="float64")})
    start = pd.to_numeric(rows[1], errors="coerce")
    if start.notna().all():
        out["time_us"] = start.to_numpy(dtype="float64")
    return out


# ----------------------------------------------------------------------- ops

_DTYPE_PREFIX = re.compile(r"^(DT_|DT|NUMBER_TYPE_|KNUMBERTYPE)", re.IGNORECASE)
_DTYPE_ALIAS = {
    "FLOAT32": "FLOAT",
    "FP32": "FLOAT",
    "FP16": "FLOAT16",
    "HALF": "FLOAT16",
    "BFLOAT16": "BF16",
    "FLOAT64": "DOUBLE",
    "FP64": "DOUBLE",
    "INT": "INT32",
    "UINT": "UINT32",
}


def normalize_dtype(value: str) -> str:
    """``DT_FLOAT16``/``NUMBER_TYPE_FLOAT32``/``float32``/``DTFLOAT`` -> the
    Profile spelling (``FLOAT16``, ``FLOAT``, ...)."""
    text = _DTYPE_PREFIX.sub("", str(value).strip().upper()).replace("_", "")
    return _DTYPE_ALIAS.get(text, text) or "UNKNOWN"


def _ops_for(profile: Profile, folder: Path, fid: int, rank: int, framework) -> pd.DataFrame | None:
    """``ops`` from the AI Core detail file, typed and dtyped by framework_raw."""
    detail_path = folder / OP_DETAIL.format(fid)
    if not detail_path.is_file():
        return None
    detail = _op_detail(detail_path)
    counts = _op_counts(profile, folder / OP_COMPUTE_TXT.format(fid))
    if "count" not in detail:
        if counts is not None:
            detail = detail.merge(counts, on="full_op_name", how="left")
        else:
            profile.meta.notes.append(
                "ops: the operator detail file has per-execution averages only; "
                "count unknown, total_us is the average per execution"
            )
            detail["count"] = pd.NA
    detail["total_us"] = detail["avg_us"] * detail["count"].astype("Float64").fillna(1.0).to_numpy(dtype="float64")
    if framework is not None:
        detail = detail.merge(framework, on="full_op_name", how="left")
    return _ops_rows(detail, rank)


def _op_detail(path: Path) -> pd.DataFrame:
    """The AI Core detail file of either era.

    1.x: ``full_op_name, execution_time`` (average ms per execution).
    2.x: ``full_op_name, task_duration`` (average us), ``execution_frequency``,
    ``task_type``.
    """
    wanted = {
        "full_op_name": ("full_op_name", "op_name"),
        "execution_time": ("execution_time",),
        "task_duration": ("task_duration",),
        "count": ("execution_frequency",),
        "task_type": ("task_type",),
    }
    frame = read_columns(path, wanted, numeric=("execution_time", "task_duration", "count"), required=("full_op_name",))
    if "task_duration" in frame:
        avg = frame["task_duration"]
    elif "execution_time" in frame:
        avg = frame["execution_time"] * 1000.0
    else:
        raise InputError(path, "missing required column(s): execution_time or task_duration")
    out = pd.DataFrame({"full_op_name": frame["full_op_name"], "avg_us": avg.astype("float64")})
    if "count" in frame:
        out["count"] = pd.array(np.round(frame["count"].to_numpy(dtype="float64")), dtype="Float64").astype("Int64")
    out["core"] = frame["task_type"] if "task_type" in frame else "AI_CORE"
    out = out[out["full_op_name"].notna() & out["avg_us"].notna()]
    if out.empty:
        raise InputError(path, "no operator rows with a time")
    return out


def _op_counts(profile: Profile, path: Path) -> pd.DataFrame | None:
    """Executions per op from ``output_op_compute_time`` (1.x):
    ``op_name compute_time(ms) stream_id execution_times`` lines."""
    if not path.is_file():
        return None
    try:
        raw = _read_space_table(path, 1)
    except InputError as exc:
        profile.skip(exc.path, exc.problem)
        return None
    if raw.shape[1] < 4:
        profile.skip(str(path), "no 'op_name time stream count' lines")
        return None
    count = pd.to_numeric(raw[3], errors="coerce")
    time_ok = pd.to_numeric(raw[1], errors="coerce").notna()
    keep = count.notna() & time_ok & (raw[0] != "total")
    if not keep.any():
        profile.skip(str(path), "no 'op_name time stream count' lines")
        return None
    return pd.DataFrame({"full_op_name": raw.loc[keep, 0], "count": count[keep].astype("int64").to_numpy()})


def _framework_for(profile: Profile, folder: Path, fid: int) -> pd.DataFrame | None:
    """framework_raw -> per full op name: type, input dtypes/shapes, tensor count."""
    path = folder / FRAMEWORK.format(fid)
    if not path.is_file():
        return None
    try:
        return _framework(path)
    except InputError as exc:
        profile.skip(exc.path, exc.problem)
        return None


def _framework(path: Path) -> pd.DataFrame:
    """``framework_raw_{rank}.csv``: ``full_op_name, op_type, op_info``."""
    wanted = {"full_op_name": ("full_op_name",), "op_type": ("op_type",), "op_info": ("op_info",)}
    frame = read_columns(path, wanted, required=("full_op_name", "op_type"))
    frame = frame[frame["full_op_name"].notna()].drop_duplicates("full_op_name")
    infos = [_inputs(v) for v in frame.get("op_info", pd.Series([None] * len(frame)))]
    out = pd.DataFrame({"full_op_name": frame["full_op_name"].to_numpy(), "type": frame["op_type"].to_numpy()})
    out["input_dtypes"] = [i[0] for i in infos]
    out["input_shapes"] = [i[1] for i in infos]
    out["tensor_count"] = pd.array([i[2] for i in infos], dtype="Int64")
    return out


def _inputs(op_info) -> tuple[str | None, str | None, int | None]:
    """(dtypes ';'-joined, shapes ';'-joined, number of inputs) from op_info JSON."""
    if op_info is None or pd.isna(op_info) or not str(op_info).strip():
        return None, None, None
    try:
        info = orjson.loads(str(op_info))
    except orjson.JSONDecodeError:
        return None, None, None
    if not isinstance(info, dict):
        return None, None, None
    keys = sorted(
        (k for k in info if k.lower().startswith("input_")),
        key=lambda k: int(k.split("_", 1)[1]) if k.split("_", 1)[1].isdigit() else 0,
    )
    if not keys:
        return None, None, 0
    dtypes, shapes = [], []
    for key in keys:
        item = info[key] if isinstance(info[key], dict) else {}
        dtypes.append(normalize_dtype(item.get("data_type", "UNKNOWN")))
        shapes.append(_shape_text(item.get("shape")))
    return ";".join(dtypes), ";".join(shapes), len(keys)


def _shape_text(shape) -> str:
    """``[32, 3, 224, 224]`` or ``"32,3,224,224"`` -> ``32,3,224,224``."""
    if isinstance(shape, (list, tuple)):
        return ",".join(str(int(d)) for d in shape)
    return str(shape or "").strip().strip('"[]').replace(" ", "")


def _ops_rows(detail: pd.DataFrame, rank: int) -> pd.DataFrame:
    """Final ``ops`` table (aggregated per name/type/core/dtypes/shapes)."""
    name = detail["full_op_name"].astype("string").str.rsplit("/", n=1).str[-1]
    type_ = detail["type"] if "type" in detail else pd.Series(pd.NA, index=detail.index)
    type_ = type_.astype("string").fillna(name.str.split("-op", n=1).str[0])
    out = pd.DataFrame(
        {
            "rank": rank,
            "name": name.to_numpy(),
            "type": type_.to_numpy(),
            "core": detail["core"].astype("string").to_numpy(),
            "count": pd.array(detail["count"], dtype="Int64"),
            "total_us": detail["total_us"].to_numpy(dtype="float64"),
        }
    )
    for col in ("input_dtypes", "input_shapes"):
        if col in detail and detail[col].notna().any():
            out[col] = detail[col].astype("string").to_numpy()
    return out.reset_index(drop=True)


# ---------------------------------------------------------------------- comm

_KINDS = (
    ("allreduce", "allreduce"),
    ("allgather", "allgather"),
    ("reducescatter", "reducescatter"),
    ("broadcast", "broadcast"),
    ("alltoall", "alltoall"),
    ("send", "send"),
    ("receive", "receive"),
    ("recv", "receive"),
)


def comm_kind(name: str, default: str = "other") -> str:
    """Collective kind from an op name or type (``HcomAllReduce``, ``AllReduce-op1``...)."""
    key = re.sub(r"[^a-z]", "", str(name).lower())
    for token, kind in _KINDS:
        if token in key:
            return kind
    return default


def _comm_table(profile: Profile, steps: pd.DataFrame | None, framework: pd.DataFrame | None, rank: int):
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
                    "kind": comm_kind(name, default="allreduce"),
                    "elapse_us": (steps[col] / SYSCNT_PER_US).to_numpy(),
                    "step": pd.array(steps["step_num"].to_numpy(), dtype="Int64"),
                    "start_us": (steps[col + "_start_point"] / SYSCNT_PER_US).to_numpy(),
                }
            )
            rows.append(block[block["elapse_us"].notna() & (block["elapse_us"] > 0)])
    if rows:
        comm = pd.concat(rows, ignore_index=True)
    elif framework is not None:
        coll = framework[[comm_kind(t) != "other" for t in framework["type"]]]
        if coll.empty:
            return None
        comm = pd.DataFrame({"rank": rank, "name": coll["full_op_name"].to_numpy(), "kind": [comm_kind(t) for t in coll["type"]]})
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
