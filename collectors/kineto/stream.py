"""Stream the ``traceEvents`` array of a large Chrome/Kineto trace in batches.

msgspec decodes a whole JSON document at once, and a decoded event costs
far more memory than its JSON text; a 300 MB trace decoded in one piece
needs over 1 GB. :func:`iter_batches` instead reads the file (plain or
gzip, decompressed on the fly) in chunks of ``CHUNK`` bytes, finds where
the elements of ``traceEvents`` start and end, and yields each run of
complete elements as the text of a JSON array, which the caller decodes
and reduces to compact columns before the next batch is read. The other
top-level members (``distributedInfo``, ``schemaVersion``, ...) are kept as
raw text and returned at the end as a small JSON object without events.

A batch is first cut after the last ``}, {`` of the buffer (the usual
separator between two events) and decoded; a JSON parser accepts
``[`` + text + ``]`` only when the text is a sequence of complete elements,
so a successful decode proves the guess. When it fails (the look-alike was
inside a string, or the array ends in this buffer), the exact scan below
finds the cut. Exact element boundaries are found with numpy, not a
per-byte Python loop: the
positions of quotes, backslashes, braces and brackets are extracted, quotes
preceded by an odd run of backslashes are dropped (escaped), braces inside
strings (an odd number of real quotes before them) are dropped, and the
running sum of +1 (``{``/``[``) / -1 (``}``/``]``) gives the nesting depth;
an element ends where the depth returns to the array's level. Each batch
starts between two elements, i.e. outside any string, so no state but the
unconsumed tail of the previous chunk is carried over.

The work is linear in the size of the file whatever its padding:
separators (whitespace, commas) between elements are dropped as they are
read, and a buffer that holds no whole element yet (one long element, or
padding inside one) is scanned again only once it has grown ``GROWTH``
times.

When ``traceEvents`` is not found in the first ``MAX_PREFIX`` bytes, or its
value is not an array, the caller falls back to decoding the whole document.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, TypeVar

import msgspec
import numpy as np

T = TypeVar("T")

#: Bytes read from the file per step.
CHUNK = 4 << 20
#: While the buffer holds no whole element (one very long element, or
#: padding inside one), it is scanned again only once it has grown by this
#: factor: the scans then add up to a few times the element's size instead
#: of growing with its square.
GROWTH = 2
#: Give up streaming when ``"traceEvents": [`` is not within this many bytes.
MAX_PREFIX = 64 << 20

_LUT = np.zeros(256, dtype=np.int8)
_QUOTE, _BSLASH, _OPEN, _CLOSE = 1, 2, 3, 4
_LUT[ord('"')] = _QUOTE
_LUT[ord("\\")] = _BSLASH
_LUT[ord("{")] = _LUT[ord("[")] = _OPEN
_LUT[ord("}")] = _LUT[ord("]")] = _CLOSE
_KEY = b'"traceEvents"'
_AFTER_KEY = re.compile(rb"\s*:\s*")
_SEP = b" \t\r\n,"
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_LEADING_SEP = re.compile(rb"[ \t\r\n,]*")


class NotStreamable(Exception):
    """The document's layout does not allow streaming; decode it whole."""


@dataclass
class Rest:
    """The document without its events: ``prefix + b'[]' + suffix``."""

    prefix: bytes = b""
    suffix: bytes = b""

    def document(self) -> bytes:
        return self.prefix + b"[]" + self.suffix


def structure(buf: bytes | memoryview) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Real (unescaped) quote positions, and the positions of braces and
    brackets outside strings with the nesting depth after each, for a
    buffer that starts outside any string (depth 0 at its start)."""
    b = np.frombuffer(buf, dtype=np.uint8)
    cls = _LUT[b]
    pos = np.flatnonzero(cls)
    c = cls[pos]
    quotes = pos[c == _QUOTE]
    bs = pos[c == _BSLASH]
    if bs.size and quotes.size:
        run_first = np.r_[True, bs[1:] != bs[:-1] + 1]
        run_start = np.maximum.accumulate(np.where(run_first, bs, 0))
        i = np.searchsorted(bs, quotes - 1)
        ic = np.clip(i, 0, bs.size - 1)
        hit = (i < bs.size) & (bs[ic] == quotes - 1)
        run_len = np.where(hit, quotes - run_start[ic], 0)
        quotes = quotes[run_len % 2 == 0]
    braces = pos[(c == _OPEN) | (c == _CLOSE)]
    outside = (np.searchsorted(quotes, braces) & 1) == 0
    braces = braces[outside]
    delta = np.where(cls[braces] == _OPEN, 1, -1).astype(np.int32)
    return quotes, braces, np.cumsum(delta, dtype=np.int64)


def _find_events_array(buf: bytes) -> int | None:
    """Offset just past the ``[`` opening the top-level ``traceEvents``
    array, None when the key is not (yet) in ``buf``; NotStreamable when the
    document is not an object or the key's value is not an array. Only the
    text before each candidate key is scanned."""
    start = buf.find(_KEY)
    while start >= 0:
        quotes, _, depth = structure(memoryview(buf)[:start])
        level = int(depth[-1]) if depth.size else 0
        if quotes.size % 2 == 0 and level == 1:
            m = _AFTER_KEY.match(buf, start + len(_KEY))
            if m is None:
                return None if start + len(_KEY) + 64 > len(buf) else _not_streamable()
            at = m.end()
            if at >= len(buf):
                return None
            if buf[at:at + 1] != b"[":
                _not_streamable()
            return at + 1
        start = buf.find(_KEY, start + 1)
    return None


def _not_streamable():
    raise NotStreamable("traceEvents is not an array")


def _guess_cut(buf: bytes) -> int:
    """End of the last ``}`` followed by ``, {`` (the usual boundary between
    two events) in ``buf``, or -1. Only a guess: the caller checks it by
    decoding, which fails unless the cut lies between two elements. Looks
    at growing windows at the end of ``buf`` (usually the last few KB)."""
    span = 1 << 14
    while True:
        lo = max(0, len(buf) - span)
        m = None
        for m in _BOUNDARY.finditer(buf, lo):
            pass
        if m is not None:
            return m.start() + 1
        if lo == 0:
            return -1
        span <<= 4


def boundary_after(buf: bytes) -> tuple[int, int] | None:
    """(just past the ``}`` that ends an element, the ``{`` that starts the
    next) at the first ``}, {`` in ``buf``, None without one. A guess, as
    in :func:`_guess_cut`: the look-alike may sit inside a string."""
    m = _BOUNDARY.search(buf)
    return None if m is None else (m.start() + 1, m.end() - 1)


def _exact_cut(buf: bytes) -> tuple[int, int]:
    """(end of the last complete element, position of the ``]`` closing the
    array or -1) from the exact structure scan."""
    _, braces, depth = structure(buf)
    closes = np.flatnonzero(depth < 0)
    if closes.size:
        end = int(braces[closes[0]])
        done = np.flatnonzero(depth[:closes[0]] == 0)
        return (int(braces[done[-1]]) + 1 if done.size else 0), end
    done = np.flatnonzero(depth == 0)
    return (int(braces[done[-1]]) + 1 if done.size else 0), -1


def _array_text(buf: bytes, start: int, end: int) -> bytes:
    """``buf[start:end]``, separators around it dropped, as the text of a JSON
    array (one copy); b"" when nothing is left."""
    start = _LEADING_SEP.match(buf, start, end).end()
    while end > start and buf[end - 1] in _SEP:
        end -= 1
    if end <= start:
        return b""
    with memoryview(buf) as view:
        return b"".join((b"[", view[start:end], b"]"))


def iter_batches(fh: BinaryIO, rest: Rest, decode: Callable[[bytes], T]) -> Iterator[T]:
    """Decode the elements of ``traceEvents`` in batches of about ``CHUNK``
    bytes: ``decode`` gets each batch as the text of a JSON array and must
    raise ``msgspec.DecodeError`` on malformed JSON. Fills ``rest`` with the
    document around the array. Raises NotStreamable (before decoding
    anything) or ValueError (the array is never closed).

    A batch is first cut at a guessed event boundary (:func:`_guess_cut`);
    when that text does not decode, the exact structure scan finds the cut
    and the end of the array, and its decode errors are the caller's. At
    the end of the file the guess is tried too, so that the exact scan
    usually covers only the last element and the rest of the document."""
    buf, at = events_start(fh)
    rest.prefix = buf[:at - 1]
    yield from _elements(fh, buf[at:], rest, decode, None)


def events_start(fh: BinaryIO) -> tuple[bytes, int]:
    """(the bytes read so far, the offset just past the ``[`` opening
    ``traceEvents``); NotStreamable when the document has no such array near
    its start."""
    buf = b""
    while True:
        chunk = fh.read(CHUNK)
        buf += chunk
        if buf.lstrip()[:1] not in (b"{", b""):
            _not_streamable()
        at = _find_events_array(buf)
        if at is not None:
            return buf, at
        if not chunk or len(buf) > MAX_PREFIX:
            raise NotStreamable("no traceEvents array near the start of the document")


def iter_range(fh: BinaryIO, start: int, end: int | None, rest: Rest,
               decode: Callable[[bytes], T]) -> Iterator[T]:
    """``iter_batches`` for the elements from byte ``start`` (where an element
    begins) to byte ``end`` (just past the ``}`` of the last one), for one
    part of a trace split between processes (``kineto_split``). With
    ``end`` None the part runs to the end of the array and ``rest.suffix``
    gets what follows it. A part that does not hold whole elements fails
    to decode (``msgspec.DecodeError``) or raises ValueError."""
    fh.seek(start)
    yield from _elements(fh, b"", rest, decode, None if end is None else end - start)


def _elements(fh: BinaryIO, buf: bytes, rest: Rest, decode: Callable[[bytes], T],
              limit: int | None) -> Iterator[T]:
    """The batches of ``iter_batches`` from ``buf`` (which starts between two
    elements) and what ``fh`` holds after it; with ``limit``, only that many
    more bytes are read and they end between two elements (no array end)."""
    eof = False
    guess = True
    more: list[bytes] = []  # chunks read since the last scan
    pending = len(buf)
    stuck = 0  # buffer size at the last scan that found no whole element
    while True:
        if not eof:
            size = CHUNK if limit is None else min(CHUNK, limit)
            chunk = fh.read(size) if size else b""
            eof = not chunk
            if limit is not None:
                limit -= len(chunk)
            if not pending:  # between elements: padding is dropped, not kept
                chunk = chunk[_LEADING_SEP.match(chunk).end():]
            more.append(chunk)
            pending += len(chunk)
            if not eof and (not pending or pending < GROWTH * stuck):
                continue  # nothing but padding yet, or one long element: read on
        if more:
            buf = b"".join((buf, *more))
            more = []
        if eof and limit is not None:  # the end of a part: whole elements only
            body = _array_text(buf, 0, len(buf))
            if body:
                yield decode(body)
            return
        cut = _guess_cut(buf) if guess else -1
        if cut > 0:
            body = _array_text(buf, 0, cut)
            try:
                result = decode(body) if body else None
            except msgspec.DecodeError:
                pass
            else:
                if result is not None:
                    yield result
                buf = _after_separators(buf, cut)
                pending, stuck = len(buf), 0
                # At the end of the file, what is left is the last element,
                # the end of the array and the rest of the document: the
                # exact scan below sorts them out.
                guess = not eof
                continue
        cut, end = _exact_cut(buf)
        body = _array_text(buf, 0, cut)
        if body:
            yield decode(body)
        if end >= 0:
            tail = _array_text(buf, cut, end)
            if tail:
                yield decode(tail)
            rest.suffix = buf[end + 1:] + fh.read()
            return
        if eof:
            raise ValueError("truncated document: the traceEvents array is not closed")
        buf = _after_separators(buf, cut)
        pending = len(buf)
        stuck = pending if cut == 0 else 0


def _after_separators(buf: bytes, at: int) -> bytes:
    """``buf`` from the first byte at or after ``at`` that is not a separator
    between elements (one copy)."""
    return buf[_LEADING_SEP.match(buf, at).end():]
