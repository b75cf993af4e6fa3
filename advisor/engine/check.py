"""`advisor rules validate`: everything a rule file must get right.

Checks, per file: YAML and schema (pydantic), CEL expressions and Jinja2
templates compile, every metric id it names (requires, requires_any,
examples, and ``namespace.name`` references in expressions) is a known
metric, and each example fires or passes as it says, with every expression
and template evaluating on it (checked evaluation: a misspelt parameter is
an error, not a finding without its gain) and, where the example states
them, the finding's severity and estimated gain. A rule's language
overlays (``zh/<same name>.yaml`` next to it) are checked too: schema, keys
that exist in the rule, unchanged code, no numbers of their own, and each
firing example renders in that language. Built-in rules must have a
complete overlay for every language.
"""

from __future__ import annotations

from pathlib import Path

from advisor.engine.evaluation import CompiledRule, ExpressionError, compile_rule, evaluate_rule, metric_refs
from advisor.engine.loader import (
    DEFAULT_LANG,
    LANGS,
    apply_overlay,
    builtin_rule_files,
    overlay_path,
    overlay_problems,
    read_overlay,
    read_rule,
)
from advisor.engine.schema import Example, Rule
from advisor.errors import ConfigError
from advisor.metrics import REGISTRY


def referenced_metrics(rule: Rule) -> set[str]:
    """Metric ids a rule names anywhere, its examples included."""
    found = metric_refs(rule)
    for example in rule.examples:
        found |= set(example.metrics)
    return found


def check_rule(rule: Rule) -> list[str]:
    """Problems with one parsed rule (empty when it is valid)."""
    problems = []
    unknown = sorted(m for m in referenced_metrics(rule) if m not in REGISTRY)
    if unknown:
        problems.append(f"unknown metric id(s): {', '.join(unknown)}")
    compiled = compile_rule(rule)
    for example in rule.examples:
        problems += [f"example {example.name!r}: {p}" for p in check_example(compiled, example)]
    return problems


def check_example(compiled: CompiledRule, example: Example) -> list[str]:
    """Problems of one example of the compiled rule: an expression or
    template that does not evaluate on it, the wrong outcome, or a severity
    or gain other than the example states."""
    try:
        finding, skip = evaluate_rule(compiled, example.metrics, framework=example.framework,
                                        device=example.device, checked=True)
    except ExpressionError as exc:
        return [str(exc)]
    fired = finding is not None
    if fired != (example.expect == "fire"):
        why = f" ({skip.reason})" if skip else ""
        return [f"expected {example.expect}, got {'fire' if fired else 'pass'}{why}"]
    problems = []
    if finding is not None and example.severity is not None and finding.severity != example.severity:
        problems.append(f"expected severity {example.severity}, got {finding.severity}")
    if finding is not None and example.gain_ms is not None:
        gain = finding.estimated_gain_ms
        if gain is None or abs(gain - example.gain_ms) > example.gain_tolerance_ms:
            problems.append(f"expected an estimated gain of {example.gain_ms:g} ms "
                            f"(+- {example.gain_tolerance_ms:g}), got {'none' if gain is None else f'{gain:g} ms'}")
    return problems


def check_overlay(rule: Rule, rule_file: Path, lang: str, *, required: bool) -> list[str]:
    """Problems with the ``lang`` overlay of ``rule`` (read from ``rule_file``),
    each ``overlay-file: problem``; a missing overlay is one only when
    ``required``."""
    path = overlay_path(rule_file, lang)
    if not path.is_file():
        return [f"{path}: missing ({lang} texts of {rule.name})"] if required else []
    try:
        overlay = read_overlay(path)
    except ConfigError as exc:
        return [str(exc)]
    problems = [f"{path}: {p}" for p in overlay_problems(rule, overlay, complete=required)]
    if problems:
        return problems
    compiled = compile_rule(apply_overlay(rule, overlay))
    for example in rule.examples:
        if example.expect != "fire":
            continue
        try:
            finding, _ = evaluate_rule(compiled, example.metrics, framework=example.framework,
                                        device=example.device, checked=True)
        except Exception as exc:  # a template error names the overlay
            problems.append(f"{path}: example {example.name!r}: {str(exc).splitlines()[0]}")
            continue
        if finding is None:
            continue
        for text in (finding.title, finding.message, finding.fix.text if finding.fix else ""):
            if "{{" in text or "{%" in text:
                problems.append(f"{path}: example {example.name!r}: unrendered template in {text[:60]!r}")
    return problems


def check_rules(paths: list[Path]) -> tuple[list[str], int]:
    """Validate rule files (built-in ones when ``paths`` is empty).

    Returns one-line problems ``file: problem`` and the number of files read.
    """
    files: list[Path] = []
    for path in paths or builtin_rule_files():
        path = Path(path)
        files.extend(sorted(path.glob("*.y*ml")) if path.is_dir() else [path])
    problems: list[str] = []
    builtin_files = {p.resolve() for p in builtin_rule_files()}
    seen: dict[str, Path] = {}
    builtin = {} if not paths else {r.id: p for p in builtin_rule_files() for r in [read_rule(p)]}
    for path in files:
        try:
            rule = read_rule(path)
            problems += [f"{path}: {p}" for p in check_rule(rule)]
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        shipped = not paths or path.resolve() in builtin_files
        for lang in LANGS:
            if lang != DEFAULT_LANG:
                problems += check_overlay(rule, path, lang, required=shipped)
        for key in (rule.id, rule.name):
            if key in seen:
                problems.append(f"{path}: {key} is already used by {seen[key]}")
            seen[key] = path
        if rule.id in builtin and builtin[rule.id].resolve() != path.resolve():
            problems.append(f"{path}: id {rule.id} is taken by built-in rule {builtin[rule.id].name}")
    return problems, len(files)
