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
import string
from pathlib import Path

import pytest

from advisor.i18n import DEFAULT_LANG
from advisor.i18n import LANGS as ALL_LANGS
from advisor.metrics import reasons
from advisor.pipeline import analyze
from advisor.reports.i18n import skip_texts

METRICS = Path(reasons.__file__).parent
#: Every language the reports are written in but the one reasons are written in.
LANGS = [lang for lang in ALL_LANGS if lang != DEFAULT_LANG]


def _key(node: ast.expr, src: str) -> str | None:
    """A catalogue key (values as ``{}``) of a string literal or f-string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("{", "{{").replace("}", "}}")
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value.replace("{", "{{").replace("}", "}}") if isinstance(v, ast.Constant)
                       else reasons.VALUE for v in node.values)
    return None


def _texts(node: ast.expr, src: str, constants: dict[str, ast.expr]) -> list[str]:
    """The keys of what ``node`` can evaluate to: a literal, an f-string, a
    module constant, either branch of ``a if c else b``, a dict's values."""
    key = _key(node, src)
    if key is not None:
        return [key]
    if isinstance(node, ast.Name) and node.id in constants:
        return _texts(constants[node.id], src, constants)
    if isinstance(node, ast.IfExp):
        return _texts(node.body, src, constants) + _texts(node.orelse, src, constants)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict):
        return [k for v in node.value.values for k in _texts(v, src, constants)]
    return []


def _raised_reasons() -> dict[str, str]:
    """Key -> where, of every reason the metric modules give (module doc)."""
    found: dict[str, str] = {}
    for path in sorted(METRICS.glob("*.py")):
        src = path.read_text(encoding="utf-8")
        tree = ast.parse(src)
        constants = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                     for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            args: list[ast.expr] = []
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                if name == "NotEvaluated" and node.args:
                    args = [node.args[0]]
                elif name == "_recorded" and len(node.args) == 3:  # host: NotEvaluated(why) without the events
                    args = [node.args[2]]
            elif path.name == "registry.py" and isinstance(node, (ast.Return, ast.Assign)) and node.value is not None:
                targets = getattr(node, "targets", [])
                if isinstance(node, ast.Return) or any(getattr(t, "id", "") == "reason" for t in targets):
                    args = [node.value]
            for arg in args:
                for key in _texts(arg, src, constants):
                    found.setdefault(key, f"{path.name}:{arg.lineno}")
    return found


def test_the_scan_finds_the_reasons_metrics_give():
    found = _raised_reasons()
    assert len(found) > 150  # a scan that finds nothing checks nothing
    assert "no {} table in this profile" in found and "no value on this profile" in found  # the registry's
    assert reasons.VALUE + " steady steps; the model needs " + reasons.VALUE in found  # an f-string
    assert any(k.startswith("the profile records no Python garbage collections") for k in found)  # a constant


@pytest.mark.parametrize("lang", LANGS)
def test_every_reason_a_metric_gives_has_a_translation(lang):
    catalogue = reasons.CATALOGUES.get(lang, {})
    missing = {key: where for key, where in _raised_reasons().items() if key not in catalogue}
    assert not missing, missing


@pytest.mark.parametrize("lang", LANGS)
def test_translations_place_every_value_once(lang):
    for key, text in reasons.CATALOGUES[lang].items():
        n = key.replace("{{", "").replace("}}", "").count(reasons.VALUE)
        fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
        assert sorted(fields) == [str(i) for i in range(n)], (key, text)


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
        assert reasons.has_entry(s.reason, "zh"), s
        what, reason = skip_texts("zh", s.what, s.reason)
        assert reason != s.reason and what.startswith("指标 "), s
        assert skip_texts("en", s.what, s.reason) == (s.what, s.reason)
    english = {s.reason for s in metric_skips}
    for line in zh.verdict.missing:
        assert not any(r in line for r in english), line
    assert en.verdict.missing == [] or any(r in line for line in en.verdict.missing for r in english)
