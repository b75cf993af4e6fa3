"""Small CSV helpers shared by collectors: read only the needed columns.

Profiler CSVs vary by version: columns come and go, headers carry stray
spaces or a BOM, numbers arrive as ``"N/A"`` or with a trailing TAB inside
quotes (torch_npu writes ``"1736413971558972.912\t"`` so spreadsheets keep
the digits). These helpers read only the wanted columns with pyarrow, parse numbers
in pyarrow when every cell is one, and otherwise clean text cells and
coerce them one by one, so one odd cell never sinks a file.

Every failure is an ``InputError`` naming the file: the caller decides
whether the file was required (let it propagate) or optional (record a
skip and carry on).
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from operator import itemgetter
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from advisor.collectors.io.files import open_regular, read_bytes
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
        with open_regular(path, "r", newline="", encoding="utf-8-sig") as fh:
            row = next(csv.reader(fh), None)
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
    key = tuple((ours, tuple(spellings)) for ours, spellings in wanted.items())
    return dict(_match(tuple(header), key))


@functools.lru_cache(maxsize=256)
def _match(header: tuple[str, ...], wanted: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple:
    """``match_columns`` as (ours, actual) pairs, once per header and wanted set."""
    by_key = {}
    for name in header:
        by_key.setdefault(header_key(name), name)
    found = []
    for ours, spellings in wanted:
        for spelling in spellings:
            actual = by_key.get(header_key(spelling))
            if actual is not None:
                found.append((ours, actual))
                break
    return tuple(found)


def read_columns(
    path: Path,
    wanted: Mapping[str, Iterable[str]],
    numeric: Iterable[str] = (),
    required: Iterable[str] = (),
) -> pd.DataFrame:
    """``read_table`` as a DataFrame: numeric columns float64, text columns
    pandas ``string`` (NA where empty)."""
    table = read_table(path, wanted, numeric=numeric, required=required)
    out = {}
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_floating(col.type):
            out[name] = pd.Series(col.to_numpy(zero_copy_only=False), dtype="float64")
        else:
            out[name] = pd.Series(col.to_pandas(), dtype="string")
    return pd.DataFrame(out)


def read_table(
    path: Path,
    wanted: Mapping[str, Iterable[str]],
    numeric: Iterable[str] = (),
    required: Iterable[str] = (),
    raw_text: bool = False,
) -> pa.Table:
    """Read the wanted columns of a CSV as an Arrow table with our column names.

    ``numeric`` columns become float64 (null where the cell is empty or
    "N/A"); the others stay text with surrounding whitespace and stray
    quotes removed and null tokens turned into null. ``required`` columns
    must be in the header, else InputError. Ragged (truncated) rows, an
    empty file or bad encoding raise InputError naming the file.

    ``raw_text``: text columns may be left as written (not trimmed, null
    tokens kept), for a caller that cleans only their distinct values
    (``clean_text``), e.g. after grouping.

    The fast path lets pyarrow parse the numbers while reading; a file with
    a junk cell in a numeric column is re-read as text and converted cell by
    cell (junk becomes null), so one odd cell never sinks a file.
    """
    path = Path(path)
    small, header, found = _opened(path, wanted, required)
    if not found:
        return pa.table({})
    numeric = {ours for ours in found if ours in set(numeric)}
    if small is not None:
        return _small_table(small, found, numeric)
    return _large_table(path, header, found, numeric, raw_text)


def _opened(path: Path, wanted: Mapping[str, Iterable[str]],
            required: Iterable[str]) -> tuple[_SmallCsv | None, list[str], dict[str, str]]:
    """What every reader starts with: the file read whole when it is small
    (else None), its header, the wanted columns found in it (InputError for
    a missing required one) and, when any is found, the cut check."""
    small = _SmallCsv.open(path)
    header = small.header if small else read_header(path)
    found = _found_columns(path, header, wanted, required)
    if found:
        if small is not None:
            small.check_not_cut()
        else:
            _check_not_cut(path)
    return small, header, found


def _large_table(path: Path, header: list[str], found: dict[str, str], numeric: set[str],
                 raw_text: bool) -> pa.Table:
    """``read_table`` of a file too large to read in memory, by pyarrow."""
    try:
        typed = _read_arrow(path, header, found, numeric, typed=True)
        text = [typed.column(c) for c in found if c not in numeric]
        done = iter(text if raw_text else _clean_columns(text))
        return pa.table([typed.column(c) if c in numeric else next(done) for c in found], names=list(found))
    except (pa.ArrowInvalid, pa.ArrowException, UnicodeDecodeError, OSError):
        pass  # a junk number, or worse: the text path says which
    text = _read_arrow(path, header, found, numeric, typed=False)
    columns = [text_to_float(text.column(c)) if c in numeric else _clean(text.column(c)) for c in found]
    return pa.table(columns, names=list(found))


def read_numbers(
    path: Path,
    wanted: Mapping[str, Iterable[str]],
    required: Iterable[str] = (),
) -> dict[str, np.ndarray]:
    """``read_table`` of columns that are all numeric, as float64 arrays
    (NaN where ``read_table`` gives null), without building a table."""
    path = Path(path)
    small, header, found = _opened(path, wanted, required)
    if not found:
        return {}
    if small is None:
        table = _large_table(path, header, found, set(found), raw_text=False)
        return {c: table.column(c).to_numpy() for c in table.column_names}
    rows = small.rows()
    if not rows:
        return {ours: np.empty(0) for ours in found}
    at = [small.header.index(actual) for actual in found.values()]
    if len(at) > 1:
        try:  # every cell a plain number: one conversion for the whole file
            values = np.array(list(map(float, chain.from_iterable(map(itemgetter(*at), rows)))), dtype=np.float64)
            return dict(zip(found, values.reshape(len(rows), len(at)).T.copy()))
        except ValueError:
            pass
    columns = list(zip(*rows))
    return {ours: _numbers(columns[i]) for ours, i in zip(found, at)}


def _numbers(cells: Sequence[str]) -> np.ndarray:
    """Cells -> float64 as ``_number(_clean_cell(cell))`` gives them. Where
    ``float`` takes every cell as written (plain numbers, spaces around,
    "nan"), it gives the same values at a fraction of the cost."""
    try:
        return np.array(list(map(float, cells)), dtype=np.float64)
    except ValueError:
        return np.array([_number(_clean_cell(cell)) for cell in cells], dtype=np.float64)


def _found_columns(path: Path, header: list[str], wanted: Mapping[str, Iterable[str]],
                   required: Iterable[str]) -> dict[str, str]:
    """``match_columns``; InputError naming the ``required`` ones it lacks."""
    found = match_columns(header, wanted)
    missing = [c for c in required if c not in found]
    if missing:
        names = ", ".join(next(iter(wanted[c])) for c in missing)
        raise InputError(path, f"missing required column(s): {names}")
    return found


#: Files up to this many bytes are read once and split into cells by
#: Python's csv module: pyarrow's reader costs ~0.8 ms per call before it
#: parses a byte, more than a whole step_trace_time.csv takes this way.
SMALL_FILE = 32 * 1024


class _SmallCsv:
    """A small CSV file read once: its header now, its rows on demand,
    failing with the messages ``read_header`` and pyarrow's path give."""

    def __init__(self, path: Path, text: str):
        self.path, self.text = path, text
        self.reader = csv.reader(io.StringIO(text, newline=""))
        try:
            row = next(self.reader, None)
        except csv.Error as exc:
            raise InputError(path, f"cannot read CSV header ({exc})") from None
        if not row or not any(cell.strip() for cell in row):
            raise InputError(path, "empty file (no CSV header)")
        self.header = [cell.strip() for cell in row]

    @classmethod
    def open(cls, path: Path) -> _SmallCsv | None:
        """The file read, or None when it is larger than ``SMALL_FILE``."""
        raw = read_bytes(path, SMALL_FILE)
        if raw is None:
            return None
        try:
            return cls(path, raw.decode("utf-8-sig"))
        except UnicodeDecodeError:
            raise InputError(path, "not a UTF-8 text CSV file") from None

    def check_not_cut(self) -> None:
        """``_check_not_cut`` on the text in memory."""
        _raise_if_cut(self.path, not self.text or self.text.endswith(("\n", "\r")), lambda: self.text.count('"'))

    def rows(self) -> list[list[str]]:
        """The rows below the header, empty lines left out; InputError for
        a malformed file or a row whose cell count is not the header's."""
        try:
            rows = [row for row in self.reader if row]
        except csv.Error as exc:
            raise InputError(self.path, f"malformed or truncated CSV: {_first_line(exc)}") from None
        for n, row in enumerate(rows):
            if len(row) != len(self.header):
                raise InputError(self.path, f"malformed or truncated CSV: row {n + 2} has {len(row)} "
                                            f"cells, the header {len(self.header)}")
        return rows


def _small_cells(small: _SmallCsv, found: dict[str, str]) -> Iterator[tuple[str, list[str | None]]]:
    """(our name, cleaned cells) of each ``found`` column (``_clean_cell``)."""
    rows = small.rows()
    for ours, actual in found.items():
        i = small.header.index(actual)
        yield ours, [_clean_cell(row[i]) for row in rows]


def _small_table(small: _SmallCsv, found: dict[str, str], numeric: set[str]) -> pa.Table:
    """``read_table`` for a small file, cell by cell in Python (same
    cleaning; numbers that do not parse become null)."""
    arrays = [pa.array([_to_float(c) for c in cells], pa.float64()) if ours in numeric
              else pa.array(cells, pa.string()) for ours, cells in _small_cells(small, found)]
    return pa.table(arrays, names=list(found))


def clean_text(text: str | None) -> str | None:
    """One text cell as ``read_table`` cleans a column: trimmed of whitespace
    and quotes, null tokens None."""
    return None if text is None else _clean_cell(text)


def _clean_cell(text: str) -> str | None:
    """One cell as ``_clean`` treats a column: trimmed, null tokens None."""
    text = text.strip(_STRIP)
    return None if text in _NULL_SET else text


def _to_float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _number(text: str | None) -> float:
    """``_to_float`` with NaN for None."""
    value = _to_float(text)
    return np.nan if value is None else value


def _read_arrow(path: Path, header: list[str], found: dict[str, str], numeric: set[str],
                typed: bool) -> pa.Table:
    """Read the ``found`` columns, renamed to ours. ``typed``: numeric columns
    parsed as float64 by pyarrow (errors propagate as pyarrow's); else every
    column as text, errors as InputError."""
    read, parse, convert, ours = _arrow_options(tuple(header), tuple(found.items()),
                                                frozenset(numeric) if typed else frozenset())
    if typed:
        table = pacsv.read_csv(path, read_options=read, parse_options=parse, convert_options=convert)
    else:
        try:
            table = pacsv.read_csv(path, read_options=read, parse_options=parse, convert_options=convert)
        except (pa.ArrowInvalid, pa.ArrowException, UnicodeDecodeError) as exc:
            raise InputError(path, f"malformed or truncated CSV: {_first_line(exc)}") from None
        except OSError as exc:
            raise InputError(path, f"cannot read file ({exc.strerror or exc})") from None
    return table.rename_columns([ours.get(n, n) for n in table.column_names])


@functools.lru_cache(maxsize=256)
def _arrow_options(header: tuple[str, ...], found: tuple[tuple[str, str], ...], numeric: frozenset[str]):
    """pyarrow's (read, parse, convert) options for ``_read_arrow`` and the
    map from file column to ours; built once per header (every rank of a
    run has the same), as building them costs more than a small file's read."""
    names = _unique(list(header))
    chosen = {ours: names[header.index(actual)] for ours, actual in found}
    types = {col: (pa.float64() if ours in numeric else pa.string()) for ours, col in chosen.items()}
    convert = pacsv.ConvertOptions(include_columns=list(chosen.values()), column_types=types,
                                   strings_can_be_null=False, null_values=list(NULL_TOKENS))
    read = pacsv.ReadOptions(column_names=names, skip_rows=1, encoding="utf8", use_threads=False)
    parse = pacsv.ParseOptions(newlines_in_values=True)
    return read, parse, convert, {col: ours for ours, col in chosen.items()}


def _check_not_cut(path: Path, chunk: int = 1 << 20) -> None:
    """InputError when the file ends inside a quoted field (cut mid-write).

    pyarrow accepts a file whose last quoted cell never closes and returns
    the cut cell as data; an odd number of quote characters in a file that
    does not end with a newline is that cut. Only such files are scanned.
    """
    def quotes() -> int:
        fh.seek(0)
        return sum(block.count(b'"') for block in iter(lambda: fh.read(chunk), b""))

    try:
        with open_regular(path) as fh:
            fh.seek(0, 2)
            if fh.tell() == 0:
                return
            fh.seek(-1, 2)
            _raise_if_cut(path, fh.read(1) in (b"\n", b"\r"), quotes)
    except OSError as exc:
        raise InputError(path, f"cannot read file ({exc.strerror or exc})") from None


def _raise_if_cut(path: Path, ends_with_newline: bool, quotes: Callable[[], int]) -> None:
    """The rule of ``_check_not_cut``, stated once: a file that does not end
    with a newline and holds an odd number of quote characters (counted only
    then) was cut inside a quoted field."""
    if not ends_with_newline and quotes() % 2:
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
_NULL_SET = frozenset(NULL_TOKENS)


_NULL_ARRAY = pa.array(NULL_TOKENS, pa.string())
_NULL_STRING = pa.scalar(None, pa.string())


def _clean(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """Trim whitespace and quotes; null tokens become null."""
    trimmed = pc.utf8_trim(col, characters=_STRIP)
    is_null = pc.is_in(trimmed, value_set=_NULL_ARRAY)
    if not pc.any(is_null).as_py():
        return trimmed
    return pc.if_else(is_null, _NULL_STRING, trimmed)


def _clean_columns(cols: list[pa.ChunkedArray]) -> Iterator[pa.ChunkedArray]:
    """``_clean`` of each column, done in one pass over all of them (each
    compute call costs ~25 us before it touches a cell)."""
    if len(cols) < 2:
        yield from map(_clean, cols)
        return
    cleaned = _clean(pa.chunked_array([chunk for col in cols for chunk in col.chunks], pa.string()))
    offset = 0
    for col in cols:
        yield cleaned.slice(offset, len(col))
        offset += len(col)


def text_to_float(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """Text cells -> float64; trailing TABs/quotes ignored, junk is null.

    One pyarrow cast when every cell is a number; only a column with junk
    cells falls back to pandas' element-wise coercion.
    """
    cleaned = _clean(col)
    try:
        return pc.cast(cleaned, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        values = pd.to_numeric(pd.Series(cleaned.to_pandas(), dtype="string"), errors="coerce")
        return pa.chunked_array([pa.array(values.astype("float64").to_numpy(), from_pandas=True)])
