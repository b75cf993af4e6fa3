"""The regression gate: pass (exit 0), regression (exit 1), or unmeasurable
(exit 2), with reasons.

**Budgets.** For each budget (``advisor.regression.budgets``), the limit is

    limit = max(budget, dispersion floor, run-to-run floor, declared ``run_noise``)

* *dispersion floor* (the minimum standardized effect,
  ``advisor.regression.compare.dispersion_floor``): a shift must exceed ``EFFECT_Z`` (2)
  pooled robust standard deviations of the per-step log times. Steady
  accelerator steps vary by 1-2%, so this stays below a 5% budget; on a
  busy shared CPU host steps vary by 20-40% and the gate then demands a
  correspondingly larger effect instead of alarming on the machine's load.
* *run-to-run floor*, measured only when the baseline is several runs (the
  history, or ``--baseline`` given more than once): ``NOISE_Z`` standard
  deviations of the log per-run medians across those runs; needs
  ``MIN_NOISE_RUNS`` runs. From ``ROBUST_RUNS`` runs on the deviation is
  the robust one (1.4826 x MAD), so one stalled run in a history does not
  widen the limit. Below that it is the larger of the robust and the plain
  (n-1) standard deviation: the MAD of three or four runs is the gap
  between the two closest, ~0 when two of them agree, and a runner that is
  often slow (two fast runs and a slow one) would pass for a quiet one.
  A single baseline run cannot measure it, and the summary says so.

A budget *regresses* when both hold:

* **significance** -- one-sided Mann-Whitney U test on the per-step times,
  H1: the current steps are larger than the baseline steps scaled by
  ``1 + limit`` (absolute budgets: shifted by the limit), p < ``alpha``
  (default 0.01). Rank-based, so a few stalled steps neither cause nor mask
  a regression; shifting by the limit tests "slower by *more than* the
  budget", not merely "slower".
* **effect size** -- the median per-step ratio current/baseline exceeds
  ``1 + limit`` (absolute: the median difference exceeds the limit).

With fewer than ``MIN_SAMPLES`` steps on a side (or a metric without
per-step samples) the test is not applicable: the effect size alone decides
and the check carries that caveat. A budget "-x" mirrors all of this for
metrics whose drop is the regression.

**Unmeasurable.** A budget the gate cannot evaluate never passes: the
metric was not measured on a side (a run without its step trace), the
baseline is the current run itself (:func:`own_runs`), a
relative budget over a baseline of zero, or per-step samples too few for
the rank test to reach p < ``alpha`` at all (its smallest p-value for those
sample sizes, :func:`smallest_p`, is not below ``alpha``). The check is an
error -- verdict "unmeasurable", exit 2 -- or, with ``on_unmeasurable =
"fail"``, a failure (exit 1). A regression elsewhere still makes the
verdict "regression". Impossible values (negative or infinite step times)
never get this far: reading the run refuses them as bad input
(``advisor.regression.compare.check_values``).

**Findings.** A finding fails the gate when its rule is not ignored, it is
new (or of higher severity than in the baseline; a history baseline knows
every rule that fired in any of its runs), its rule is listed in
``fail_on`` or its severity is at least the ``fail_on`` severity, and the
time it puts at stake per step is beyond noise: larger than the step-time
noise band (the step-time noise floors above, excluding the budget, times
the baseline median step). A finding inside the band is reported, not
failed: on a busy host, load alone makes rules such as ``host-bound`` or
``step-outlier`` come and go. A contributing cause (a finding merged under
the primary finding of the same time pool, ``Finding.contributing``)
counts as a finding of its own rule with its own severity and time at
stake: merging decides how a report shows causes of one time, not whether
a rule fired, so ``fail_on`` and ``ignore`` lists keep their meaning.

**Anomaly** (history baselines of ``advisor.regression.history.MIN_ANOMALY_RUNS`` runs
or more): see ``advisor.regression.history.history_anomaly``; reported, and failing
only with ``fail_on_anomaly = true``.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field
from scipy.stats import mannwhitneyu

from advisor.errors import AdvisorError
from advisor.model import SEVERITY_ORDER, ConfigUsed
from advisor.regression.budgets import Budget, GateConfig
from advisor.regression.compare import (
    EFFECT_Z,
    MIN_SAMPLES,
    STEP_METRIC,
    Comparison,
    Contributor,
    MessageText,
    Side,
    change_text,
    compare,
    dispersion_floor,
    step_samples,
)
from advisor.reports.i18n import Message

NOISE_Z = 3.0
MIN_NOISE_RUNS = 3
ROBUST_RUNS = 5
SUMMARY_GROWTH = 5
EXIT_PASS, EXIT_REGRESSION, EXIT_UNMEASURABLE = 0, 1, AdvisorError.exit_code

#: "error": the check could not be evaluated (see the module doc, Unmeasurable).
Status = Literal["pass", "fail", "skip", "error"]


class Check(BaseModel):
    """One gate check: a budget, a finding, or the history anomaly model."""

    kind: Literal["budget", "finding", "anomaly"]
    name: MessageText
    status: Status
    message: MessageText
    metric: str | None = None
    budget: str | None = None
    limit: float | None = Field(None, description="effective limit: fraction (relative) or metric unit")
    relative: bool = True
    noise_floor: float | None = None
    baseline: float | None = Field(
        None, description="the compared statistic: the per-step median when the rank test applies, "
        "else the report's value (a step time: the mean over steady steps, as the report prints it)")
    current: float | None = Field(None, description="the same statistic for the current run")
    change_pct: float | None = None
    p_value: float | None = None
    test: str | None = None
    n_baseline: int | None = None
    n_current: int | None = None
    severity: str | None = None
    caveats: list[MessageText] = Field(default_factory=list)


class InputConfig(BaseModel):
    """The config recorded in an input report (``run.config``): what the
    analysis behind a side applied; ``config`` null when not recorded."""

    side: Literal["baseline", "current"]
    input: str
    runs: int = 1
    config: ConfigUsed | None = None


class GateResult(BaseModel):
    """What ``advisor gate`` decides and writes (gate.json)."""

    verdict: Literal["pass", "regression", "unmeasurable"]
    exit_code: int
    baseline: str
    current: str
    method: MessageText
    config_source: str
    config: ConfigUsed | None = Field(None, description="the gate's own config file and settings")
    inputs: list[InputConfig] = Field(default_factory=list, description="the config each input was analyzed with")
    checks: list[Check]
    growth: list[Contributor] = Field(default_factory=list)
    notes: list[MessageText] = Field(default_factory=list)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]

    @property
    def unmeasured(self) -> list[Check]:
        """Checks that could not be evaluated (and count as errors)."""
        return [c for c in self.checks if c.status == "error"]


def noise_floor(side: Side, metric: str) -> float | None:
    """Run-to-run relative noise of ``metric`` over a multi-run baseline
    (see module doc), or None with fewer than MIN_NOISE_RUNS runs."""
    vals = side.run_values.get(metric + "#median") or side.run_values.get(metric) or []
    vals = [v for v in vals if v > 0]
    if side.runs < MIN_NOISE_RUNS or len(vals) < MIN_NOISE_RUNS:
        return None
    logs = np.log(vals)
    sigma = 1.4826 * float(np.median(np.abs(logs - np.median(logs))))
    if len(logs) < ROBUST_RUNS:
        sigma = max(sigma, float(np.std(logs, ddof=1)))
    return math.exp(NOISE_Z * sigma) - 1.0


def _fmt(v: float | None, unit: str = "") -> str:
    if v is None:
        return "-"
    return f"{v:.4g}{' ' + unit if unit and unit not in ('ratio', 'count') else ''}"


def smallest_p(n_baseline: int, n_current: int, alternative: str = "greater") -> float:
    """The smallest p-value the one-sided rank test can give with these
    sample sizes (every current sample beyond every baseline one)."""
    low, high = np.arange(n_baseline, dtype=float), np.arange(n_current, dtype=float) + n_baseline + 1
    if alternative == "less":
        low, high = high, low
    return float(mannwhitneyu(high, low, alternative=alternative).pvalue)


def _unmeasurable(check: Check, config: GateConfig, why: str) -> Check:
    """``check`` as one that could not be evaluated (see module doc)."""
    check.status = "fail" if config.on_unmeasurable == "fail" else "error"
    check.message = Message("gate_unmeasurable", metric=check.metric, why=why)
    if config.on_unmeasurable == "fail":
        check.caveats.append(Message("gate_caveat_counted_failure"))
    return check


def _not_evaluated(side: Side, metric: str) -> str:
    """Why ``metric`` has no value on ``side`` (the report's skip reason when it gives one)."""
    reasons = [s.reason for r in side.reports for s in r.skipped if s.what in (metric, f"metric {metric}")]
    return reasons[-1] if reasons else Message("gate_no_value")


def budget_name(b: Budget) -> Message:
    """A budget check's name: "budget step.time_ms +5%"."""
    return Message("gate_check_budget", metric=b.metric, budget=b.text)


def check_budget(b: Budget, base: Side, cur: Side, config: GateConfig) -> Check:
    """One budget (see module doc)."""
    unit = base.units.get(b.metric) or cur.units.get(b.metric) or ""
    check = Check(kind="budget", name=budget_name(b), status="error", message="",
                  metric=b.metric, budget=b.text, relative=b.relative)
    bv, cv = base.metrics.get(b.metric), cur.metrics.get(b.metric)
    if bv is None or cv is None:
        side, key = (base, "gate_not_in_baseline") if bv is None else (cur, "gate_not_in_current")
        return _unmeasurable(check, config, Message(key, label=side.label, reason=_not_evaluated(side, b.metric)))
    floor = noise_floor(base, b.metric)
    declared = config.run_noise_fraction
    bs, cs = base.samples.get(b.metric), cur.samples.get(b.metric)
    have_test = bs is not None and cs is not None and min(len(bs), len(cs)) >= MIN_SAMPLES
    spread = dispersion_floor(bs, cs) if have_test else 0.0
    rel_limit = max(b.amount if b.relative else 0.0, floor or 0.0, declared, spread)
    check.noise_floor = max(floor or 0.0, spread, declared)
    bm = float(np.median(bs)) if have_test else bv
    cm = float(np.median(cs)) if have_test else cv
    check.baseline, check.current = bm, cm
    if b.relative and bm == 0:
        return _unmeasurable(check, config, Message("gate_zero_baseline", unit=unit))
    least = smallest_p(len(bs), len(cs), "greater" if b.direction > 0 else "less") if have_test else 0.0
    if least >= config.alpha:
        check.n_baseline, check.n_current = len(bs), len(cs)
        return _unmeasurable(check, config, Message("gate_test_out_of_reach", baseline=str(len(bs)),
                                                    current=str(len(cs)), alpha=f"{config.alpha:g}",
                                                    least=f"{least:.2g}"))
    if b.relative:
        limit = rel_limit
        scaled = (lambda x: x * (1 + b.direction * limit))
        effect = (cm - bm) / abs(bm) * b.direction if bm else 0.0
        over = effect > limit
        limit_text = f"{b.direction * limit:+.1%}"
    else:
        limit = max(b.amount, rel_limit * abs(bm))
        scaled = (lambda x: x + b.direction * limit)
        effect = (cm - bm) * b.direction
        over = effect > limit
        limit_text = f"{b.direction * limit:+.4g} {unit}"
    check.limit, check.baseline, check.current = limit, bm, cm
    check.change_pct = 100.0 * (cm - bm) / abs(bm) if bm else None
    if spread > max(b.amount if b.relative else 0, floor or 0, declared):
        check.caveats.append(Message("gate_caveat_spread", limit=f"{spread:.1%}", z=f"{EFFECT_Z:g}"))
    if floor is not None and floor > max(b.amount if b.relative else 0, spread):
        check.caveats.append(Message("gate_caveat_runs_robust" if base.runs >= ROBUST_RUNS else "gate_caveat_runs",
                                     limit=f"{floor:.1%}", z=f"{NOISE_Z:g}", runs=str(base.runs)))
    if declared > (b.amount if b.relative else 0) and declared >= (floor or 0):
        check.caveats.append(Message("gate_caveat_declared", limit=f"{declared:.1%}"))
    if have_test:
        alt = "greater" if b.direction > 0 else "less"
        pooled = np.concatenate([scaled(bs), cs])
        p = 1.0 if np.ptp(pooled) == 0 else float(mannwhitneyu(cs, scaled(bs), alternative=alt).pvalue)
        check.p_value, check.n_baseline, check.n_current = p, len(bs), len(cs)
        check.test = "Mann-Whitney U (one-sided, per-step)"
        significant = p < config.alpha
        regress = significant and over
        why = Message("gate_why_test", p=f"{p:.2g}", op="<" if significant else ">=", alpha=f"{config.alpha:g}",
                      baseline=_fmt(bm, unit), current=_fmt(cm, unit),
                      mean=Message("gate_why_mean", baseline=_fmt(bv, unit), current=_fmt(cv, unit)))
    else:
        check.test = "effect size only"
        n = (0 if bs is None else len(bs), 0 if cs is None else len(cs))
        check.caveats.append(Message("gate_caveat_no_test", baseline=str(n[0]), current=str(n[1]),
                                     need=str(MIN_SAMPLES)))
        regress = over
        why = Message("gate_why_mean", baseline=_fmt(bm, unit), current=_fmt(cm, unit))
    change = change_text(bm, cm, unit)
    if regress:
        check.status = "fail"
        check.message = Message("gate_budget_fail", metric=b.metric, change=change, limit=limit_text, why=why)
    else:
        check.status = "pass"
        check.message = Message("gate_budget_pass", metric=b.metric, change=change, limit=limit_text, why=why)
    return check


def step_noise_band_ms(base: Side, cur: Side, config: GateConfig) -> float:
    """Step-time noise in ms per step (see module doc, Findings)."""
    bs, cs = base.samples.get("step.time_ms"), cur.samples.get("step.time_ms")
    spread = dispersion_floor(bs, cs) if bs is not None and cs is not None else 0.0
    rel = max(spread, noise_floor(base, "step.time_ms") or 0.0, config.run_noise_fraction)
    median = float(np.median(bs)) if bs is not None and len(bs) else base.metrics.get("step.time_ms", 0.0)
    return rel * median


def check_findings(comparison: Comparison, base: Side, current: Side, config: GateConfig) -> list[Check]:
    """Failing findings (see module doc), one check each; new findings
    inside the noise band are returned as passing checks."""
    checks = []
    band = step_noise_band_ms(base, current, config)
    floor = config.fail_severity
    for fc in comparison.findings:
        if fc.current_severity is None or fc.status not in ("new", "worse"):
            continue
        if fc.rule in config.ignore or fc.id in config.ignore:
            continue
        named = fc.rule in config.fail_rules or fc.id in config.fail_rules
        severe = floor is not None and SEVERITY_ORDER[fc.current_severity] >= SEVERITY_ORDER[floor]
        if not (named or severe):
            continue
        severity = Message(f"sev_{fc.current_severity}")
        if fc.status == "worse":
            text = Message("gate_finding_worse", rule=fc.rule, severity=severity, message=fc.message,
                           was=Message(f"sev_{fc.baseline_severity}"))
        else:
            text = Message("gate_finding_new", rule=fc.rule, severity=severity, message=fc.message)
        stake = fc.current_stake_ms
        name = Message("gate_check_finding", rule=fc.rule)
        if stake is not None and band > 0 and stake <= band:
            checks.append(Check(kind="finding", name=name, status="pass", severity=fc.current_severity,
                                message=Message("gate_finding_in_noise", finding=text, stake=f"{stake:.3g}",
                                                band=f"{band:.3g}")))
            continue
        checks.append(Check(kind="finding", name=name, status="fail", severity=fc.current_severity, message=text))
    return checks


def input_configs(baseline: Side, current: Side) -> list[InputConfig]:
    """The configs the sides' reports record, one entry per side and distinct config."""
    out: list[InputConfig] = []
    for name, side in (("baseline", baseline), ("current", current)):
        seen: dict[str, InputConfig] = {}
        for rep in side.reports:
            cfg = rep.run.config
            key = "" if cfg is None else cfg.model_dump_json()
            if key in seen:
                seen[key].runs += 1
            else:
                seen[key] = InputConfig(side=name, input=side.label, config=cfg)
        out += seen.values()
    return out


def own_runs(baseline: Side, current: Side) -> list[int]:
    """The baseline runs (0-based) that are the current run itself: the
    same per-step times, step for step (``MIN_SAMPLES`` or more). Two
    recordings never time their steps alike to the last digit; a copy of
    one report does."""
    mine = step_samples(current.latest, STEP_METRIC)
    if mine is None or len(mine) < MIN_SAMPLES:
        return []
    return [i for i, rep in enumerate(baseline.reports)
            if (theirs := step_samples(rep, STEP_METRIC)) is not None and np.array_equal(theirs, mine)]


def run_gate(baseline: Side, current: Side, config: GateConfig, *, anomaly: Check | None = None,
             used: ConfigUsed | None = None) -> tuple[GateResult, Comparison]:
    """Decide (see module doc); returns the result and the comparison it
    used. ``used``: the gate's config, named in the result. A baseline that
    is the current run itself (:func:`own_runs`) cannot measure a change: its
    budgets are unmeasurable, never a pass."""
    own = own_runs(baseline, current)
    comparison = compare(baseline, current, alpha=config.alpha)
    if own and len(own) < baseline.runs:
        comparison.notes.append(Message("gate_note_own_runs", own=str(len(own)), runs=str(baseline.runs)))
    if own and len(own) == baseline.runs:
        checks = [_unmeasurable(Check(kind="budget", name=budget_name(b), status="error", message="",
                                      metric=b.metric, budget=b.text, relative=b.relative), config,
                                Message("gate_own_baseline"))
                  for b in config.parsed_budgets()]
    else:
        checks = [check_budget(b, baseline, current, config) for b in config.parsed_budgets()]
    finding_checks = check_findings(comparison, baseline, current, config)
    if not any(c.status == "fail" for c in finding_checks):
        sev = config.fail_severity
        what = [Message("gate_severity_or_above", severity=Message(f"sev_{sev}"))] if sev else []
        what += sorted(config.fail_rules)
        finding_checks.insert(0, Check(kind="finding", name=Message("gate_check_findings"), status="pass",
                                       message=Message("gate_findings_pass",
                                                       what=what or Message("gate_a_failing_rule"))))
    checks += finding_checks
    if anomaly is not None:
        if anomaly.status == "fail" and not config.fail_on_anomaly:
            anomaly = anomaly.model_copy(update={"status": "pass", "caveats": anomaly.caveats + [
                Message("gate_caveat_anomaly_reported")]})
        checks.append(anomaly)
    failed = any(c.status == "fail" for c in checks)
    unmeasured = any(c.status == "error" for c in checks)
    notes = list(comparison.notes)
    if baseline.runs < MIN_NOISE_RUNS:
        which = (Message("gate_one_baseline") if baseline.runs == 1 else
                 Message("gate_n_baselines", runs=str(baseline.runs)))
        notes.append(Message("gate_note_run_noise", which=which, runs=str(MIN_NOISE_RUNS)))
    verdict, code = (("regression", EXIT_REGRESSION) if failed else
                     ("unmeasurable", EXIT_UNMEASURABLE) if unmeasured else ("pass", EXIT_PASS))
    return GateResult(
        verdict=verdict, exit_code=code,
        baseline=baseline.label, current=current.label,
        method=Message("gate_method", alpha=str(config.alpha)), config_source=config.source,
        config=used, inputs=input_configs(baseline, current),
        checks=checks, growth=comparison.growth[:SUMMARY_GROWTH], notes=notes,
    ), comparison
