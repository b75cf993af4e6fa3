"""A rule file or config from the repository under test costs bounded time
and memory, and a bad one is one line naming it.

Rule files are YAML with CEL expressions and Jinja templates
(``advisor.engine.schema``, ``advisor schema --rules``); the sandbox keeps
them from Python, and the bounds of ``advisor.engine.cel`` and
``advisor.engine.render`` keep them from looping or allocating without
end. Each user rule here fires on every profile (``step.time_ms > 0``) and
runs through the real command line (``advisor report --rules``) on a real
MindSpore profile (``examples/resnet50_data_bound``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from advisor.engine.render import MAX_TEMPLATE_SIZE
from tests.regression.gate_helpers import advisor, one_line_error

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "examples" / "resnet50_data_bound" / "profiler"
#: Wall-clock a report of this profile takes with a bounded user rule (it
#: takes a few seconds; an unbounded one ran for minutes or used gigabytes).
REPORT_SECONDS = 60

RULE = """\
id: ADV990
name: hostile-rule
title: a rule from the repository under test
group: habits
requires: [step.time_ms]
condition: {condition}
message: {message}
explanation: {{what: a, why: b, how: c}}
fix: {{default: {{text: x}}}}
examples:
  - {{name: f, metrics: {{step.time_ms: 10.0}}, expect: fire}}
  - {{name: p, metrics: {{step.time_ms: 0.0}}, expect: pass}}
"""


def _rule(tmp_path: Path, *, condition: str = "step.time_ms > 0.0", message: str = "m") -> Path:
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "hostile.yaml").write_text(RULE.format(condition=json.dumps(condition), message=json.dumps(message)))
    return folder


def _report(tmp_path: Path, rules: Path) -> tuple[int, str, str, float]:
    started = time.monotonic()
    code, out, err = advisor("report", PROFILE, "-o", tmp_path / "out", "--rules", rules, "--no-color")
    return code, out, err, time.monotonic() - started


@pytest.mark.parametrize("message", [
    "{{ 'x' * 200000000 }}",                                  # 200 MB in one expression
    "{{ '%200000000s' % 1 }}",                                # ... as a format width
    "{{ 'x'|center(200000000) }}",                            # ... as a padding
    "{% for i in range(99999) %}{{ 'y' * 99 }}{% endfor %}",   # 10 MB of output
    "{% for i in range(99999) %}{% if range(9999)|sum < 0 %}z{% endif %}{% endfor %}",  # a billion additions
])
def test_a_template_that_builds_too_much_is_stopped_and_the_finding_stands(tmp_path, message):
    code, _, err, seconds = _report(tmp_path, _rule(tmp_path, message=message))
    assert code == 0, err
    assert seconds < REPORT_SECONDS
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    finding = next(f for f in report["findings"] if f["rule"] == "hostile-rule")
    assert finding["message"].startswith("(message could not be rendered:")
    assert len(finding["message"]) < MAX_TEMPLATE_SIZE


@pytest.mark.parametrize("message", [
    "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(30) }}",
    "{% for a in range(3000) %}{% for b in range(3000) %}{% endfor %}{% endfor %}",
])
def test_a_template_that_recurses_or_nests_loops_is_refused_naming_the_rule(tmp_path, message):
    code, _, err, _ = _report(tmp_path, _rule(tmp_path, message=message))
    one_line_error(code, err, "hostile-rule", "invalid template")


def test_cel_loops_nested_three_deep_are_refused_naming_the_rule(tmp_path):
    ten = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"
    condition = f"{ten}.all(a, {ten}.all(b, {ten}.exists(c, c >= 0)))"
    code, _, err, _ = _report(tmp_path, _rule(tmp_path, condition=condition))
    one_line_error(code, err, "hostile-rule", "condition", "nested 3 deep")


def test_cel_loops_two_deep_still_work(tmp_path):
    ten = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"
    condition = f"{ten}.all(a, {ten}.exists(b, b >= a)) && step.time_ms > 0.0"
    code, _, err, _ = _report(tmp_path, _rule(tmp_path, condition=condition, message="fired {{ 'ab' * 2 }}"))
    assert code == 0, err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert any(f["message"] == "fired abab" for f in report["findings"])


def test_an_overlong_cel_expression_is_refused(tmp_path):
    condition = " || ".join(["step.time_ms > 0.0"] * 200)
    code, _, err, _ = _report(tmp_path, _rule(tmp_path, condition=condition))
    one_line_error(code, err, "hostile-rule", "characters")


def test_a_config_nested_past_the_recursion_limit_is_one_line_naming_it(tmp_path, monkeypatch):
    """tomllib parses nested arrays recursively (TOML 1.0 sets no depth limit)."""
    (tmp_path / "advisor.toml").write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = advisor("report", PROFILE, "-o", tmp_path / "out", "--no-color")
    one_line_error(code, err, str(tmp_path / "advisor.toml"), "nested too deeply")


def test_rules_list_and_explain_print_a_user_rules_texts_without_escapes(tmp_path):
    """A rule's title and explanation are its author's text: on the terminal
    without escapes (OSC 52, title, screen clear) or forged lines."""
    evil = "t\x1b]52;c;cHduZWQ=\x07\x1b]0;x\x07\x1b[2J\r\nforged: line"
    folder = _rule(tmp_path)
    text = (folder / "hostile.yaml").read_text()
    text = text.replace("title: a rule from the repository under test", f"title: {json.dumps(evil)}")
    (folder / "hostile.yaml").write_text(text.replace("what: a,", f"what: {json.dumps(evil)},"))
    code, listed, err = advisor("rules", "list", "--rules", folder)
    assert code == 0, err
    assert "hostile-rule" in listed and "\x1b" not in listed and "\r" not in listed
    assert not [line for line in listed.splitlines() if line.startswith("forged")]
    code, explained, err = advisor("rules", "explain", "hostile-rule", "--rules", folder)
    assert code == 0, err
    assert "hostile-rule" in explained and "\x1b" not in explained and "\r" not in explained


def test_a_fifo_named_like_a_rule_file_is_one_line_not_a_hang(tmp_path):
    """A rule folder is listed by suffix; a FIFO in it would block the read
    until someone writes to it."""
    folder = tmp_path / "rules"
    folder.mkdir()
    os.mkfifo(folder / "planted.yaml")
    code, _, err = advisor("rules", "list", "--rules", folder)
    one_line_error(code, err, "planted.yaml", "not a regular file")
