"""Baseline vs current: metrics, findings and where the time went.

Either side is a :class:`Side`: one Report (a profile folder, analyzed, or a
saved ``report.json``), or several Reports from the run history, summarized
as the median run (:func:`side_from_reports`).

Per-step samples come from ``Report.tables["step_breakdown"]`` (one row per
step id, mean over ranks). The first row is the warm-up step and is dropped
when a run has ``WARMUP_MIN_STEPS`` or more steps, as the metrics do. A
missing value (null, NaN) is a step without that part; a negative,
infinite or day-long time is impossible and the run is refused as bad
input (:func:`check_values`), so it can neither pass nor fail a gate; so
is a report of another schema version.
A history side pools each run's steps, at most ``MAX_STEPS_PER_RUN`` per run
(evenly spaced) so every run weighs the same.

A metric change is *beyond noise* when the two-sided Mann-Whitney U test on
the per-step samples gives p < ``alpha`` and the medians differ by more than
the *minimum effect*: ``MIN_EFFECT`` (relative), and at least ``EFFECT_Z``
pooled robust standard deviations of the per-step log values
(:func:`dispersion_floor`). The second part is a standardized effect size:
on a busy machine the steps of one run spread widely and a shift smaller
than that spread is not evidence, whatever the p-value (steps within a run
are not independent of the machine's state). Metrics without per-step
samples are compared as values only (``beyond_noise`` is null).

Growth: per-step time of step components, operators, collectives and
dataset ops, matched by (kind, name, type) across the sides, ranked by the
absolute growth in ms per step. Operator ids that differ from run to run
(``_123`` suffixes, ``-op45``) are stripped before matching, and template
arguments are dropped (``kernel<float, 4>`` and ``kernel<half, 8>`` are one
operator, ``kernel<>``): :func:`operator_key`. :attr:`Comparison.changes`
orders growth and reduction together by absolute ms per step, largest first.

When a side has fewer than ``MIN_SAMPLES`` steps no metric is tested and a
note says so: "beyond noise" is then unknown, not "no".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, Field, WrapValidator
from scipy.stats import mannwhitneyu

from advisor.errors import ConfigError, InputError
from advisor.i18n import DEFAULT_LANG
from advisor.model import SEVERITY_ORDER, ConfigUsed, Finding, Report
from advisor.reports.i18n import Message, t

#: A model field holding a :class:`advisor.reports.i18n.Message`: kept as
#: made, so a renderer can say it in any language (a plain string, e.g. read
#: from JSON, is validated as one); serialized as its English text.
MessageText = Annotated[str, WrapValidator(lambda v, handler: v if isinstance(v, Message) else handler(v))]

WARMUP_MIN_STEPS = 4
MAX_STEPS_PER_RUN = 64
MIN_EFFECT = 0.05
EFFECT_Z = 2.0
MIN_SAMPLES = 8
#: Significance level of the Mann-Whitney U tests (compare, and the gate's default ``alpha``).
DEFAULT_ALPHA = 0.01
GROWTH_LIMIT = 15
STEP_METRIC = "step.time_ms"

#: metric id -> per-step column(s) of ``step_breakdown`` that sample it.
SAMPLE_COLUMNS = {
    "step.time_ms": ("step_ms", "duration_ms"),
    "step.computing_ms": ("computing_ms",),
    "step.data_wait_ms": ("data_wait_ms", "iteration_interval_ms"),
    "step.iteration_interval_ms": ("iteration_interval_ms",),
    "step.free_ms": ("free_ms",),
    "step.exposed_comm_ms": ("exposed_comm_ms",),
    "step.overlapped_ms": ("overlapped_ms",),
    "step.fp_bp_ms": ("fp_bp_ms",),
    "step.tail_ms": ("tail_ms",),
}
#: step components shown in the growth list: metric id -> the key of its
#: label (``advisor.reports.i18n``); compare.json names them in English.
COMPONENTS = {
    "step.data_wait_ms": "cmp_component_data_wait",
    "step.iteration_interval_ms": "series_interval",
    "step.computing_ms": "series_computing_all",
    "step.exposed_comm_ms": "series_exposed_comm",
    "step.tail_ms": "series_tail",
}
_COMPONENT_KEYS = {t(DEFAULT_LANG, key): key for key in COMPONENTS.values()}
_ID_SUFFIX = re.compile(r"(-op\d+|_\d+)+$")


def operator_key(name: str) -> str:
    """An operator name as compare matches it: run-specific id suffixes
    stripped and the arguments of each top-level template emptied
    (``vec_kernel<4, Fill<float>>(int)`` -> ``vec_kernel<>(int)``). A name
    whose angle brackets do not balance (``operator<<``) keeps them."""
    name = _ID_SUFFIX.sub("", name)
    if "<" not in name:
        return name
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            if depth == 0:
                out.append(ch)
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
            if depth == 0:
                out.append(ch)
        elif ch == ">" and not depth:
            return name
        elif depth == 0:
            out.append(ch)
    return "".join(out) if depth == 0 else name


# ---------------------------------------------------------------- loading


def load_report(path: str | Path, *, jobs: int | None = None, rule_paths=(), overrides=None,
                config: dict | None = None, lang: str = DEFAULT_LANG) -> Report:
    """A Report from a ``report.json`` file, a folder holding one (an
    ``advisor report``/``run`` output), or profiler output (analyzed with
    ``rule_paths`` / ``overrides``, its findings written in ``lang``, and
    ``config`` -- what they came from, ``advisor.settings.Settings.used`` --
    recorded as ``run.config``)."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file or folder")
    target = path
    if path.is_dir() and (path / "report.json").is_file():
        target = path / "report.json"
    if target.is_file() and target.suffix == ".json" and not target.name.endswith(".pt.trace.json"):
        try:
            text = target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(target, f"cannot read ({exc})") from None
        try:
            report = Report.model_validate_json(text)
        except ValueError as exc:
            first = str(exc).splitlines()
            why = first[1].strip() + " " + first[2].strip() if len(first) > 2 else str(exc)[:200]
            raise InputError(target, f"not an advisor report.json ({why})") from None
        check_values(report, target)
        return report
    from advisor.pipeline import analyze

    report = analyze(path, jobs=jobs, rule_paths=list(rule_paths), overrides=overrides, lang=lang)
    if config is not None:
        report.run.config = ConfigUsed.model_validate(config)
    check_values(report, path)
    return report


#: The report.json schema this advisor reads (``advisor.model.Report``);
#: fields are only ever added within it, so another number means another
#: meaning.
REPORT_SCHEMA = Report.model_fields["schema_version"].default
#: Longest step time the gate accepts, in ms: a day. A profile records a
#: window of a few steps, and a day of device activity in one trace is far
#: beyond what any profiler output holds; a longer "step" is a damaged or
#: forged value, and as a baseline it would pass any run.
MAX_STEP_MS = 24 * 3600 * 1000.0


def _impossible(v: float) -> bool:
    return v < 0 or math.isinf(v) or v > MAX_STEP_MS


def check_values(report: Report, where: str | Path) -> None:
    """InputError naming ``where`` when the report is of another schema than
    ``REPORT_SCHEMA``, or a step time the gate reads (the ``SAMPLE_COLUMNS``
    metrics and their per-step rows) is negative, infinite or longer than
    ``MAX_STEP_MS``: no step lasts less than nothing or for days, so the
    profile or report is damaged."""
    if report.schema_version != REPORT_SCHEMA:
        raise InputError(where, f"a report.json of schema version {report.schema_version}; this advisor reads "
                                f"version {REPORT_SCHEMA}")
    for metric, columns in SAMPLE_COLUMNS.items():
        value = _value(report.metrics.get(metric))
        if value is not None and _impossible(value):
            raise InputError(where, f"{metric} is {value:g}: a negative, infinite or day-long time is impossible "
                                    "(damaged step data)")
        for row in report.tables.get("step_breakdown") or []:
            for col in columns:
                v = row.get(col) if isinstance(row, dict) else None
                if isinstance(v, (int, float)) and not isinstance(v, bool) and _impossible(v):
                    step = row.get("step", "?")
                    raise InputError(where, f"step {step}: {col} is {v:g}: a negative, infinite or day-long time "
                                            "is impossible (damaged step data)")


def _value(metric) -> float | None:
    """A metric's value when it is a number (NaN included), else None."""
    v = getattr(metric, "value", None)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


# ---------------------------------------------------------------- sides


def step_samples(report: Report, metric: str) -> np.ndarray | None:
    """Per-step values of ``metric`` (see module doc), or None."""
    rows = report.tables.get("step_breakdown") or []
    for col in SAMPLE_COLUMNS.get(metric, ()):
        vals = [r.get(col) for r in rows if isinstance(r, dict)]
        vals = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)]
        if vals:
            if len(vals) >= WARMUP_MIN_STEPS:
                vals = vals[1:]
            return np.asarray(vals, dtype=float)
    return None


def log_spread(samples: np.ndarray) -> float:
    """Robust standard deviation of log(samples): 1.4826 x MAD (0 when fewer
    than MIN_SAMPLES positive values)."""
    pos = np.log(samples[samples > 0])
    if len(pos) < MIN_SAMPLES:
        return 0.0
    return 1.4826 * float(np.median(np.abs(pos - np.median(pos))))


def dispersion_floor(base: np.ndarray, cur: np.ndarray) -> float:
    """The smallest relative shift that is large next to the step-to-step
    spread: exp(EFFECT_Z * sqrt(s_b^2 + s_c^2)) - 1, s = :func:`log_spread`."""
    return float(np.expm1(EFFECT_Z * np.hypot(log_spread(base), log_spread(cur))))


def _num(metric) -> float | None:
    v = getattr(metric, "value", None)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v):
        return float(v)
    return None


def _op_rows(report: Report) -> list[tuple[str, str, str, float]]:
    """(kind, name, type, ms per step) for operators, collectives, dataset ops."""
    out: list[tuple[str, str, str, float]] = []
    steps = report.run.steps_found or None
    ops = report.tables.get("ops")
    if ops is None and report.tables.get("top_ops"):
        ops = [dict(r, per_step_ms=(r.get("total_ms") or 0) / steps if steps else None)
               for r in report.tables["top_ops"]]
    for kind, rows, type_key, value_key in (
        ("operator", ops or [], "type", "per_step_ms"),
        ("collective", report.tables.get("comm") or [], "kind", "per_step_ms"),
        ("dataset op", report.tables.get("data_ops") or [], "op_id", "avg_ms"),
    ):
        for r in rows:
            v = r.get(value_key)
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            name = operator_key(str(r.get("name", "?"))) if kind != "dataset op" else str(r.get("name"))
            out.append((kind, name, str(r.get(type_key) or ""), float(v)))
    return out


def op_names(report: Report) -> set[str]:
    """Operator names the report knows (for the same-model check)."""
    rows = report.tables.get("ops") or report.tables.get("top_ops") or []
    names = {operator_key(str(r.get("name"))) for r in rows if r.get("name")}
    if not names and "ops.top" in report.metrics and isinstance(report.metrics["ops.top"].value, list):
        names = {operator_key(str(r.get("name"))) for r in report.metrics["ops.top"].value if isinstance(r, dict)}
    return names


@dataclass
class Side:
    """One side of a comparison (see module doc)."""

    label: str
    reports: list[Report]
    metrics: dict[str, float] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    samples: dict[str, np.ndarray] = field(default_factory=dict)
    run_values: dict[str, list[float]] = field(default_factory=dict)
    findings: dict[str, Finding] = field(default_factory=dict)
    contributors: dict[tuple[str, str, str], float] = field(default_factory=dict)
    ops: set[str] = field(default_factory=set)

    @property
    def runs(self) -> int:
        return len(self.reports)

    @property
    def latest(self) -> Report:
        return self.reports[-1]


def _even(values: np.ndarray, limit: int) -> np.ndarray:
    if len(values) <= limit:
        return values
    return values[np.unique(np.linspace(0, len(values) - 1, limit).round().astype(int))]


def side_from_reports(reports: list[Report], label: str) -> Side:
    """A Side from one report, or the median run of several (history):
    metric values are medians over runs, per-step samples are pooled,
    findings are the rules that fired in any of the runs (a rule that flaps
    across healthy runs is not "new"; its most severe, then most recent,
    finding represents it), contributors are medians over the runs that
    have them."""
    if not reports:
        raise InputError(label, "no runs to compare against")
    side = Side(label=label, reports=list(reports))
    values: dict[str, list[float]] = {}
    for rep in reports:
        for mid, m in rep.metrics.items():
            v = _num(m)
            if v is not None:
                values.setdefault(mid, []).append(v)
                side.units[mid] = m.unit
    side.run_values = values
    side.metrics = {k: float(np.median(v)) for k, v in values.items()}
    for metric in SAMPLE_COLUMNS:
        runs = [s for s in (step_samples(r, metric) for r in reports) if s is not None and len(s)]
        if runs:
            cap = MAX_STEPS_PER_RUN if len(runs) > 1 else None
            side.samples[metric] = np.concatenate([_even(s, cap) if cap else s for s in runs])
            side.run_values[metric + "#median"] = [float(np.median(s)) for s in runs]
    for rep in reports:
        for f in rep.all_findings():  # contributing causes are findings of their rules too
            old = side.findings.get(f.rule)
            if old is None or SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER[old.severity]:
                side.findings[f.rule] = f
    contrib: dict[tuple[str, str, str], list[float]] = {}
    for rep in reports:
        per_run: dict[tuple[str, str, str], float] = {}
        for mid, key in COMPONENTS.items():
            v = _num(rep.metrics.get(mid))
            if v is not None:
                per_run[("step component", t(DEFAULT_LANG, key), "")] = v
        for kind, name, typ, v in _op_rows(rep):
            key = (kind, name, typ)
            per_run[key] = per_run.get(key, 0.0) + v
        for k, v in per_run.items():
            contrib.setdefault(k, []).append(v)
        side.ops |= op_names(rep)
    side.contributors = {k: float(np.median(v)) for k, v in contrib.items()}
    return side


# ---------------------------------------------------------------- result model


class RunRef(BaseModel):
    """Which run(s) a side is."""

    label: str
    runs: int = 1
    source: str
    framework: str
    device: str
    device_model: str | None = None
    world_size: int | None = Field(None, description="ranks in the job (null: not recorded)")
    ranks: int = Field(0, description="ranks analyzed")
    steps: int
    generated_at: str

    @property
    def where(self) -> str:
        """Device model (or kind) and job size: "Tesla V100-SXM2-16GB, 2 ranks"."""
        size = self.world_size or self.ranks
        what = self.device_model or self.device
        if not size:
            return what
        return Message("cmp_where", what=what, ranks=Message("n_ranks_one") if size == 1 else
                       Message("n_ranks", n=str(size)))


class SampleTest(BaseModel):
    """A rank test on per-step samples."""

    method: str
    n_baseline: int
    n_current: int
    baseline_median: float
    current_median: float
    p_value: float


class MetricChange(BaseModel):
    id: str
    unit: str
    baseline: float | None
    current: float | None
    change: float | None = None
    change_pct: float | None = None
    beyond_noise: bool | None = Field(None, description="null: no per-step samples to test")
    test: SampleTest | None = None


class FindingChange(BaseModel):
    rule: str
    id: str
    title: str
    status: Literal["new", "resolved", "worse", "better", "same"]
    baseline_severity: str | None = None
    current_severity: str | None = None
    baseline_stake_ms: float | None = None
    current_stake_ms: float | None = None
    message: str


class Contributor(BaseModel):
    kind: str = Field(description="step component, operator, collective or dataset op")
    name: str
    type: str = ""
    baseline_ms: float | None = Field(description="ms per step (dataset ops: mean ms per call)")
    current_ms: float | None
    change_ms: float
    change_pct: float | None = None


class Comparison(BaseModel):
    """What ``advisor compare`` writes (compare.json)."""

    schema_version: int = 1
    baseline: RunRef
    current: RunRef
    alpha: float
    min_effect: float = MIN_EFFECT
    effect_z: float = EFFECT_Z
    metrics: list[MetricChange]
    findings: list[FindingChange]
    growth: list[Contributor] = Field(description="largest growth first (ms per step)")
    shrink: list[Contributor] = Field(default_factory=list, description="largest reduction first")
    common_ops: int | None = None
    notes: list[MessageText] = Field(default_factory=list)

    @property
    def step(self) -> MetricChange | None:
        """The step time change (``step.time_ms``), when both sides have one."""
        m = next((m for m in self.metrics if m.id == STEP_METRIC), None)
        return m if m is not None and m.baseline is not None and m.current is not None else None

    @property
    def changes(self) -> list[Contributor]:
        """Growth and reduction together, largest absolute ms per step first."""
        return sorted(self.growth + self.shrink, key=lambda x: -abs(x.change_ms))

    def step_line(self) -> Message:
        """The step time before -> after, its change and the speed ratio:
        "step time 91.19 -> 18.03 ms (-80.2%, 5.06x faster, beyond noise)"."""
        m = self.step
        if m is None:
            return Message("cmp_step_unmeasured")
        parts: list[str] = [change_text(m.baseline, m.current, m.unit)]
        if m.baseline > 0 and m.current > 0 and m.baseline != m.current:
            ratio = m.baseline / m.current
            parts.append(Message("cmp_faster", ratio=f"{ratio:.3g}") if ratio > 1 else
                         Message("cmp_slower", ratio=f"{1 / ratio:.3g}"))
        if m.beyond_noise is not None:
            parts.append(Message("cmp_beyond_noise" if m.beyond_noise else "cmp_within_noise"))
        return Message("cmp_step_line", baseline=f"{m.baseline:.4g}", current=f"{m.current:.4g}", parts=parts)

    def __repr__(self) -> str:
        """One line: the two runs, the step time before and after, and the
        findings that changed (``print(comparison)``)."""
        parts = [self.step_line()] if self.step is not None else []
        changed = [f"{f.status} {f.rule}" for f in self.findings if f.status != "same"]
        parts.append(", ".join(changed) if changed else "no finding changed")
        return f"<advisor Comparison {self.baseline.label} -> {self.current.label}: {'; '.join(parts)}>"

    __str__ = __repr__


# ---------------------------------------------------------------- comparing


def check_same_model(baseline: Side, current: Side) -> int | None:
    """Number of operator names both sides share; InputError when both know
    operators and share none (different models); None when unknown."""
    if not baseline.ops or not current.ops:
        return None
    common = len(baseline.ops & current.ops)
    if common == 0:
        raise InputError(baseline.label, f"shares no operator with {current.label}: the runs profile "
                         "different models; choose a baseline of the same model")
    return common


def _ref(side: Side) -> RunRef:
    r = side.latest.run
    return RunRef(label=side.label, runs=side.runs, source=r.source_path, framework=r.framework,
                  device=r.device, device_model=r.device_model, world_size=r.world_size, ranks=len(r.ranks),
                  steps=r.steps_found, generated_at=r.generated_at)


#: A change is given in percent only when the baseline is at least this
#: fraction of the larger of the two values (a rise of at most 900%). Below
#: it the baseline is too near zero for a percentage to mean anything (a
#: ratio going from 0.0001 to 0.029 would read "+28900.0%"), so the change
#: is given as the absolute difference, in the metric's unit.
PERCENT_FLOOR = 0.1


def percent_change(baseline: float | None, current: float | None) -> float | None:
    """The change in percent of the baseline; None when a side is missing
    or the baseline is below ``PERCENT_FLOOR``."""
    if baseline is None or current is None or not baseline:
        return None
    if abs(baseline) < PERCENT_FLOOR * max(abs(baseline), abs(current)):
        return None
    return 100.0 * (current - baseline) / abs(baseline)


def change_text(baseline: float | None, current: float | None, unit: str = "") -> str:
    """The change from ``baseline`` to ``current``: "+4.2%", or the signed
    absolute difference when the baseline is below ``PERCENT_FLOOR``
    (e.g. "+0.0289 ratio"); "n/a" when a side is missing."""
    if baseline is None or current is None:
        return "n/a"
    pct = percent_change(baseline, current)
    return f"{pct:+.1f}%" if pct is not None else f"{current - baseline:+.4g}{' ' + unit if unit else ''}"


def _pct(base: float | None, cur: float | None) -> float | None:
    if base is None or cur is None or base == 0:
        return None
    return 100.0 * (cur - base) / abs(base)


def rank_test(base: np.ndarray, cur: np.ndarray, alternative: str = "two-sided") -> float:
    """Mann-Whitney U p-value of ``cur`` vs ``base`` (1.0 when identical)."""
    if np.ptp(np.concatenate([base, cur])) == 0:
        return 1.0
    return float(mannwhitneyu(cur, base, alternative=alternative).pvalue)


def _metric_changes(b: Side, c: Side, alpha: float) -> list[MetricChange]:
    out = []
    for mid in sorted(set(b.metrics) | set(c.metrics)):
        base, cur = b.metrics.get(mid), c.metrics.get(mid)
        change = MetricChange(id=mid, unit=b.units.get(mid) or c.units.get(mid) or "", baseline=base,
                              current=cur, change=None if base is None or cur is None else cur - base,
                              change_pct=_pct(base, cur))
        bs, cs = b.samples.get(mid), c.samples.get(mid)
        if bs is not None and cs is not None and min(len(bs), len(cs)) >= MIN_SAMPLES:
            p = rank_test(bs, cs)
            bm, cm = float(np.median(bs)), float(np.median(cs))
            effect = abs(cm - bm) / abs(bm) if bm else 0.0
            floor = max(MIN_EFFECT, dispersion_floor(bs, cs))
            change.test = SampleTest(method="Mann-Whitney U, two-sided, per-step samples",
                                     n_baseline=len(bs), n_current=len(cs), baseline_median=bm,
                                     current_median=cm, p_value=p)
            change.beyond_noise = bool(p < alpha and effect > floor)
        out.append(change)
    return out


def _finding_changes(b: Side, c: Side) -> list[FindingChange]:
    out = []
    for rule in list(c.findings) + [r for r in b.findings if r not in c.findings]:
        bf, cf = b.findings.get(rule), c.findings.get(rule)
        f = cf or bf
        if bf is None:
            status = "new"
        elif cf is None:
            status = "resolved"
        else:
            d = SEVERITY_ORDER[cf.severity] - SEVERITY_ORDER[bf.severity]
            status = "worse" if d > 0 else "better" if d < 0 else "same"
        out.append(FindingChange(
            rule=rule, id=f.id, title=f.title, status=status,
            baseline_severity=bf.severity if bf else None, current_severity=cf.severity if cf else None,
            baseline_stake_ms=bf.time_at_stake_ms if bf else None,
            current_stake_ms=cf.time_at_stake_ms if cf else None, message=f.message))
    return out


def _contributors(b: Side, c: Side) -> list[Contributor]:
    out = []
    for key in set(b.contributors) | set(c.contributors):
        base, cur = b.contributors.get(key), c.contributors.get(key)
        delta = (cur or 0.0) - (base or 0.0)
        out.append(Contributor(kind=key[0], name=key[1], type=key[2], baseline_ms=base, current_ms=cur,
                               change_ms=round(delta, 4), change_pct=_pct(base, cur)))
    return out


def few_steps(baseline: Side, current: Side) -> str | None:
    """A note when no metric could be tested for noise because a side has
    fewer than ``MIN_SAMPLES`` per-step samples (None otherwise)."""
    counts = [(len(baseline.samples[m]), len(current.samples[m]))
              for m in SAMPLE_COLUMNS if m in baseline.samples and m in current.samples]
    if any(min(n) >= MIN_SAMPLES for n in counts):
        return None
    if not counts:
        return Message("cmp_note_no_samples")
    b, c = max(n[0] for n in counts), max(n[1] for n in counts)
    return Message("cmp_note_few_steps", baseline=str(b), current=str(c), need=str(MIN_SAMPLES))


def check_alpha(alpha: float | None) -> None:
    """ConfigError when a significance level given is outside the gate's
    bounds (``advisor.regression.budgets``)."""
    from advisor.regression.budgets import MAX_ALPHA, MIN_ALPHA

    if alpha is not None and not MIN_ALPHA <= alpha <= MAX_ALPHA:
        raise ConfigError(f"--alpha {alpha}: must be between {MIN_ALPHA:g} and {MAX_ALPHA:g}")


def compare(baseline: Side, current: Side, *, alpha: float = DEFAULT_ALPHA) -> Comparison:
    """Compare two sides (see module doc). Raises InputError when they
    profile different models."""
    common = check_same_model(baseline, current)
    contribs = _contributors(baseline, current)
    notes = []
    if common is None:
        notes.append(Message("cmp_note_no_op_names"))
    if baseline.runs > 1:
        notes.append(Message("cmp_note_median_runs", runs=str(baseline.runs)))
    short = few_steps(baseline, current)
    if short:
        notes.append(short)
    b_ref, c_ref = _ref(baseline), _ref(current)
    if b_ref.where != c_ref.where:
        notes.append(Message("cmp_note_platforms", baseline=b_ref.where, current=c_ref.where))
    return Comparison(
        baseline=b_ref, current=c_ref, alpha=alpha,
        metrics=_metric_changes(baseline, current, alpha),
        findings=_finding_changes(baseline, current),
        growth=sorted((x for x in contribs if x.change_ms > 0), key=lambda x: -x.change_ms)[:GROWTH_LIMIT],
        shrink=sorted((x for x in contribs if x.change_ms < 0), key=lambda x: x.change_ms)[:GROWTH_LIMIT],
        common_ops=common, notes=notes,
    )
