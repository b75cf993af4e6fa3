"""Small DataFrame helpers shared by the MindInsight readers: whitespace-
separated text files and optional columns set only when they hold a value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from advisor.collectors.io.files import read_bytes
from advisor.errors import InputError


def drop_empty(out: pd.DataFrame) -> pd.DataFrame:
    """Drop optional columns that hold no value at all (keep ``parent_id``)."""
    keep = [c for c in out.columns if c in ("rank", "op_id", "name", "parent_id") or out[c].notna().any()]
    return out[keep]


def put_int(out: pd.DataFrame, col: str, values, keep_all_na: bool = False) -> None:
    """Set a nullable-int column when ``values`` has data (or keep_all_na)."""
    if values is None:
        return
    arr = pd.array(np.round(values.to_numpy(dtype="float64")), dtype="Float64").astype("Int64")
    if keep_all_na or pd.notna(arr).any():
        out[col] = arr


def put_float(out: pd.DataFrame, col: str, values) -> None:
    """Set a float column when ``values`` has at least one number."""
    if values is None:
        return
    arr = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype="float64")
    if np.isfinite(arr).any():
        out[col] = arr



def read_space_table(path: Path, min_fields: int) -> pd.DataFrame:
    """A whitespace-separated text file as a DataFrame of strings.

    Lines with fewer than ``min_fields`` fields make the file unusable
    (a cut-off last line included): InputError naming the file.
    """
    try:
        text = read_bytes(Path(path)).decode("utf-8")
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


