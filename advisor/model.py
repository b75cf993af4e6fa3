"""The report data model: what analysis produces and every renderer reads.

``Report`` is the machine contract written to ``report.json``; its JSON
Schema (``advisor schema``) is generated from these pydantic models. It is
data only: the renderers (``advisor.reports``) lay it out.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr

from advisor.profile import Skip

Severity = Literal["info", "low", "medium", "high", "critical"]
SEVERITY_ORDER: dict[str, int] = {"info": 0, "low": 1, "medium": 2, "high": 3, "critical": 4}
Scope = Literal["run", "rank", "step", "op", "link"]
MetricValue = float | int | bool | str | list[Any] | dict[str, Any] | None


class Metric(BaseModel):
    """A named, unit-bearing value with the evidence that produced it."""

    id: str = Field(description="dotted id, e.g. step.free_ratio")
    value: MetricValue
    unit: str = Field(description="ms, ratio (0..1), count, GB/s, MB, text, list ...")
    scope: Scope = "run"
    evidence: dict[str, Any] = Field(
        default_factory=dict,
        description="what produced the value: ranks, steps, ops, per-rank values",
    )
    stderr: float | None = Field(
        None, description="standard error of a value that is a mean over steps (same unit); null otherwise"
    )
    samples: int | None = Field(None, description="the number of steps the mean and its stderr rest on")


class Fix(BaseModel):
    """The change to try, for the detected framework."""

    framework: str
    text: str
    code: str | None = None


class FindingScope(BaseModel):
    """Where the problem is (each list empty when it applies run-wide)."""

    ranks: list[int] = Field(default_factory=list)
    steps: list[int] = Field(default_factory=list)
    ops: list[str] = Field(default_factory=list)


class Finding(BaseModel):
    """One rule that fired on this run."""

    rule: str = Field(description="the rule's kebab-case name, e.g. input-bound")
    id: str = Field(description="the rule's stable code, e.g. ADV001")
    title: str
    severity: Severity
    message: str
    estimated_gain_ms: float | None = Field(
        None, description="step time saved per step if the cause went away; null when unknown"
    )
    estimated_gain_pct: float | None = Field(None, description="the same, in % of step time")
    time_at_stake_ms: float | None = Field(
        None, description="step time per step attributable to the cause; severity follows its share"
    )
    time_at_stake_low_ms: float | None = Field(
        None, description="the time at stake the profiled steps support with 90% confidence, when it is a "
        "mean over steps; severity above medium needs its share to reach the band"
    )
    confidence: float | None = Field(None, description="0..1, how sure the call is")
    scope: FindingScope = Field(default_factory=FindingScope)
    evidence: dict[str, MetricValue] = Field(default_factory=dict)
    fix: Fix | None = None
    caveats: list[str] = Field(default_factory=list)
    claims: str | None = Field(
        None,
        description="the time pool the finding's time comes from (the rule's `claims`, else its name); "
        "findings of one pool are one finding",
    )
    direct_evidence: bool | None = Field(
        None,
        description="whether the profile holds the direct evidence of the cause (rules with a `confirm` "
        "check); false: the cause is inferred, its confidence is lowered and the message says "
        "what would confirm it",
    )
    contributing: list[Finding] = Field(
        default_factory=list,
        description="other causes claiming the same time (same `claims` pool), each a finding of its own "
        "rule; their gains are not added to this one's",
    )


class CheckGroup(BaseModel):
    """One kind of check (a rule group: what its rules judge) that matters for this run."""

    group: str = Field(description="rule group: data, host, compute, communication, cluster")
    judged: bool = Field(description="at least one of its rules was evaluated")
    evaluated: list[str] = Field(default_factory=list, description="its rules that were evaluated")
    skipped: list[str] = Field(default_factory=list, description="its rules that could not be evaluated")


class Verdict(BaseModel):
    """The run's verdict, shown before the findings (see advisor.engine.verdict)."""

    status: Literal["problems", "clean", "inconclusive"]
    reason: str = Field(description="one line")
    missing: list[str] = Field(
        default_factory=list, description="what could not be judged, and why (one line each)"
    )
    checks: list[CheckGroup] = Field(
        default_factory=list, description="the kinds of checks that matter for this run, judged or not"
    )


class ConfigUsed(BaseModel):
    """The configuration an analysis or a gate verdict applied
    (``advisor.settings.Settings.used``), so a reader sees what changed
    the rules or the gate."""

    file: str | None = Field(None, description="the config file read; null: none (built-in defaults)")
    origin: Literal["none", "found", "given"] = Field(
        "none", description="found: looked up in the working tree; given: --config")
    in_working_tree: bool = Field(False, description="the file lies in the working tree under test")
    strict: bool = Field(False, description="strict config was on (working-tree files may not weaken checks)")
    rules: list[str] = Field(default_factory=list, description="extra rule files or folders (config and --rules)")
    thresholds: dict[str, float] = Field(default_factory=dict, description='"rule.param": value, from the file')
    overrides: dict[str, float] = Field(default_factory=dict, description='"rule.param": value, from --set')
    gate: dict[str, Any] = Field(default_factory=dict, description="the file's [gate] settings (gate verdicts)")


class RunInfo(BaseModel):
    """What was analyzed."""

    framework: str
    device: str
    device_model: str | None = Field(None, description="the accelerator's model as the profile names it "
                                     "(null where it does not)")
    source_format: str
    source_version: str | None = None
    source_path: str
    ranks: list[int]
    world_size: int | None = Field(None, description="ranks in the job as the profile records it (null: not "
                                   "recorded; ``ranks`` lists those analyzed)")
    steps_found: int
    notes: list[str] = Field(default_factory=list)
    advisor_version: str
    generated_at: str = Field(description="ISO-8601 UTC time of the analysis")
    config: ConfigUsed | None = Field(None, description="the config the analysis applied (null: not recorded)")


class Report(BaseModel):
    """The whole result of one analysis."""

    schema_version: int = 1
    run: RunInfo
    verdict: Verdict | None = Field(
        None, description="problems, clean or inconclusive, with what could not be judged (null in "
        "reports written before verdicts existed)"
    )
    findings: list[Finding] = Field(
        default_factory=list,
        description="primary findings, largest expected gain (estimated gain x confidence) first; causes of the "
        "same time are in each one's `contributing`",
    )
    metrics: dict[str, Metric] = Field(default_factory=dict)
    skipped: list[Skip] = Field(default_factory=list)
    tables: dict[str, list[dict[str, Any]]] = Field(
        default_factory=dict,
        description=(
            "chart-ready rows, already aggregated (templates never compute): "
            "step_breakdown (per step, mean over ranks), rank_breakdown (per rank, "
            "mean over steps), top_ops, links; columns in ms"
        ),
    )
    _lang: str = PrivateAttr(default="en")

    # ------------------------------------------------------------ Python API

    def __repr__(self) -> str:
        """One line: the verdict, how many findings, the top one and the
        source (``print(report)``; the data is in the fields)."""
        status = self.verdict.status if self.verdict else "no verdict"
        contributing = len(self.all_findings()) - len(self.findings)
        parts = [f"{status}, {len(self.findings)} finding(s)"
                 + (f" (+{contributing} contributing)" if contributing else "")]
        if self.findings:
            top = self.findings[0]
            gain = (f", estimated gain {top.estimated_gain_ms:.3g} ms/step"
                    if top.estimated_gain_ms is not None else "")
            parts.append(f"top: [{top.severity}] {top.rule} ({top.id}) {top.title}{gain}")
        return f"<advisor Report {self.run.source_path}: {'; '.join(parts)}>"

    __str__ = __repr__

    def all_findings(self) -> list[Finding]:
        """Every rule that fired: each primary finding followed by its
        contributing causes. A rule that fired is a finding whether it
        leads its time pool or contributes to it (the gate and history
        count both)."""
        return [g for f in self.findings for g in (f, *f.contributing)]

    @property
    def lang(self) -> str:
        """Language the rule texts were rendered in (``en``, ``zh``); the
        default language of a rendering. Not part of report.json."""
        return self._lang

    @lang.setter
    def lang(self, value: str) -> None:
        self._lang = value

    def frame(self, name: str):
        """The table ``name`` of ``tables`` (e.g. ``step_breakdown``,
        ``rank_breakdown``, ``step_series``, ``rank_heatmap``, ``top_ops``,
        ``links``) as a pandas DataFrame; KeyError lists the ones there are.
        ``"metrics"`` and ``"findings"`` give one row per metric / finding."""
        import pandas as pd

        if name == "metrics":
            return pd.DataFrame(
                [{"id": m.id, "value": m.value, "unit": m.unit, "scope": m.scope} for m in self.metrics.values()],
                columns=["id", "value", "unit", "scope"],
            )
        if name == "findings":
            cols = ["rule", "id", "severity", "title", "message", "time_at_stake_ms",
                    "estimated_gain_ms", "estimated_gain_pct", "confidence"]
            return pd.DataFrame([f.model_dump(include=set(cols)) for f in self.findings], columns=cols)
        if name not in self.tables:
            raise KeyError(f"no table {name!r}; the report has: {', '.join(sorted(self.tables)) or 'none'}")
        return pd.DataFrame(self.tables[name])

    @property
    def dataframes(self) -> dict:
        """Every table (plus ``metrics`` and ``findings``) as pandas DataFrames."""
        return {name: self.frame(name) for name in [*self.tables, "metrics", "findings"]}
