"""Why a metric was not evaluated reads in the report's language.

* every reason a metric module can give (the text of each ``NotEvaluated``
  it raises, the constants and ``{"...": ...}`` choices passed to it, the
  registry's own reasons) has an entry in every language's catalogue;
* on real profiles, every metric reason a report lists is translated, in
  the skipped table and in the verdict's "could not be judged" lines, and
  an English report keeps the English text.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from advisor.i18n import VALUE
from advisor.metrics import reasons
from advisor.pipeline import analyze
from advisor.reports.i18n import skip_texts
from tests._catalogue_keys import OTHER_LANGS as LANGS
from tests._catalogue_keys import places_every_value_once, texts_written

METRICS = Path(reasons.__file__).parent


def _reason_expressions(node: ast.AST, src: str, path: Path) -> list[ast.expr]:
    """The reasons a node of a metric module gives (module doc)."""
    if isinstance(node, ast.Call):
        name = getattr(node.func, "id", getattr(node.func, "attr", ""))
        if name == "NotEvaluated" and node.args:
            return [node.args[0]]
        if name in ("_recorded", "_time_column") and len(node.args) == 3:  # host: NotEvaluated(arg 3) in them
            return [node.args[2]]
    if path.name == "registry.py" and isinstance(node, (ast.Return, ast.Assign)) and node.value is not None:
        if isinstance(node, ast.Return) or any(getattr(t, "id", "") == "reason" for t in node.targets):
            return [node.value]
    return []


def _raised_reasons() -> dict[str, str]:
    """Key -> where, of every reason the metric modules give (module doc)."""
    return texts_written(METRICS.glob("*.py"), _reason_expressions)


def test_the_scan_finds_the_reasons_metrics_give():
    found = _raised_reasons()
    assert len(found) > 150  # a scan that finds nothing checks nothing
    assert "no {} table in this profile" in found and "no value on this profile" in found  # the registry's
    assert VALUE + " steady steps; the model needs " + VALUE in found  # an f-string
    assert any(k.startswith("the profile records no Python garbage collections") for k in found)  # a constant


@pytest.mark.parametrize("lang", LANGS)
def test_every_reason_a_metric_gives_has_a_translation(lang):
    catalogue = reasons.REASONS.catalogues[lang].entries if lang in reasons.REASONS.catalogues else {}
    missing = {key: where for key, where in _raised_reasons().items() if key not in catalogue}
    assert not missing, missing


@pytest.mark.parametrize("lang", LANGS)
def test_translations_place_every_value_once(lang):
    for key, text in reasons.REASONS.catalogues[lang].entries.items():
        assert places_every_value_once(key, text), (key, text)


def test_a_template_takes_the_values_of_its_reason():
    reason = "7 steady steps; the model needs 8"
    assert reasons.localized(reason, "zh") != reason
    assert "7" in reasons.localized(reason, "zh") and "8" in reasons.localized(reason, "zh")
    assert reasons.localized(reason, "en") == reason
    assert reasons.localized("a reason no catalogue has", "zh") == "a reason no catalogue has"


@pytest.mark.parametrize("folder", ["resnet50_data_bound", "resnet50_8p_allreduce_tail", "vgg16_fp32"])
def test_real_profiles_show_their_reasons_in_chinese(examples, folder):
    zh = analyze(examples / folder, lang="zh", jobs=1)
    en = analyze(examples / folder, lang="en", jobs=1)
    metric_skips = [s for s in zh.skipped if s.what.startswith("metric ")]
    assert metric_skips
    for s in metric_skips:
        assert reasons.REASONS.catalogues["zh"].get(s.reason) is not None, s
        what, reason = skip_texts("zh", s.what, s.reason)
        assert reason != s.reason and what.startswith("指标 "), s
        assert skip_texts("en", s.what, s.reason) == (s.what, s.reason)
    english = {s.reason for s in metric_skips}
    for line in zh.verdict.missing:
        assert not any(r in line for r in english), line
    assert en.verdict.missing == [] or any(r in line for line in en.verdict.missing for r in english)
