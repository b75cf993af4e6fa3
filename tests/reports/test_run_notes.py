"""The run's notes (how a profile was read) read in the report's language.

* every note a collector writes (the text given to ``notes.append``, the
  module constants and concatenations it is built from, and the notes the
  rank reader and the Kineto reader build in helpers) has an entry in
  every language's catalogue;
* on real profiles, the notes of a Chinese report are Chinese in the
  terminal, the Markdown and the HTML, and an English report keeps them.
"""

from __future__ import annotations

import ast
import io
import re
from pathlib import Path

import pytest
from markupsafe import escape
from rich.console import Console

from advisor.collectors.kineto import critical_path, presence
from advisor.collectors.live.runner import RunResult, profiler_cost_note
from advisor.collectors.parallel import kernel_sample
from advisor.pipeline import analyze
from advisor.reports import print_summary, run_notes
from advisor.reports.html import render_html
from advisor.reports.markdown import render_markdown
from tests._catalogue_keys import OTHER_LANGS, places_every_value_once, texts_written

COLLECTORS = Path(kernel_sample.__file__).parents[1]


def _note_expressions(node: ast.AST, src: str, path: Path) -> list[ast.expr]:
    """The note a node appends to a notes list, if it does."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
            and node.args and ast.get_source_segment(src, node.func.value).endswith("notes")):
        return [node.args[0]]
    return []


def _written_notes() -> dict[str, str]:
    """Key -> where, of every note the collectors append to a notes list."""
    return texts_written(COLLECTORS.rglob("*.py"), _note_expressions)


#: ``advisor run``'s steps after the window, timed without the profiler (``profiler_cost_note``).
_TIMED = RunResult(trace_dir=Path("trace"), framework="pytorch", exit_code=0, steps_captured=5,
                   unprofiled_step_ms={"rank0": [7.5, 7.9], "rank1": [7.7, 7.8]})
#: Notes built by helpers, as they read.
BUILT = [kernel_sample.note(128, 1024, 128), profiler_cost_note(_TIMED, 20.47), profiler_cost_note(_TIMED, 7.9),
         presence.missing_device_note(["device properties of a GPU", "cudaLaunchKernel calls"]),
         f"critical path not computed: {critical_path.NO_LAUNCH_LINKS}"]


def test_the_scan_finds_the_notes_collectors_write():
    found = _written_notes()
    assert len(found) > 35
    assert "steps derived from the Overlap Analysis lanes of trace_view.json (no step_trace_time.csv)" in found
    assert any(k.startswith("device idle time per step is not derived") for k in found)  # a constant


@pytest.mark.parametrize("lang", OTHER_LANGS)
def test_every_note_has_a_translation(lang):
    catalogue = run_notes.RUN_NOTES.catalogues[lang]
    missing = {key: where for key, where in _written_notes().items() if key not in catalogue.entries}
    assert not missing, missing
    for note in BUILT:
        assert catalogue.get(note) is not None, note
    for key, text in catalogue.entries.items():
        assert places_every_value_once(key, text), (key, text)


def test_values_are_kept_in_the_translation():
    note = kernel_sample.note(128, 1024, 128)
    zh = run_notes.localized(note, "zh")
    assert zh != note and "128" in zh and "1024" in zh and "--kernel-ranks all" in zh
    assert run_notes.localized(note, "en") == note


@pytest.mark.parametrize("folder", ["mindspore-cpu", "kineto-tb-plugin/resnet50_num_workers_0",
                                    "mstt/test/resource/advisor/cluster_analysis_output"])
def test_real_profiles_show_their_notes_in_chinese(corpus, folder):
    zh = analyze(corpus / folder, lang="zh", jobs=1)
    notes = zh.run.notes
    assert notes
    shown = [run_notes.localized(n, "zh") for n in notes]
    assert all(s != n for s, n in zip(shown, notes)), notes
    terminal = _terminal(zh, "zh")
    markdown = render_markdown(zh, lang="zh")
    html = render_html(zh, lang="zh")
    for english, chinese in zip(notes, shown):
        assert english not in terminal and " ".join(chinese.split()) in terminal
        assert str(escape(chinese)) in html and str(escape(english)) not in html
        assert re.search(r"[\u4e00-\u9fff]{4,}", chinese).group(0) in markdown
    en = analyze(corpus / folder, lang="en", jobs=1)
    assert all(" ".join(n.split()) in _terminal(en, "en") for n in en.run.notes)


def _terminal(report, lang: str) -> str:
    console = Console(file=io.StringIO(), width=1000)
    print_summary(report, console, lang=lang)
    return " ".join(console.file.getvalue().split())
