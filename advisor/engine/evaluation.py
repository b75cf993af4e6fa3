"""The rule engine: rules (YAML) evaluated over metrics -> ranked findings.

Conditions and expressions are CEL (cel-python), never Python ``eval``.
The CEL activation has one map per metric namespace (``step``, ``comm``,
``data``, ``ops``, ``cluster``, ``anomaly``), so ``step.free_ratio`` in a rule
is the metric ``step.free_ratio``; numbers are doubles. ``params`` holds the
rule's thresholds after user overrides.

Severity ``auto`` follows the share of step time at stake (the rule's
``time_at_stake``, else its estimated gain, in % of the step): critical >= 50,
high >= 25, medium >= 10, low >= 3, else info; with neither it is medium.
The estimated gain is clamped to [0, time at stake] and to the step time.

Order (:func:`rank_findings`): what to fix first, i.e. the largest estimated
gain first; ties by severity, then confidence. Severity says how much of the
step the problem holds, the gain what its fix gives back, and the two
differ: 50% of a step in float32 matrix work (critical) gives back ~25%
with mixed precision, a 35% data wait (high) nearly all of it with more
loader workers. Findings without a gain estimate follow, by severity.

Language: a rule's texts arrive already translated (``load_rules(lang=)``
applies the overlay); ``lang`` here only picks the language of the engine's
own skip reasons (:data:`SKIP_REASONS`).
"""

from __future__ import annotations

import io
import math
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import celpy
from celpy import celtypes
from jinja2 import Undefined
from jinja2.sandbox import SandboxedEnvironment

from advisor.engine.schema import Rule
from advisor.errors import ConfigError
from advisor.model import SEVERITY_ORDER, Finding, FindingScope, Fix, Metric
from advisor.profile import Skip
from advisor.runtime import cache

NAMESPACES = ("step", "comm", "data", "ops", "cluster", "anomaly")
SEVERITY_BY_GAIN = ((50.0, "critical"), (25.0, "high"), (10.0, "medium"), (3.0, "low"))

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


def _reason(lang: str, key: str, **kw: str) -> str:
    table = SKIP_REASONS.get(lang, SKIP_REASONS["en"])
    return table[key].format(**kw)


@lru_cache(maxsize=1)
def _cel() -> celpy.Environment:
    """The CEL environment, built on first use. celpy builds its CEL parser
    (a lark LALR parser: computing its tables takes about 0.3 s) once per
    process; it comes from advisor's cache (:mod:`advisor.runtime.cache`) when a copy
    made by the same celpy, lark and Python is there, and is stored there
    otherwise."""
    from celpy.celparser import CELParser

    entry = None
    if getattr(CELParser, "CEL_PARSER", False) is None:  # not built yet (and a celpy that keeps it there)
        entry = _cel_parser_entry()
        data = cache.read(entry) if entry else None
        if data is not None:
            import lark

            try:
                CELParser.CEL_PARSER = lark.Lark.load(io.BytesIO(data))
                entry = None
            except Exception:  # noqa: BLE001 -- a damaged entry: build the parser and store it again
                CELParser.CEL_PARSER = None
    env = celpy.Environment()
    if entry and CELParser.CEL_PARSER is not None:
        buf = io.BytesIO()
        try:
            CELParser.CEL_PARSER.save(buf)
        except Exception:  # noqa: BLE001 -- no cache entry then
            return env
        cache.write(entry, buf.getvalue())
    return env


def _cel_parser_entry() -> str | None:
    """The cache entry name of the CEL parser of this celpy, lark and Python."""
    import lark
    from celpy import celparser

    try:
        source = Path(celparser.__file__)
        name = cache.key(source.read_bytes(), (source.parent / "cel.lark").read_bytes(),
                         lark.__version__, sys.version)
    except (OSError, TypeError, AttributeError):
        return None
    return f"cel-parser-{name}.pickle"


_JINJA = SandboxedEnvironment(autoescape=False, trim_blocks=True, lstrip_blocks=True)


def _number(v: Any) -> float | None:
    """A template value as a finite float, else None (a metric the rule does
    not require may be absent -- a jinja Undefined -- or not a number)."""
    if v is None or isinstance(v, (bool, Undefined)):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _ms_filter(v: Any) -> str:
    f = _number(v)
    return f"{f:.2f} ms" if f is not None else "n/a"


def _pct_filter(v: Any) -> str:
    f = _number(v)
    return f"{100 * f:.1f}%" if f is not None else "n/a"


def _ranks_filter(v: Any) -> str:
    """Rank ids as runs: [0, 1, 2, 3, 7] -> "0-3, 7"."""
    items = v if isinstance(v, (list, tuple)) else [v]
    ids = sorted({int(x) for x in items if _number(x) is not None})
    runs: list[list[int]] = []
    for r in ids:
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs) or "n/a"


_JINJA.filters["ms"] = _ms_filter
_JINJA.filters["pct"] = _pct_filter
_JINJA.filters["ranks"] = _ranks_filter


def _cel_value(value: Any) -> Any:
    """Metric values for CEL: every number a double (rules compare freely)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return [_cel_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _cel_value(v) for k, v in value.items()}
    return value


def namespaces(values: dict[str, Any]) -> dict[str, dict]:
    """Flat ``{"step.free_ratio": 0.3}`` -> nested ``{"step": {"free_ratio": 0.3}}``."""
    tree: dict[str, dict] = {ns: {} for ns in NAMESPACES}
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
    programs: dict[str, Any]

    def run(self, key: str, activation: dict) -> Any:
        result = self.programs[key].evaluate(activation)
        if isinstance(result, celpy.CELEvalError):
            raise result
        return _py(result)


def _py(value: Any) -> Any:
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, (celtypes.IntType, celtypes.UintType)):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, (list, celtypes.ListType)):
        return [_py(v) for v in value]
    if isinstance(value, (dict, celtypes.MapType)):
        return {str(k): _py(v) for k, v in value.items()}
    return value


def compile_rule(rule: Rule, overrides: dict[str, float] | None = None) -> CompiledRule:
    """Compile a rule's CEL expressions once; ConfigError on a bad expression."""
    params = {k: float(p.default) for k, p in rule.params.items()}
    for key, value in (overrides or {}).items():
        if key not in params:
            raise ConfigError(f"rule {rule.name} has no parameter {key!r} (has: {sorted(params)})")
        params[key] = float(value)
    exprs = {"condition": rule.condition}
    if rule.estimated_gain:
        exprs["gain"] = rule.estimated_gain
    if rule.time_at_stake:
        exprs["stake"] = rule.time_at_stake
    if rule.confidence:
        exprs["confidence"] = rule.confidence
    for field in ("ranks", "steps", "ops"):
        expr = getattr(rule.scope, field)
        if expr:
            exprs[f"scope.{field}"] = expr
    programs = {}
    for key, expr in exprs.items():
        try:
            programs[key] = _cel().program(_cel().compile(expr))
        except Exception as exc:  # celpy raises its own parse errors
            raise ConfigError(f"rule {rule.name}: {key}: invalid CEL ({str(exc).splitlines()[0]})") from None
    for template in [rule.message] + [f.code or "" for f in rule.fix.values()]:
        try:
            _JINJA.parse(template)
        except Exception as exc:
            raise ConfigError(f"rule {rule.name}: invalid template ({exc})") from None
    return CompiledRule(rule=rule, params=params, programs=programs)


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
) -> tuple[Finding | None, Skip | None]:
    """Evaluate one rule over flat metric values -> (finding or None, skip or None)."""
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
    activation = {k: celpy.json_to_cel(_cel_value(v)) for k, v in tree.items()}
    activation["params"] = celpy.json_to_cel(compiled.params)
    try:
        fired = compiled.run("condition", activation)
    except Exception as exc:
        return None, Skip(what=what, reason=_reason(lang, "condition_failed", error=str(exc)))
    if fired is not True:
        return None, None
    return _finding(compiled, values, tree, activation, framework), None


def _finding(compiled: CompiledRule, values, tree, activation, framework: str) -> Finding:
    rule = compiled.rule
    step_ms = values.get("step.time_ms")
    gain_pct = confidence = None
    stake_ms = _ms_expr(compiled, "stake", activation, step_ms)
    gain_ms = _ms_expr(compiled, "gain", activation, step_ms)
    if gain_ms is not None and stake_ms is not None:
        gain_ms = min(gain_ms, stake_ms)
    if gain_ms is not None and step_ms:
        gain_pct = round(100.0 * gain_ms / float(step_ms), 2)
    stake_pct = round(100.0 * stake_ms / float(step_ms), 2) if stake_ms is not None and step_ms else None
    if "confidence" in compiled.programs:
        try:
            confidence = round(min(1.0, max(0.0, float(compiled.run("confidence", activation)))), 3)
        except Exception:
            confidence = None
    scope = FindingScope()
    for field in ("ranks", "steps", "ops"):
        key = f"scope.{field}"
        if key in compiled.programs:
            try:
                got = compiled.run(key, activation)
            except Exception:
                continue
            items = got if isinstance(got, list) else [got]
            cast = str if field == "ops" else (lambda x: int(float(x)))
            setattr(scope, field, [cast(x) for x in items if x is not None])
    context = {
        **tree,
        "params": compiled.params,
        "gain_ms": gain_ms,
        "gain_pct": gain_pct,
        "stake_ms": stake_ms,
        "stake_pct": stake_pct,
    }
    message = _JINJA.from_string(rule.message).render(context).strip()
    fix = _pick_fix(rule, framework)
    fix_model = None
    if fix is not None:
        key, text = fix
        code = _JINJA.from_string(text.code).render(context).rstrip() if text.code else None
        fix_model = Fix(framework=key, text=_JINJA.from_string(text.text).render(context).strip(), code=code)
    evidence = {m: values[m] for m in sorted(metric_refs(rule)) if values.get(m) is not None}
    return Finding(
        rule=rule.name,
        id=rule.id,
        title=rule.title,
        severity=_severity(rule, stake_pct if stake_pct is not None else gain_pct),
        message=message,
        estimated_gain_ms=gain_ms,
        estimated_gain_pct=gain_pct,
        time_at_stake_ms=stake_ms,
        confidence=confidence,
        scope=scope,
        evidence=evidence,
        fix=fix_model,
        caveats=list(rule.caveats),
    )


def _ms_expr(compiled: CompiledRule, key: str, activation: dict, step_ms) -> float | None:
    """A rule's ms expression, clamped to [0, step time]; None if absent/failing."""
    if key not in compiled.programs:
        return None
    try:
        value = max(0.0, float(compiled.run(key, activation)))
    except Exception:
        return None
    if step_ms:
        value = min(value, float(step_ms))
    return round(value, 3)


_REF = re.compile(r"\b(" + "|".join(NAMESPACES) + r")\.([a-z0-9_]+)\b")


def metric_refs(rule: Rule) -> set[str]:
    """Metric ids a rule reads: requires, requires_any, and ``namespace.name``
    references in its expressions, message and fixes. These are a finding's
    evidence."""
    texts = [rule.condition, rule.estimated_gain or "", rule.time_at_stake or "",
             rule.confidence or "", rule.message, rule.scope.ranks or "",
             rule.scope.ops or "", rule.scope.steps or ""]
    texts += [part for f in rule.fix.values() for part in (f.text, f.code or "")]
    return {f"{a}.{b}" for text in texts for a, b in _REF.findall(text)} | rule.metric_ids()


def _pick_fix(rule: Rule, framework: str):
    order = [framework, "torch_npu" if framework == "pytorch" else "pytorch", "default"]
    if framework == "torch_npu":
        order.insert(1, "pytorch")
    for key in order + list(rule.fix):
        if key in rule.fix:
            return key, rule.fix[key]
    return None


def _severity(rule: Rule, share_pct: float | None) -> str:
    if rule.severity != "auto":
        return rule.severity
    if share_pct is None:
        return "medium"
    for bound, level in SEVERITY_BY_GAIN:
        if share_pct >= bound:
            return level
    return "info"


def evaluate(
    rules: list[CompiledRule],
    metrics: dict[str, Metric],
    *,
    framework: str = "unknown",
    device: str = "unknown",
    lang: str = "en",
) -> tuple[list[Finding], list[Skip]]:
    """All rules over all metrics -> ranked findings (see module doc); skip
    reasons in ``lang``."""
    values = {mid: m.value for mid, m in metrics.items()}
    findings: list[Finding] = []
    skipped: list[Skip] = []
    for compiled in rules:
        finding, skip = evaluate_rule(compiled, values, framework=framework, device=device, lang=lang)
        if finding:
            findings.append(finding)
        if skip:
            skipped.append(skip)
    return rank_findings(findings), skipped


def rank_findings(findings: list[Finding]) -> list[Finding]:
    """``findings`` in report order (see module doc)."""
    return sorted(findings, key=lambda f: (f.estimated_gain_ms is None, -(f.estimated_gain_ms or 0.0),
                                           -SEVERITY_ORDER[f.severity], -(f.confidence or 0.0), f.rule))
