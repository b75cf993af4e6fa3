"""The languages advisor speaks: its report texts, rule texts and messages.

``LANGS`` is the one list; every per-language table (the report's UI texts in
``advisor.reports.i18n``, the engine's skip reasons, the metrics' reasons
for not being evaluated (``advisor.metrics.reasons``), the run's notes
(``advisor.reports.run_notes``), the problems of skipped files
(``advisor.reports.skip_problems``), the rule documentation headings, each
built-in rule's overlay) has exactly these languages, and the test suite
checks that they do. ``DEFAULT_LANG`` is the language rule files are
written in and the fallback of every table.

Texts that advisor writes in English as it reads and measures (why a
metric was not evaluated, how a profile was read, why a file was skipped)
are translated when a report is written (``Translations``: a ``Catalogue``
per language, keyed by the English text, as gettext keys its catalogues by
the message id).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property

#: Language codes, the default first.
LANGS = ("en", "zh")
#: The language of rule files and the fallback for a missing text.
DEFAULT_LANG = LANGS[0]

#: A value's place in a catalogue key.
VALUE = "{}"


def _literal(text: str) -> str:
    """A key's literal text: doubled braces single."""
    return text.replace("{{", "{").replace("}}", "}")


class Catalogue:
    """English texts -> their translation into one language.

    A key is the English text as written where it is made, or, for a text
    with values in it (an f-string there), its template: each value written
    ``{}``, literal braces doubled. The translation places the values as
    ``{0}``, ``{1}``, ... in its own order; the values themselves (numbers,
    names, English labels) are kept as they are. A value may be empty (a
    clause some texts leave out). Where several templates match a text, the
    one with the most literal text wins.

    A text is matched against a template by its literal pieces, each value
    ending where the next piece first occurs (``str.find``): linear in the
    text's length, whatever it holds. Values come from profiles (file and
    operator names, parser messages quoting a row), and a regular
    expression's backtracking over a long hostile value took seconds to
    minutes.
    """

    def __init__(self, entries: Mapping[str, str]):
        self.entries = dict(entries)

    @cached_property
    def _compiled(self) -> tuple[dict[str, str], list[tuple[list[str], str]]]:
        fixed = {_literal(k): v.format() for k, v in self.entries.items() if VALUE not in k}
        keys = sorted((k for k in self.entries if VALUE in k), key=lambda k: -len(k.replace(VALUE, "")))
        return fixed, [([_literal(p) for p in k.split(VALUE)], self.entries[k]) for k in keys]

    def get(self, text: str) -> str | None:
        """``text`` translated, or None when no entry matches it."""
        fixed, templates = self._compiled
        found = fixed.get(text)
        if found is not None:
            return found
        for pieces, translation in templates:
            values = _values(pieces, text)
            if values is not None:
                return translation.format(*values)
        return None


def _values(pieces: list[str], text: str) -> list[str] | None:
    """The values of ``text`` between a template's literal ``pieces`` (one
    more piece than values), or None when it does not have them: it starts
    with the first piece, ends with the last, and each middle piece follows
    the value before it (its first occurrence)."""
    first, last = pieces[0], pieces[-1]
    if len(text) < len(first) + len(last) or not text.startswith(first) or not text.endswith(last):
        return None
    at, end = len(first), len(text) - len(last)
    values = []
    for piece in pieces[1:-1]:
        i = text.find(piece, at, end)
        if i < 0:
            return None
        values.append(text[at:i])
        at = i + len(piece)
    values.append(text[at:end])
    return values


class Translations:
    """One kind of text advisor writes in English (a metric's reasons, the
    run's notes, ...) in the other languages: a ``Catalogue`` per language."""

    def __init__(self, entries: Mapping[str, Mapping[str, str]]):
        self.catalogues = {lang: Catalogue(texts) for lang, texts in entries.items()}

    def localized(self, text: str, lang: str) -> str:
        """``text`` (English) in ``lang``; as written in the default language
        or where ``lang``'s catalogue has no entry for it."""
        catalogue = None if lang == DEFAULT_LANG else self.catalogues.get(lang)
        found = None if catalogue is None else catalogue.get(text)
        return text if found is None else found
