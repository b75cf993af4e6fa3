"""Small CSV helpers shared by collectors: read only the needed columns.

Profiler CSVs vary by version: columns come and go, headers carry stray
spaces or a BOM, numbers arrive as ``"N/A"`` or with a trailing TAB inside
quotes (torch_npu writes ``"1736413971558972.912\t"`` so spreadsheets keep
the digits). These helpers read every wanted column as text with pyarrow,
then clean and convert in pandas, so one odd cell never sinks a file.

Every failure is an ``InputError`` naming the file: the caller decides
whether the file was required (let it propagate) or optional (record a
skip and carry on).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from advisor.errors import InputError

#: Cell values that mean "no value" in Ascend / MindSpore CSVs.
NULL_TOKENS = ("", "N/A", "NA", "n/a", "null", "NULL", "None", "-", "nan", "NaN")


def header_key(name: str) -> str:
    """Canonical form of a header for matching: lower case, no spaces/BOM."""
    return "".join(name.replace("\ufeff", "").split()).lower()


def read_header(path: Path) -> list[str]:
    """The column names of a CSV file (first line only).

    Raises InputError when the file is missing, unreadable, empty or not text.
    """
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            row = next(csv.reader(fh), None)
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except UnicodeDecodeError:
        raise InputError(path, "not a UTF-8 text CSV file") from None
    except (OSError, csv.Error) as exc:
        raise InputError(path, f"cannot read CSV header ({exc})") from None
    if not row or not any(cell.strip() for cell in row):
        raise InputError(path, "empty file (no CSV header)")
    return [cell.strip() for cell in row]


def match_columns(header: Iterable[str], wanted: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """Map each wanted canonical column to the header name that carries it.

    ``wanted`` maps our name -> accepted spellings in the file (first match
    wins). Columns absent from the header are left out of the result.
    """
    by_key = {}
    for name in header:
        by_key.setdefault(header_key(name), name)
    found: dict[str, str] = {}
    for ours, spellings in wanted.items():
        for spelling in spellings:
            actual = by_key.get(header_key(spelling))
            if actual is not None:
                found[ours] = actual
                break
    return found


def read_columns(
    path: Path,
    wanted: Mapping[str, Iterable[str]],
    numeric: Iterable[str] = (),
    required: Iterable[str] = (),
) -> pd.DataFrame:
    """Read the wanted columns of a CSV as a DataFrame with our column names.

    ``numeric`` columns become float64 (NaN where the cell is empty or
    "N/A"); the others stay text with surrounding whitespace and stray
    quotes removed and null tokens turned into NA. ``required`` columns must
    be in the header, else InputError. Ragged (truncated) rows, an empty
    file or bad encoding raise InputError naming the file.
    """
    path = Path(path)
    header = read_header(path)
    found = match_columns(header, wanted)
    missing = [c for c in required if c not in found]
    if missing:
        names = ", ".join(next(iter(wanted[c])) for c in missing)
        raise InputError(path, f"missing required column(s): {names}")
    if not found:
        return pd.DataFrame()
    _check_not_cut(path)
    table = _read_text_table(path, header, list(found.values()))
    numeric = set(numeric)
    out = {}
    for ours, actual in found.items():
        col = table.column(actual)
        out[ours] = arrow_to_float(col) if ours in numeric else arrow_to_text(col)
    return pd.DataFrame(out)


def _read_text_table(path: Path, header: list[str], columns: list[str]) -> pa.Table:
    """Read ``columns`` as strings with pyarrow; errors become InputError."""
    # Duplicate header names would make pyarrow refuse to select; rename them.
    names = _unique(header)
    convert = pacsv.ConvertOptions(
        include_columns=[names[header.index(c)] for c in columns],
        column_types={names[header.index(c)]: pa.string() for c in columns},
        strings_can_be_null=False,
    )
    read = pacsv.ReadOptions(column_names=names, skip_rows=1, encoding="utf8")
    parse = pacsv.ParseOptions(newlines_in_values=True)
    try:
        table = pacsv.read_csv(path, read_options=read, parse_options=parse, convert_options=convert)
    except (pa.ArrowInvalid, pa.ArrowException, UnicodeDecodeError) as exc:
        raise InputError(path, f"malformed or truncated CSV: {_first_line(exc)}") from None
    except OSError as exc:
        raise InputError(path, f"cannot read file ({exc.strerror or exc})") from None
    rename = {names[header.index(c)]: c for c in columns}
    return table.rename_columns([rename.get(n, n) for n in table.column_names])


def _check_not_cut(path: Path, chunk: int = 1 << 20) -> None:
    """InputError when the file ends inside a quoted field (cut mid-write).

    pyarrow accepts a file whose last quoted cell never closes and returns
    the cut cell as data; an odd number of quote characters in a file that
    does not end with a newline is that cut. Only such files are scanned.
    """
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            if fh.tell() == 0:
                return
            fh.seek(-1, 2)
            if fh.read(1) in (b"\n", b"\r"):
                return
            fh.seek(0)
            quotes = 0
            while block := fh.read(chunk):
                quotes += block.count(b'"')
    except OSError as exc:
        raise InputError(path, f"cannot read file ({exc.strerror or exc})") from None
    if quotes % 2:
        raise InputError(path, "truncated CSV: the file ends inside a quoted field")


def _unique(header: list[str]) -> list[str]:
    """Header names made unique by suffixing repeats with ``.1``, ``.2``..."""
    seen: dict[str, int] = {}
    out = []
    for name in header:
        n = seen.get(name, 0)
        seen[name] = n + 1
        out.append(name if n == 0 else f"{name}.{n}")
    return out


def _first_line(exc: Exception) -> str:
    """The first line of an exception message, shortened."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]


_STRIP = " \t\r\n\"'"


def _clean(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """Trim whitespace and quotes; null tokens become null."""
    trimmed = pc.utf8_trim(col, characters=_STRIP)
    is_null = pc.is_in(trimmed, value_set=pa.array(NULL_TOKENS, pa.string()))
    return pc.if_else(is_null, pa.scalar(None, pa.string()), trimmed)


def arrow_to_text(col: pa.ChunkedArray) -> pd.Series:
    """Text cells -> pandas string Series, trimmed, null tokens as NA."""
    return pd.Series(_clean(col).to_pandas(), dtype="string")


def arrow_to_float(col: pa.ChunkedArray) -> pd.Series:
    """Text cells -> float64 Series; trailing TABs/quotes ignored, junk is NaN.

    The fast path is one pyarrow cast; only a column with junk cells falls
    back to pandas' element-wise coercion.
    """
    cleaned = _clean(col)
    try:
        return pd.Series(pc.cast(cleaned, pa.float64()).to_numpy(zero_copy_only=False),
                         dtype="float64")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        values = pd.Series(cleaned.to_pandas(), dtype="string")
        return pd.to_numeric(values, errors="coerce").astype("float64")
