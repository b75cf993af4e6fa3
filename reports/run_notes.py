"""The run's notes in the report's language.

Collectors note, in English, how they read a profile (a sample of ranks, a
rank id that was assumed, steps that could not be split, a layout read
without some file); the terminal, Markdown and HTML reports show each note
through ``localized``, from a catalogue per language keyed by the English
text (``advisor.i18n.Catalogue``). A note without an entry is shown as
written; the test suite checks that every note a collector writes has one.
``report.json`` keeps the English notes.
"""

from __future__ import annotations

from advisor.i18n import Translations
from advisor.reports.reading_zh import RUN_NOTES_ZH

RUN_NOTES = Translations({"zh": RUN_NOTES_ZH})
#: ``localized(note, lang)``: a note (English, as a collector wrote it) in ``lang``.
localized = RUN_NOTES.localized
