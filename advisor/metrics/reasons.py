"""Why a metric was not evaluated, in the report's language.

A metric that cannot be computed says why in English: the registry's own
reasons (no table, no column, a failure, no value) or the text of the
``NotEvaluated`` a metric function raises. Reports and the verdict show
that reason in the report's language (``localized``), from a catalogue per
language keyed by the English text (``advisor.i18n.Catalogue``: a reason
with values in it is keyed by its template). A reason without an entry is
shown as written; the test suite checks that every reason a metric raises
has one in every language. ``report.json`` keeps the English reasons.
"""

from __future__ import annotations

from advisor.i18n import Translations
from advisor.metrics.reasons_zh import REASONS_ZH

REASONS = Translations({"zh": REASONS_ZH})
#: ``localized(reason, lang)``: a reason (English, as a metric or the registry gave it) in ``lang``.
localized = REASONS.localized
