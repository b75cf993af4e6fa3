"""Why a file, or a part of one, was skipped, in the report's language.

A collector that cannot use a file (damaged, truncated, of another layout)
or a part of it (no kernel events, no collectives) skips it with a one-line
English problem, the one its ``InputError`` states; the skipped table of the
HTML and Markdown reports shows it through ``localized``, from a catalogue
per language keyed by the English text (``advisor.i18n.Catalogue``). A
problem without an entry is shown as written; the test suite checks that
every problem a collector states has one. ``report.json`` keeps the
English text; advisor's one-line error for an unusable input uses the same
catalogue (``advisor.cli.app.error_line``).
"""

from __future__ import annotations

from advisor.i18n import Translations
from advisor.reports.reading_zh import SKIP_PROBLEMS_ZH

SKIP_PROBLEMS = Translations({"zh": SKIP_PROBLEMS_ZH})
#: ``localized(problem, lang)``: a problem (English, as a collector stated it) in ``lang``.
localized = SKIP_PROBLEMS.localized
