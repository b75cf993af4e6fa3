"""Bounds on decompressed input: a gzip file may expand to at most
``max_decompressed`` bytes, and to at most ``max_expansion`` times the
compressed bytes read so far.

A few MB of gzip can hold gigabytes of whitespace or repeated events (a
"decompression bomb"); without a bound, reading one costs minutes and
gigabytes of memory before anything is analysed. :func:`open_gzip` returns
a reader that counts what it hands out and raises ``InputError`` naming the
file as soon as a bound is crossed, so the file is refused (exit code 2)
or, as one rank of a cluster, skipped with a note.

The bounds can be raised: ``--max-decompressed`` / ``--max-expansion`` on
the command line, or ``max_decompressed`` / ``max_expansion`` in the
``[limits]`` table of the config file (``advisor.settings``).
:func:`configure` stores them in the environment (``ENV_MAX_DECOMPRESSED``,
``ENV_MAX_EXPANSION``) so that the worker processes reading ranks in
parallel apply the same bounds.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from advisor.collectors.io.files import open_regular
from advisor.errors import ConfigError, InputError

#: Default bound on the decompressed size of one file. The largest real
#: Kineto traces are a few GB of JSON; reading one costs about a minute per
#: GB, so anything larger is refused unless the bound is raised.
MAX_DECOMPRESSED = 4 << 30
#: Default bound on decompressed / compressed bytes. Real traces compress
#: 7x to 30x (the Kineto and HTA traces of the test corpus); gzip reaches
#: about 1000x on whitespace and some 300x on a repeated event, which only
#: generated padding produces. 100 leaves real traces a threefold margin.
MAX_EXPANSION = 100
#: The expansion ratio is checked only once this many bytes have been
#: decompressed: below it the expansion costs little whatever the ratio,
#: and a small file's ratio says little.
RATIO_FLOOR = 4 << 20
#: Environment variables holding the bounds in force (set by :func:`configure`).
ENV_MAX_DECOMPRESSED = "ADVISOR_MAX_DECOMPRESSED"
ENV_MAX_EXPANSION = "ADVISOR_MAX_EXPANSION"

_STEP = 1 << 20  # bytes decompressed per step of read(-1)
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@dataclass(frozen=True)
class Limits:
    """The bounds in force: bytes, and decompressed per compressed byte."""

    max_decompressed: int = MAX_DECOMPRESSED
    max_expansion: float = MAX_EXPANSION


def parse_size(text, where: str) -> int:
    """``"8G"``, ``"512MB"``, ``"1.5GiB"`` or a number of bytes -> bytes;
    ConfigError naming ``where`` otherwise."""
    if isinstance(text, bool):
        raise ConfigError(f"{where}: {text!r} is not a size")
    m = _SIZE.match(str(text))
    if m is None or float(m.group(1)) <= 0:
        raise ConfigError(f"{where}: {text!r} is not a size (e.g. 8G, 512M or a number of bytes)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def parse_ratio(value, where: str) -> float:
    """A positive expansion ratio; ConfigError naming ``where`` otherwise."""
    try:
        ratio = float(value) if not isinstance(value, bool) else -1.0
    except (TypeError, ValueError):
        ratio = -1.0
    if not ratio >= 1:
        raise ConfigError(f"{where}: {value!r} is not a ratio of at least 1")
    return ratio


def configure(max_decompressed: int | None = None, max_expansion: float | None = None) -> None:
    """Put the given bounds in force for this process and the workers it
    starts (None keeps the current one)."""
    if max_decompressed is not None:
        os.environ[ENV_MAX_DECOMPRESSED] = str(int(max_decompressed))
    if max_expansion is not None:
        os.environ[ENV_MAX_EXPANSION] = repr(float(max_expansion))


def current() -> Limits:
    """The bounds in force (the defaults unless :func:`configure` changed them)."""
    size = os.environ.get(ENV_MAX_DECOMPRESSED, "")
    ratio = os.environ.get(ENV_MAX_EXPANSION, "")
    return Limits(parse_size(size, ENV_MAX_DECOMPRESSED) if size else MAX_DECOMPRESSED,
                  parse_ratio(ratio, ENV_MAX_EXPANSION) if ratio else MAX_EXPANSION)


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def check_bounds(where: str | Path, out: int, consumed: int, lim: Limits) -> None:
    """InputError naming ``where`` when ``out`` bytes decompressed from the
    first ``consumed`` compressed bytes cross a bound of ``lim``."""
    if out > lim.max_decompressed:
        raise InputError(where, f"decompresses to more than {_human(lim.max_decompressed)} "
                                "(raise the bound with --max-decompressed or [limits] max_decompressed)")
    if out >= RATIO_FLOOR:
        ratio = out / max(consumed, 1)
        if ratio > lim.max_expansion:
            raise InputError(where, f"expands {ratio:.0f}x when decompressed, more than the bound of "
                                    f"{lim.max_expansion:g}x (a decompression bomb? raise the bound with "
                                    "--max-expansion or [limits] max_expansion)")


def inflate(data: bytes, where: str | Path, limits: Limits | None = None) -> bytes:
    """zlib-compressed ``data`` (a stored report of the run history)
    decompressed under the bounds in force: InputError naming ``where`` as
    soon as the output crosses one, before the rest is inflated;
    ``zlib.error`` for data that is not zlib."""
    lim = limits or current()
    inflater = zlib.decompressobj()
    parts, out, tail = [], 0, data
    while tail and not inflater.eof:
        chunk = inflater.decompress(tail, _STEP)
        tail = inflater.unconsumed_tail
        out += len(chunk)
        parts.append(chunk)
        check_bounds(where, out, len(data) - len(tail), lim)
    if not inflater.eof:
        raise zlib.error("incomplete or truncated stream")
    return b"".join(parts)


class BoundedGzip:
    """A gzip reader of ``path`` that raises InputError once the data it
    returned crosses the bounds of ``limits`` (see the module doc).
    ``fileobj`` is the compressed file underneath (for progress)."""

    def __init__(self, path: Path, limits: Limits | None = None):
        self.path = Path(path)
        self.limits = limits or current()
        self.fileobj = open_regular(self.path)
        self._gz = gzip.GzipFile(fileobj=self.fileobj, mode="rb")
        self.out = 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            parts = []
            while chunk := self.read(_STEP):
                parts.append(chunk)
            return b"".join(parts)
        data = self._gz.read(size)
        self.out += len(data)
        self._check()
        return data

    def _check(self) -> None:
        check_bounds(self.path, self.out, self.fileobj.tell(), self.limits)

    def close(self) -> None:
        try:
            self._gz.close()
        finally:
            self.fileobj.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_gzip(path: Path) -> BoundedGzip:
    """:class:`BoundedGzip` of ``path`` under the bounds in force."""
    return BoundedGzip(path)
