"""``flops_summary_{rank}.json`` (else ``flops_{rank}.txt``) -> ``flops``:
the floating-point work a rank did in the profiled window.

MindSpore writes both (``AscendFlopsGenerator`` in ``mindspore/profiler/
parser/ascend_flops_generator.py``, older releases ``flops_parser.py``);
MindInsight's ``ClusterFlopsAnalyser`` (``mindinsight/profiler/analyser/
cluster_analyser.py``) reads ``FLOPs``, else ``cube_FLOPs + vec_FLOPs``.

* summary, older: ``{"FLOPs": MFLOPs, "FLOPS": GFLOPS, "FLOPS_Utilization": %}``;
  newer: ``{"cube_FLOPs", "cube_FLOPS", "vec_FLOPs", "vec_FLOPS"}`` (same units);
* per operator (a CSV despite its name): ``op_full_name`` then
  ``MFLOPs(10^6)`` (older) or ``MFLOPs(10^6 cube)`` / ``MFLOPs(10^6 vector)``
  and the matching ``GFLOPS(10^9 ...)`` columns.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from advisor.collectors.io.csv_files import read_columns, read_header
from advisor.collectors.io.files import load_json
from advisor.errors import InputError
from advisor.profile import Profile

SUMMARY_FILE = "flops_summary_{}.json"
OPS_FILE = "flops_{}.txt"


def flops_table(profile: Profile, folder: Path, fid: int, rank: int) -> pd.DataFrame | None:
    """One row: ``mflops``, and ``gflops_per_s`` / ``utilization`` where
    written. Unusable file -> ``profile.skip``."""
    for path, read in ((folder / SUMMARY_FILE.format(fid), _summary), (folder / OPS_FILE.format(fid), _per_op)):
        if not path.is_file():
            continue
        try:
            row = read(path)
        except InputError as exc:
            profile.skip(exc.path, exc.problem)
            continue
        return pd.DataFrame([{"rank": rank, **row}])
    return None


def _finite(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) and value >= 0 else None


def _summary(path: Path) -> dict:
    data = load_json(path)
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object")
    if _finite(data.get("FLOPs")) is not None:
        row = {"mflops": _finite(data["FLOPs"])}
        rate, share = _finite(data.get("FLOPS")), _finite(data.get("FLOPS_Utilization"))
    else:
        parts = [_finite(data.get(k)) for k in ("cube_FLOPs", "vec_FLOPs")]
        if None in parts:
            raise InputError(path, "no 'FLOPs' nor 'cube_FLOPs' and 'vec_FLOPs' numbers")
        row = {"mflops": sum(parts)}
        rates = [_finite(data.get(k)) for k in ("cube_FLOPS", "vec_FLOPS")]
        rate, share = (None if None in rates else sum(rates)), None
    if rate is not None:
        row["gflops_per_s"] = rate
    if share is not None:
        row["utilization"] = share / 100.0
    return row


def _per_op(path: Path) -> dict:
    header = [h.strip() for h in read_header(path)]
    work = [h for h in header if h.startswith("MFLOPs")]
    if not work:
        raise InputError(path, "no 'MFLOPs(10^6 ...)' column")
    frame = read_columns(path, {h: (h,) for h in work}, numeric=work)
    total = float(frame[work].fillna(0).to_numpy().sum())
    if not math.isfinite(total):
        raise InputError(path, "non-finite FLOPs")
    return {"mflops": total}
