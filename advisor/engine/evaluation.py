"""The rule engine: rules (YAML) evaluated over metrics -> ranked findings.

Conditions and expressions are CEL (:mod:`advisor.engine.cel`); messages and
fix snippets are templates (:mod:`advisor.engine.render`). The CEL
activation has one map per metric namespace (the first part of every
registered metric id: ``step``, ``comm``, ``pipeline``, ...), so
``step.free_ratio`` in a rule is the metric ``step.free_ratio``; ``params``
holds the rule's thresholds after user overrides.

Severity ``auto`` follows the share of step time at stake (the rule's
``time_at_stake``, else its estimated gain, in % of the step): critical >= 50,
high >= 25, medium >= 10, low >= 3, else info; with neither it is medium.
When the time at stake is the value of one metric that is a mean over steps
with a standard error (``Metric.stderr``), a band above medium also needs the
share the steps support with ``STAKE_CONFIDENCE`` one-sided confidence (the
mean less Student's t quantile times the standard error: the finding's
``time_at_stake_low_ms``) to reach it; otherwise the finding is medium.
One run's steps vary, and so do runs: a share that only its mean puts above
25% is not called high (nor fails a gate on high) on the strength of a few
slow steps.
The estimated gain is clamped to [0, time at stake] and to the step time;
its expression sees the time at stake (ms, as clamped) as ``time_at_stake``
(:data:`STAKE`), so a gain that is a share of it names it once. A case the
rule's parts share (the gain, the message and the fixes all turning on it)
is written once as a ``let`` expression (:func:`_let`), which the others
read as ``let.NAME``.

Order (:func:`rank_findings`): what to fix first, i.e. the largest expected
gain first (:func:`expected_gain_ms`: the estimated gain times the
confidence); ties by the gain, then severity, then confidence. Severity
says how much of the step the problem holds, the gain what its fix gives
back, and the two differ: 50% of a step in float32 matrix work (critical)
gives back ~25% with mixed precision, a 35% data wait (high) nearly all of
it with more loader workers. The confidence weighs the gain: a cause only
inferred from its symptom (confidence at most ``INFERRED_CONFIDENCE``)
follows a measured one that gives back more than half as much. Findings
without a gain estimate follow, by severity.

An expression that fails on a profile's metrics leaves its part of the
finding empty (no gain, no scope); a condition that fails is a skip with the
reason. Checked evaluation (``checked=True``: rule validation on the rule's
own examples) raises :class:`ExpressionError` instead.

Direct evidence (a rule's ``confirm``): when its ``direct`` expression is
false (or cannot be evaluated) the cause is inferred from its symptom: the
finding's confidence is capped at ``INFERRED_CONFIDENCE`` (schema), its
title says it is inferred (``inferred_title``), its ``confirm.text`` (what
it is inferred from, what would confirm it) is appended to the message, and
templates see ``inferred`` true so the
message can leave out what only the direct evidence would show.

Evidence: a finding's ``evidence`` holds the value of every metric its rule
reads (:func:`metric_refs`: condition, time at stake, gain, confidence,
scope, direct-evidence check, message, confirm text, fixes) that the
profile has, plus ``step.time_ms`` when the engine read it to express the
gain and time at stake as shares of the step.

One cause, one finding (:mod:`advisor.engine.pools`): findings whose rules
claim the same time pool are merged into one, and the primary findings'
gains are clamped to the step time together.

Fixes per platform: a finding carries the rule's fix for the run's framework
(:func:`_pick_fix`; for torch_npu the PyTorch one where the rule has no
torch_npu fix). On an Ascend device whose framework the profile does not
record, the job ran either PyTorch with torch_npu or MindSpore: the finding
carries both fixes, each under its condition (:data:`ENGINE_NOTES`
``if_torch_npu``, ``if_mindspore``; only the first where the rule has no
fix that serves MindSpore). Templates see ``run``: the run's
``framework``, ``device``, ``device_model``, ``compute_capability`` and
``bf16_tensor_cores`` (:class:`advisor.profile.RunMeta`; None where the
profile does not record them), so a fix can name what the device supports.

Language: a rule's texts arrive already translated (``load_rules(lang=)``
applies the overlay); ``lang`` here only picks the language of the engine's
own texts (:data:`SKIP_REASONS`, :data:`ENGINE_NOTES`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from advisor.engine import cel, pools, render
from advisor.engine.schema import INFERRED_CONFIDENCE, Rule, caveat_holds, caveat_text
from advisor.errors import ConfigError
from advisor.metrics import metric_namespaces
from advisor.model import SEVERITY_ORDER, Finding, FindingScope, Fix, Metric
from advisor.profile import Skip

SEVERITY_BY_GAIN = ((50.0, "critical"), (25.0, "high"), (10.0, "medium"), (3.0, "low"))
#: One-sided confidence of the time at stake a severity above medium rests on
#: (module doc); 90%, as the recurrence bound of ``anomaly.step_outlier_recurring_ms``.
STAKE_CONFIDENCE = 0.9
SCOPE_FIELDS = ("ranks", "steps", "ops")
#: Metric the engine reads for every finding: shares of the step, clamping.
STEP_TIME = "step.time_ms"
#: The name under which a rule's ``estimated_gain`` sees its time at stake (ms).
STAKE = "time_at_stake"

#: The engine's own texts (why a rule was not evaluated), per language.
SKIP_REASONS: dict[str, dict[str, str]] = {
    "en": {
        "not_applicable": "does not apply to {framework}/{device}",
        "needs": "needs metric(s) {metrics}",
        "needs_any": "needs one of {metrics}",
        "condition_failed": "condition could not be evaluated: {error}",
        "rule": "rule {name}",
    },
    "zh": {
        "not_applicable": "不适用于 {framework}/{device}",
        "needs": "缺少指标 {metrics}",
        "needs_any": "至少需要以下指标之一：{metrics}",
        "condition_failed": "条件无法求值：{error}",
        "rule": "规则 {name}",
    },
}


#: Severity names inside the engine's and the verdict's sentences, per language.
SEVERITY_WORDS: dict[str, dict[str, str]] = {
    "en": {"info": "info", "low": "low", "medium": "medium", "high": "high", "critical": "critical"},
    "zh": {"info": "提示", "low": "低", "medium": "中", "high": "高", "critical": "严重"},
}


#: The engine's own texts on findings, per language.
ENGINE_NOTES: dict[str, dict[str, str]] = {
    "en": {
        "gain_clamped": "The estimated gain was lowered from {was} to {now} ms per step: the findings' gains "
                        "together may not exceed the {step} ms step, and this finding's confidence is among "
                        "the lowest.",
        "inferred_title": "{title} (inferred)",
        "symptom_of": "These are the steps of the finding it contributes to ({cause}): that finding's fix is the "
                      "one to apply.",
        "severity_held": "Medium, not {band}: {pct}% of the step is at stake on average, but its steps vary; "
                         "at {conf}% confidence they support {low}%.",
        "if_torch_npu": "If the job runs PyTorch with torch_npu: {text}",
        "if_mindspore": "If it runs MindSpore: {text}",
        "either_framework": "torch_npu or MindSpore (the profile does not record which)",
    },
    "zh": {
        "gain_clamped": "预计收益已从每步 {was} ms 下调为 {now} ms：各问题的预计收益之和不能超过 {step} ms 的迭代时间，"
                        "而该问题的置信度较低。",
        "inferred_title": "{title}（推断）",
        "symptom_of": "这些就是它所归属的问题（{cause}）中的迭代：应采用那个问题的修复方法。",
        "severity_held": "定为中等而非{band}：平均 {pct}% 的迭代时间受影响，但各步差异较大，"
                         "按 {conf}% 置信度只能确认 {low}%。",
        "if_torch_npu": "若作业使用 PyTorch（torch_npu）：{text}",
        "if_mindspore": "若使用 MindSpore：{text}",
        "either_framework": "torch_npu 或 MindSpore（性能数据未记录框架）",
    },
}


def engine_note(lang: str, key: str, **kw: object) -> str:
    """One of the engine's texts (:data:`ENGINE_NOTES`) in ``lang``."""
    table = ENGINE_NOTES.get(lang, ENGINE_NOTES["en"])
    return table[key].format(**kw)


class ExpressionError(ConfigError):
    """A rule expression or template that cannot be evaluated (checked evaluation)."""


def _reason(lang: str, key: str, **kw: str) -> str:
    table = SKIP_REASONS.get(lang, SKIP_REASONS["en"])
    return table[key].format(**kw)


def namespaces(values: dict[str, Any]) -> dict[str, dict]:
    """Flat ``{"step.free_ratio": 0.3}`` -> nested ``{"step": {"free_ratio": 0.3}}``
    (every metric namespace present, empty when none of its metrics is)."""
    tree: dict[str, dict] = {ns: {} for ns in metric_namespaces()}
    for mid, value in values.items():
        if value is None:
            continue
        head, *rest = mid.split(".")
        node = tree.setdefault(head, {})
        for part in rest[:-1]:
            node = node.setdefault(part, {})
        node[rest[-1] if rest else head] = value
    return tree


@dataclass
class CompiledRule:
    rule: Rule
    params: dict[str, float]
    #: rule field (``condition``, ``estimated_gain``, ``scope.ranks``, ...) -> CEL program
    programs: Mapping[str, Any]

    def run(self, field: str, activation: dict) -> Any:
        return cel.run(self.programs[field], activation)


def _expressions(rule: Rule) -> dict[str, str]:
    """The rule's CEL expressions by field name."""
    exprs = {"condition": rule.condition}
    for field in ("time_at_stake", "estimated_gain", "confidence"):
        if getattr(rule, field):
            exprs[field] = getattr(rule, field)
    for name, expr in rule.let.items():
        exprs[f"let.{name}"] = expr
    for field in SCOPE_FIELDS:
        expr = getattr(rule.scope, field)
        if expr:
            exprs[f"scope.{field}"] = expr
    if rule.confirm is not None:
        exprs["confirm.direct"] = rule.confirm.direct
    return exprs


def compile_rule(rule: Rule, overrides: dict[str, float] | None = None, lazy: bool = False) -> CompiledRule:
    """Compile a rule's CEL expressions once; ConfigError on a bad expression
    or a parameter that is not a finite number (NaN makes every comparison
    false and so silences the rule). ``lazy``: parameters are checked now,
    but each expression is compiled when first run and templates are not
    checked here (``render`` parses them when a finding uses them): for
    rules that ``advisor rules validate`` and the test suite have checked
    already, the built-in ones, of which a run evaluates only those whose
    framework, device and metrics it has."""
    params = {k: float(p.default) for k, p in rule.params.items()}
    for key, value in (overrides or {}).items():
        if key not in params:
            raise ConfigError(f"rule {rule.name} has no parameter {key!r} (has: {sorted(params)})")
        params[key] = float(value)
    for key, value in params.items():
        if not math.isfinite(value):
            raise ConfigError(f"rule {rule.name}: params.{key}: {value} is not a finite number")
    programs = _Programs(rule.name, _expressions(rule))
    if lazy:
        return CompiledRule(rule=rule, params=params, programs=programs)
    for field in programs:
        programs[field]  # noqa: B018 - compiled now: a bad expression fails here
    for template in [rule.message, rule.confirm.text if rule.confirm else ""] + [f.code or "" for f in rule.fix.values()]:
        try:
            render.check(template)
        except Exception as exc:
            raise ConfigError(f"rule {rule.name}: invalid template ({exc})") from None
    return CompiledRule(rule=rule, params=params, programs=programs)


class _Programs(Mapping):
    """A rule's field -> CEL program, each compiled on first use; ConfigError
    naming the field when its expression does not compile."""

    def __init__(self, rule_name: str, expressions: dict[str, str]):
        self._rule = rule_name
        self._expressions = expressions
        self._programs: dict[str, Any] = {}

    def __getitem__(self, field: str) -> Any:
        program = self._programs.get(field)
        if program is None:
            expr = self._expressions[field]
            try:
                program = self._programs[field] = cel.compile_program(expr)
            except Exception as exc:  # celpy raises its own parse errors
                raise ConfigError(f"rule {self._rule}: {field}: invalid CEL ({str(exc).splitlines()[0]})") from None
        return program

    def __contains__(self, field: object) -> bool:
        return field in self._expressions

    def __iter__(self):
        return iter(self._expressions)

    def __len__(self) -> int:
        return len(self._expressions)


def _applies(rule: Rule, framework: str, device: str) -> bool:
    fw = rule.applies_to.frameworks
    dev = rule.applies_to.devices
    return ("any" in fw or framework in fw) and ("any" in dev or device in dev)


def evaluate_rule(
    compiled: CompiledRule,
    values: dict[str, Any],
    *,
    framework: str = "unknown",
    device: str = "unknown",
    lang: str = "en",
    checked: bool = False,
    run: dict[str, Any] | None = None,
    spread: dict[str, tuple[float, int]] | None = None,
) -> tuple[Finding | None, Skip | None]:
    """Evaluate one rule over flat metric values -> (finding or None, skip or
    None). ``checked``: an expression or template that fails raises
    :class:`ExpressionError` naming the rule field (see the module doc).
    ``run``: what templates see as ``run`` (module doc; ``run_context``).
    ``spread``: metric id -> (standard error, steps) of the metrics that
    are means over steps (``Metric.stderr``, ``Metric.samples``)."""
    rule = compiled.rule
    what = _reason(lang, "rule", name=rule.name)
    if not _applies(rule, framework, device):
        return None, Skip(what=what, reason=_reason(lang, "not_applicable", framework=framework, device=device))
    missing = [m for m in rule.requires if values.get(m) is None]
    if missing:
        return None, Skip(what=what, reason=_reason(lang, "needs", metrics=", ".join(missing)))
    if rule.requires_any and all(values.get(m) is None for m in rule.requires_any):
        return None, Skip(what=what, reason=_reason(lang, "needs_any", metrics=", ".join(rule.requires_any)))
    tree = namespaces(values)
    activation = cel.activation({**tree, "params": compiled.params})
    try:
        fired = compiled.run("condition", activation)
    except Exception as exc:
        if checked:
            raise ExpressionError(f"condition: {_one_line(exc)}") from None
        return None, Skip(what=what, reason=_reason(lang, "condition_failed", error=str(exc)))
    if fired is not True:
        return None, None
    platform = {**run_context(framework, device), **(run or {})}
    return _finding(compiled, values, tree, activation, platform, lang, checked, spread or {}), None


def run_context(framework: str = "unknown", device: str = "unknown", device_model: str | None = None,
                compute_capability: str | None = None, bf16_tensor_cores: bool | None = None) -> dict[str, Any]:
    """What rule templates see as ``run`` (module doc); the pipeline fills it
    from the run's :class:`~advisor.profile.RunMeta`."""
    return {"framework": framework, "device": device, "device_model": device_model,
            "compute_capability": compute_capability, "bf16_tensor_cores": bf16_tensor_cores}


def _finding(compiled: CompiledRule, values, tree, activation, platform: dict, lang: str,
             checked: bool, spread: dict[str, tuple[float, int]]) -> Finding:
    rule = compiled.rule
    step_ms = values.get(STEP_TIME)
    gain_pct = None
    stake_ms = _ms(compiled, "time_at_stake", activation, step_ms, checked)
    activation = activation if stake_ms is None else {**activation, **cel.activation({STAKE: stake_ms})}
    let = _let(compiled, activation, checked)
    if let:
        activation = {**activation, **cel.activation({"let": let})}
    gain_ms = _ms(compiled, "estimated_gain", activation, step_ms, checked)
    if gain_ms is not None and stake_ms is not None:
        gain_ms = min(gain_ms, stake_ms)
    if gain_ms is not None and step_ms:
        gain_pct = round(100.0 * gain_ms / float(step_ms), 2)
    stake_pct = round(100.0 * stake_ms / float(step_ms), 2) if stake_ms is not None and step_ms else None
    stake_low_ms = _stake_low(rule, stake_ms, values, spread)
    low_pct = 100.0 * stake_low_ms / float(step_ms) if stake_low_ms is not None and step_ms else None
    confidence = _number(compiled, "confidence", activation, checked)
    direct = _direct_evidence(compiled, activation, checked)
    if confidence is not None:
        confidence = min(1.0, max(0.0, confidence))
    if direct is False:
        confidence = INFERRED_CONFIDENCE if confidence is None else min(confidence, INFERRED_CONFIDENCE)
    if confidence is not None:
        confidence = round(confidence, 3)
    scope = FindingScope()
    for field in SCOPE_FIELDS:
        items = _scope_items(compiled, field, activation, checked)
        if items is not None:
            setattr(scope, field, items)
    context = {
        **tree,
        "params": render.Params(compiled.params),
        "gain_ms": gain_ms,
        "gain_pct": gain_pct,
        "stake_ms": stake_ms,
        "stake_pct": stake_pct,
        "inferred": direct is False,
        "run": platform,
        "let": render.Lets(let),
    }
    message = _render(rule.message, context, "message", checked).strip()
    if direct is False:
        message = _sentences([message, _render(rule.confirm.text, context, 'confirm.text', checked).strip()])
    fix_model = _fix(rule, platform, context, lang, checked)
    severity = _severity(rule, stake_pct if stake_pct is not None else gain_pct, low_pct)
    caveats = [caveat_text(c) for c in rule.caveats if caveat_holds(c, platform["framework"], platform["device"])]
    if rule.severity == "auto" and stake_pct is not None and _band(stake_pct) != severity:
        band = SEVERITY_WORDS.get(lang, SEVERITY_WORDS["en"])[_band(stake_pct)]
        caveats.append(engine_note(lang, "severity_held", band=band, pct=f"{stake_pct:.1f}", low=f"{low_pct:.1f}",
                                   conf=f"{100 * STAKE_CONFIDENCE:g}"))
    title = engine_note(lang, "inferred_title", title=rule.title) if direct is False else rule.title
    read = metric_refs(rule) | ({STEP_TIME} if stake_pct is not None or gain_pct is not None else set())
    evidence = {m: values[m] for m in sorted(read) if values.get(m) is not None}
    return Finding(
        rule=rule.name,
        id=rule.id,
        title=title,
        severity=severity,
        message=message,
        estimated_gain_ms=gain_ms,
        estimated_gain_pct=gain_pct,
        time_at_stake_ms=stake_ms,
        time_at_stake_low_ms=stake_low_ms,
        confidence=confidence,
        scope=scope,
        evidence=evidence,
        fix=fix_model,
        caveats=caveats,
        claims=rule.pool,
        direct_evidence=direct,
    )


def _direct_evidence(compiled: CompiledRule, activation: dict, checked: bool) -> bool | None:
    """Whether the profile holds the rule's direct evidence (its
    ``confirm.direct``); None for a rule without one. An expression that
    fails counts as false: what cannot be checked is not evidence."""
    if "confirm.direct" not in compiled.programs:
        return None
    try:
        return compiled.run("confirm.direct", activation) is True
    except Exception as exc:
        if checked:
            raise ExpressionError(f"confirm.direct: {_one_line(exc)}") from None
        return False


def _let(compiled: CompiledRule, activation: dict, checked: bool) -> dict[str, Any]:
    """The rule's ``let`` values, in order, each seeing the ones before it;
    one that fails is left out (checked: ExpressionError), so an expression
    or template that reads it fails or tests it undefined."""
    values: dict[str, Any] = {}
    for name in compiled.rule.let:
        seen = {**activation, **cel.activation({"let": values})} if values else activation
        try:
            values[name] = compiled.run(f"let.{name}", seen)
        except Exception as exc:
            if checked:
                raise ExpressionError(f"let.{name}: {_one_line(exc)}") from None
    return values


def _number(compiled: CompiledRule, field: str, activation: dict, checked: bool) -> float | None:
    """The number expression ``field`` gives; None when the rule has none or
    it fails (checked: ExpressionError)."""
    if field not in compiled.programs:
        return None
    try:
        return float(compiled.run(field, activation))
    except Exception as exc:
        if checked:
            raise ExpressionError(f"{field}: {_one_line(exc)}") from None
        return None


def _ms(compiled: CompiledRule, field: str, activation: dict, step_ms, checked: bool) -> float | None:
    """A rule's ms expression, clamped to [0, step time]; None if absent/failing."""
    value = _number(compiled, field, activation, checked)
    if value is None:
        return None
    value = max(0.0, value)
    if step_ms:
        value = min(value, float(step_ms))
    return round(value, 3)


def _scope_items(compiled: CompiledRule, field: str, activation: dict, checked: bool) -> list | None:
    """The ranks, steps or op names scope expression ``field`` gives; None
    when the rule has none or it fails (checked: ExpressionError)."""
    key = f"scope.{field}"
    if key not in compiled.programs:
        return None
    cast = str if field == "ops" else (lambda x: int(float(x)))
    try:
        got = compiled.run(key, activation)
        items = got if isinstance(got, list) else [got]
        return [cast(x) for x in items if x is not None]
    except Exception as exc:
        if checked:
            raise ExpressionError(f"{key}: {_one_line(exc)}") from None
        return None


def _render(template: str, context: dict, field: str, checked: bool) -> str:
    """The rendered template; unchecked, a template that fails on this
    profile (``{{ 1/0 }}``, an undefined name's attribute) gives a line
    saying so instead, and the finding stands."""
    if not checked:
        try:
            return render.render(template, context)
        except Exception as exc:  # noqa: BLE001 -- a user rule's template must not end the run
            return f"({field} could not be rendered: {_one_line(exc)})"
    try:
        return render.render(template, context, checked=True)
    except Exception as exc:
        raise ExpressionError(f"{field}: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _metric_ref_pattern() -> re.Pattern:
    return re.compile(r"\b(" + "|".join(metric_namespaces()) + r")\.([a-z0-9_]+)\b")


def metric_refs(rule: Rule) -> set[str]:
    """Metric ids a rule reads: requires, requires_any, and ``namespace.name``
    references in its expressions (condition, time at stake, gain,
    confidence, scope, direct-evidence check), message, confirm text and
    fixes. These are a finding's evidence."""
    texts = [rule.message, *_expressions(rule).values(), rule.confirm.text if rule.confirm else ""]
    texts += [part for f in rule.fix.values() for part in (f.text, f.code or "")]
    pattern = _metric_ref_pattern()
    return {f"{a}.{b}" for text in texts for a, b in pattern.findall(text)} | rule.metric_ids()


#: The fixes that serve a framework, nearest first: torch_npu and PyTorch
#: stand in for each other, ``default`` is framework-neutral; a PyTorch fix
#: is no MindSpore fix.
_FIX_ORDER = {
    "torch_npu": ("torch_npu", "pytorch", "default"),
    "pytorch": ("pytorch", "torch_npu", "default"),
    "mindspore": ("mindspore", "default"),
}


def _pick_fix(rule: Rule, framework: str, *, any_fix: bool = True):
    """(key, fix text) of the rule's fix for ``framework`` (``_FIX_ORDER``;
    an unknown framework: PyTorch's, else ``default``); with ``any_fix``,
    else the rule's first fix. None when none serves."""
    order = _FIX_ORDER.get(framework, (framework, "pytorch", "default"))
    for key in (*order, *(rule.fix if any_fix else ())):
        if key in rule.fix:
            return key, rule.fix[key]
    return None


#: Sentence ends after which Chinese text goes on without a space.
_FULL_WIDTH_STOPS = ("。", "！", "？", "）", "；")


def _sentences(parts: list[str]) -> str:
    """Sentences one after another: a space between them, none after a
    Chinese full stop."""
    out = parts[0]
    for part in parts[1:]:
        out += ("" if out.endswith(_FULL_WIDTH_STOPS) else " ") + part
    return out


def _fix(rule: Rule, platform: dict, context: dict, lang: str, checked: bool) -> Fix | None:
    """The finding's fix (module doc, "Fixes per platform"), rendered."""
    framework = platform["framework"]
    if framework == "unknown" and platform["device"] == "ascend":
        npu = _pick_fix(rule, "torch_npu", any_fix=False)
        ms = _pick_fix(rule, "mindspore", any_fix=False)
        if npu is not None and (ms is None or ms[0] != npu[0]):
            parts = [("if_torch_npu", "torch_npu", *_rendered(*npu, context, checked)[1:])]
            if ms is not None:
                parts.append(("if_mindspore", "MindSpore", *_rendered(*ms, context, checked)[1:]))
            text = _sentences([engine_note(lang, note, text=fix_text) for note, _, fix_text, _ in parts])
            codes = [f"# {label}\n{code}" for _, label, _, code in parts if code]
            return Fix(framework=engine_note(lang, "either_framework"), text=text,
                       code="\n\n".join(codes) or None)
    picked = _pick_fix(rule, framework)
    if picked is None:
        return None
    key, text, code = _rendered(*picked, context, checked)
    return Fix(framework=key, text=text, code=code)


def _rendered(key: str, fix, context: dict, checked: bool) -> tuple[str, str, str | None]:
    """(key, text, code) of one of a rule's fixes, its templates rendered."""
    code = _render(fix.code, context, f"fix.{key}.code", checked).rstrip() if fix.code else None
    return key, _render(fix.text, context, f"fix.{key}.text", checked).strip(), code


def _stake_low(rule: Rule, stake_ms: float | None, values: dict[str, Any],
               spread: dict[str, tuple[float, int]]) -> float | None:
    """The time at stake the steps support with ``STAKE_CONFIDENCE`` (module
    doc), when the rule's ``time_at_stake`` came to the value of one metric
    it reads that has a standard error (the metric itself, or the branch a
    conditional picked); of several such, the lowest bound."""
    if stake_ms is None or not rule.time_at_stake:
        return None
    refs = {f"{a}.{b}" for a, b in _metric_ref_pattern().findall(rule.time_at_stake)}
    picked = [spread[m] for m in refs & spread.keys()
              if isinstance(values.get(m), (int, float)) and round(float(values[m]), 3) == stake_ms]
    if not picked:
        return None
    from scipy.special import stdtrit  # Student's t quantile; only here

    margin = max(float(stdtrit(steps - 1, STAKE_CONFIDENCE)) * stderr for stderr, steps in picked)
    return round(max(0.0, stake_ms - margin), 3)


def _band(share_pct: float) -> str:
    for bound, level in SEVERITY_BY_GAIN:
        if share_pct >= bound:
            return level
    return "info"


def _severity(rule: Rule, share_pct: float | None, low_pct: float | None = None) -> str:
    """A rule's severity (module doc): its own, or the band of ``share_pct``;
    above medium only when ``low_pct`` (if known) reaches the band too."""
    if rule.severity != "auto":
        return rule.severity
    if share_pct is None:
        return "medium"
    level = _band(share_pct)
    if low_pct is not None and SEVERITY_ORDER[level] > SEVERITY_ORDER["medium"]:
        level = max("medium", _band(low_pct), key=SEVERITY_ORDER.__getitem__)
    return level


@dataclass
class RuleOutcome:
    """What became of one rule on a run: ``fired``, ``passed`` (its
    condition was evaluated and is false), ``skipped`` (metrics it needs are
    missing, or its condition failed) or ``not_applicable`` (framework or
    device)."""

    rule: Rule
    status: Literal["fired", "passed", "skipped", "not_applicable"]
    missing: list[str] = dataclasses.field(default_factory=list)
    reason: str | None = None

    @property
    def evaluated(self) -> bool:
        return self.status in ("fired", "passed")


@dataclass
class Evaluation:
    """All rules over one run's metrics: the findings (merged by time pool,
    their gains clamped together, ranked), the skip reasons, and each
    rule's outcome (what the verdict weighs)."""

    findings: list[Finding]
    skipped: list[Skip]
    outcomes: list[RuleOutcome]


def evaluate_run(
    rules: list[CompiledRule],
    metrics: dict[str, Metric],
    *,
    framework: str = "unknown",
    device: str = "unknown",
    lang: str = "en",
    run: dict[str, Any] | None = None,
) -> Evaluation:
    """All rules over all metrics (see module doc); skip reasons in ``lang``;
    ``run``: see :func:`evaluate_rule`."""
    values = {mid: m.value for mid, m in metrics.items()}
    spread = {mid: (m.stderr, m.samples) for mid, m in metrics.items() if m.stderr is not None and m.samples}
    findings: list[Finding] = []
    skipped: list[Skip] = []
    outcomes: list[RuleOutcome] = []
    for compiled in rules:
        rule = compiled.rule
        finding, skip = evaluate_rule(compiled, values, framework=framework, device=device, lang=lang, run=run,
                                      spread=spread)
        if finding:
            findings.append(finding)
            outcomes.append(RuleOutcome(rule, "fired"))
        elif skip is None:
            outcomes.append(RuleOutcome(rule, "passed"))
        elif not _applies(rule, framework, device):
            outcomes.append(RuleOutcome(rule, "not_applicable", reason=skip.reason))
        else:
            missing = [m for m in rule.requires if values.get(m) is None]
            if not missing and rule.requires_any and all(values.get(m) is None for m in rule.requires_any):
                missing = list(rule.requires_any)
            outcomes.append(RuleOutcome(rule, "skipped", missing=missing, reason=skip.reason))
        if skip:
            skipped.append(skip)
    symptoms = {c.rule.name for c in rules if c.rule.symptom}
    merged = pools.merge(findings, rank_key=lambda f: (f.rule in symptoms, *_rank_key(f)))
    pools.leave_fixes_to_causes(merged, symptoms, note=lambda **kw: engine_note(lang, "symptom_of", **kw))
    pools.clamp_total(merged, values.get(STEP_TIME), note=lambda **kw: engine_note(lang, "gain_clamped", **kw))
    return Evaluation(findings=rank_findings(merged), skipped=skipped, outcomes=outcomes)


def evaluate(rules: list[CompiledRule], metrics: dict[str, Metric], **options: str) -> tuple[list[Finding], list[Skip]]:
    """All rules over all metrics -> (ranked findings, skips): the findings
    and skips of :func:`evaluate_run` (``options``: its ``framework``,
    ``device`` and ``lang``)."""
    run = evaluate_run(rules, metrics, **options)
    return run.findings, run.skipped


def expected_gain_ms(f: Finding) -> float | None:
    """A finding's estimated gain weighed by how sure it is: gain x
    confidence (a finding without a confidence counts whole); None without
    a gain."""
    if f.estimated_gain_ms is None:
        return None
    return f.estimated_gain_ms * (1.0 if f.confidence is None else f.confidence)


def _rank_key(f: Finding) -> tuple:
    expected = expected_gain_ms(f)
    return (expected is None, -(expected or 0.0), -(f.estimated_gain_ms or 0.0),
            -SEVERITY_ORDER[f.severity], -(f.confidence or 0.0), f.rule)


def rank_findings(findings: list[Finding]) -> list[Finding]:
    """``findings`` in report order (see module doc)."""
    return sorted(findings, key=_rank_key)
