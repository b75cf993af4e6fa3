"""A translated text's values come from the profile (file and operator
names, a parser's message quoting a row): however long and however full of
the template's own pieces a value is, translating it costs time linear in
its length (``advisor.i18n.Catalogue`` matches by ``str.find``). A regular
expression's backtracking took 35 s on one 100 KB value; every entry of
every catalogue is tried here with 200 KB values, under a bound that allows
for a slow, shared machine (this is a denial-of-service bound, not a speed
measurement)."""

from __future__ import annotations

import time

from advisor.i18n import VALUE, Catalogue
from advisor.metrics import reasons
from advisor.reports import run_notes, skip_problems

#: Wall-clock for all of them; the backtracking matcher needed minutes per value.
BOUND_SECONDS = 30.0
#: What a hostile value repeats: the separators the templates use.
HOSTILE = " (x): a, b; " * 17_000


def _catalogues() -> list[Catalogue]:
    return [c for t in (reasons.REASONS, run_notes.RUN_NOTES, skip_problems.SKIP_PROBLEMS) for c in t.catalogues.values()]


def test_hostile_values_are_translated_in_linear_time():
    start = time.perf_counter()
    tried = 0
    for catalogue in _catalogues():
        for key in catalogue.entries:
            if VALUE not in key:
                continue
            pieces = key.replace("{{", "{").replace("}}", "}").split(VALUE)
            text = HOSTILE.join(pieces)  # every value the hostile run
            got = catalogue.get(text)
            assert got is not None and "(x): a, b;" in got, key
            miss = text + " and some more"  # matches no template unless one ends with a value
            catalogue.get(miss)
            tried += 1
    assert tried > 100
    assert time.perf_counter() - start < BOUND_SECONDS


def test_a_value_holding_the_next_piece_ends_at_its_first_occurrence():
    catalogue = Catalogue({"{} trace files in {} were read": "{1} 中的 {0} 个 trace 文件已读取"})
    assert catalogue.get("3 trace files in a trace files in b were read") == "a trace files in b 中的 3 个 trace 文件已读取"
    assert catalogue.get("3 trace files in /x were read, twice") is None
