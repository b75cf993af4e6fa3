"""Why a metric was not evaluated, in the report's language.

A metric that cannot be computed says why in English: the registry's own
reasons (no table, no column, a failure, no value) or the text of the
``NotEvaluated`` a metric function raises. Reports and the verdict show
that reason in the report's language (``localized``), from a catalogue per
language keyed by the English text, as gettext keys its catalogues by the
message id. A reason with values in it (an f-string where it is raised) is
keyed by its template: each value written ``{}`` (literal braces doubled);
its translation places the values as ``{0}``, ``{1}``, ... in its own
order, and the values themselves (numbers, names, labels) are kept as they
are. A reason without an entry is shown as written; the test suite checks
that every reason a metric raises has one in every language.
``report.json`` keeps the English reasons.
"""

from __future__ import annotations

import re
from functools import cache

from advisor.i18n import DEFAULT_LANG
from advisor.metrics.reasons_zh import REASONS_ZH

#: Catalogue per language other than the default: English template -> translation.
CATALOGUES: dict[str, dict[str, str]] = {"zh": REASONS_ZH}

#: A value's place in a catalogue key.
VALUE = "{}"


def _literal(text: str) -> str:
    """A key's literal text: doubled braces single."""
    return text.replace("{{", "{").replace("}}", "}")


def _pattern(key: str) -> re.Pattern[str]:
    """The English template ``key`` as a regex matching a whole reason, one
    group per value (a value may be empty: a clause some reasons leave out)."""
    parts = key.split(VALUE)
    return re.compile("(.*?)".join(re.escape(_literal(p)) for p in parts), re.DOTALL)


@cache
def _compiled(lang: str) -> tuple[dict[str, str], list[tuple[re.Pattern[str], str]]]:
    """(reasons without values -> translation; (pattern, translation) of the
    templates, those with more literal text first, so the most specific
    template wins)."""
    catalogue = CATALOGUES.get(lang, {})
    fixed = {_literal(k): v.format() for k, v in catalogue.items() if VALUE not in k}
    templates = sorted((k for k in catalogue if VALUE in k), key=lambda k: -len(k.replace(VALUE, "")))
    return fixed, [(_pattern(k), catalogue[k]) for k in templates]


def localized(reason: str, lang: str) -> str:
    """``reason`` (English, as a metric or the registry gave it) in ``lang``;
    as written when the language is the default or has no entry for it."""
    if lang == DEFAULT_LANG:
        return reason
    fixed, templates = _compiled(lang)
    found = fixed.get(reason)
    if found is not None:
        return found
    for pattern, text in templates:
        m = pattern.fullmatch(reason)
        if m:
            return text.format(*m.groups())
    return reason


def has_entry(reason: str, lang: str) -> bool:
    """Whether ``lang``'s catalogue has an entry that ``reason`` matches."""
    fixed, templates = _compiled(lang)
    return reason in fixed or any(p.fullmatch(reason) for p, _ in templates)
