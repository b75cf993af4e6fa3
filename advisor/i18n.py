"""The languages advisor speaks: its report texts, rule texts and messages.

``LANGS`` is the one list; every per-language table (the report's UI texts in
``advisor.reports.i18n``, the engine's skip reasons, the metrics' reasons
for not being evaluated (``advisor.metrics.reasons``), the rule documentation
headings, each built-in rule's overlay) has exactly these languages, and the
test suite checks that they do. ``DEFAULT_LANG`` is the language rule files
are written in and the fallback of every table.
"""

from __future__ import annotations

#: Language codes, the default first.
LANGS = ("en", "zh")
#: The language of rule files and the fallback for a missing text.
DEFAULT_LANG = LANGS[0]
