"""The rule file format: one YAML file per rule, validated by this schema.

``advisor schema --rules`` prints the generated JSON Schema. Conditions,
gains, confidences and scopes are Google CEL expressions evaluated over the
metric namespaces (the first part of each metric id, ``step.free_ratio``
being the metric of that id) plus ``params``; messages and fix snippets are
Jinja2 templates rendered in a sandbox over the same names, plus ``run``
(the run's framework, device and GPU model, see
:mod:`advisor.engine.evaluation`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Level = Literal["info", "low", "medium", "high", "critical"]
#: Highest confidence of a finding whose direct evidence the profile lacks
#: (its ``confirm.direct`` is false): the symptom it rests on has other
#: causes the profile cannot rule out, so the call is no better than even.
INFERRED_CONFIDENCE = 0.5
FRAMEWORKS = ("mindspore", "pytorch", "torch_npu")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Param(Strict):
    """A threshold the user may override (``--set RULE.PARAM=VALUE``)."""

    default: float
    description: str


class FixText(Strict):
    text: str = Field(description="what to change, one or two sentences")
    code: str | None = Field(None, description="a snippet to try (Jinja2 template)")


class Explanation(Strict):
    what: str = Field(description="What it detects")
    why: str = Field(description="Why it matters")
    how: str = Field(description="How to fix it")


class Example(Strict):
    """A named metric set on which the rule must fire or pass; a firing
    example may also state the finding's severity and estimated gain."""

    name: str
    metrics: dict[str, Any] = Field(description="metric id -> value")
    framework: str = "unknown"
    device: str = Field("unknown", description="the run's device (cpu, gpu, ascend), for rules that apply to some")
    expect: Literal["fire", "pass"]
    severity: Level | None = Field(None, description="the finding's severity (fire examples only)")
    gain_ms: float | None = Field(
        None, description="the finding's estimated gain in ms per step (fire examples only)"
    )
    gain_tolerance_ms: float = Field(0.01, ge=0, description="how far the gain may be from gain_ms")

    @model_validator(mode="after")
    def _outcome_of_a_firing_example(self) -> Example:
        if self.expect != "fire" and (self.severity is not None or self.gain_ms is not None):
            raise ValueError("severity and gain_ms describe a finding: only a 'fire' example has one")
        return self


class AppliesTo(Strict):
    frameworks: list[str] = Field(default_factory=lambda: ["any"])
    devices: list[str] = Field(default_factory=lambda: ["any"])


class Caveat(AppliesTo):
    """A caveat true on some platforms only (``frameworks`` / ``devices`` as
    in ``applies_to``): a finding carries it unless the run's framework or
    device is known and not listed (``caveat_holds``)."""

    text: str


def caveat_text(caveat: str | Caveat) -> str:
    """The text of a rule's caveat, plain or conditional."""
    return caveat if isinstance(caveat, str) else caveat.text


def caveat_holds(caveat: str | Caveat, framework: str, device: str) -> bool:
    """Whether ``caveat`` belongs on a finding of a run on ``framework`` /
    ``device``: a plain caveat always; a conditional one unless the run's
    framework or device is known and not among those it names (a caveat for
    MindSpore stays on an Ascend run whose framework is not recorded)."""
    if isinstance(caveat, str):
        return True
    return all(value == "unknown" or "any" in names or value in names
               for value, names in ((framework, caveat.frameworks), (device, caveat.devices)))


class Scope(Strict):
    ranks: str | None = Field(None, description="CEL: rank or list of ranks")
    steps: str | None = None
    ops: str | None = Field(None, description="CEL: op name or list of names")


class Confirm(Strict):
    """How sure the rule's story is: whether the profile holds the direct
    evidence of the cause, and what would confirm it when it does not."""

    direct: str = Field(
        description="CEL: true when the profile holds the direct evidence of the cause (e.g. the data "
        "queue's samples for a data wait); false: the cause is inferred from its symptom"
    )
    text: str = Field(
        description="Jinja2 template appended to the message when `direct` is false: what the finding "
        "is inferred from and which recorded data would confirm it"
    )


#: Most ``let`` expressions a rule may have: each is evaluated whenever the
#: rule fires, and a rule file may come from the repository under test (the
#: built-in rules use at most two).
MAX_LETS = 16


class Rule(Strict):
    id: str = Field(pattern=r"^ADV\d{3}$", description="stable code, never reused")
    name: str = Field(description="kebab-case, names the problem")
    title: str
    group: Literal["data", "compute", "communication", "cluster", "host", "stability", "habits"]
    claims: str | None = Field(
        None,
        pattern=r"^[a-z][a-z0-9_]*$",
        description="the time pool the finding's time comes from (e.g. data_wait, host_idle, "
        "fp32_matrix): findings of rules claiming the same pool are one finding, the one with the "
        "largest gain leading the others (its contributing causes); default: the rule's own pool",
    )
    symptom: bool = Field(
        False,
        description="the rule measures an effect (steps slower than the rest, an idle device) whose cause other "
        "rules of its `claims` pool name: in the pool, a finding that names a cause leads it, whatever the two "
        "estimates",
    )
    status: Literal["preview", "stable", "deprecated"] = "stable"
    severity: Level | Literal["auto"] = Field(
        "auto", description="auto: from the estimated gain's share of the step"
    )
    applies_to: AppliesTo = Field(default_factory=AppliesTo)
    requires: list[str] = Field(default_factory=list, description="metric ids that must all exist")
    requires_any: list[str] = Field(
        default_factory=list, description="metric ids of which at least one must exist"
    )
    params: dict[str, Param] = Field(default_factory=dict)
    condition: str
    time_at_stake: str | None = Field(
        None, description="CEL: ms per step attributable to the cause (severity follows it)"
    )
    estimated_gain: str | None = Field(
        None, description="CEL: ms per step a fix is expected to save (<= time at stake; the expression "
        "sees the time at stake in ms as time_at_stake)"
    )
    confidence: str | None = Field(None, description="CEL: 0..1")
    let: dict[str, str] = Field(
        default_factory=dict,
        description="named CEL expressions, for a case the rule's other parts share: evaluated in order once "
        "the rule fires, after the time at stake (which they see as time_at_stake); the gain, confidence, "
        "scope and confirm expressions read them as let.NAME, and so do the message, confirm text and fixes",
    )
    confirm: Confirm | None = Field(
        None,
        description="the direct evidence of the cause; without it the finding is inferred: its "
        "confidence is capped and its message says what would confirm it",
    )
    scope: Scope = Field(default_factory=Scope)
    message: str
    explanation: Explanation
    fix: dict[str, FixText] = Field(description="per framework, or 'default'")
    caveats: list[str | Caveat] = Field(
        default_factory=list,
        description="what the finding cannot tell: a text, or {text, frameworks, devices} for one that is "
        "true on those platforms only")
    references: list[str] = Field(default_factory=list)
    examples: list[Example] = Field(min_length=2)

    @field_validator("name")
    @classmethod
    def _kebab(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", v):
            raise ValueError(f"rule name {v!r} is not kebab-case")
        return v

    @field_validator("let")
    @classmethod
    def _let_names(cls, v: dict[str, str]) -> dict[str, str]:
        bad = [name for name in v if not re.fullmatch(r"[a-z][a-z0-9_]*", name)]
        if bad:
            raise ValueError(f"let name(s) {bad} are not lower-case identifiers")
        if len(v) > MAX_LETS:
            raise ValueError(f"{len(v)} let expressions, more than the {MAX_LETS} a rule may have")
        return v

    @field_validator("fix")
    @classmethod
    def _fix_keys(cls, v: dict[str, FixText]) -> dict[str, FixText]:
        unknown = set(v) - set(FRAMEWORKS) - {"default"}
        if unknown:
            raise ValueError(f"fix for unknown framework(s): {sorted(unknown)}")
        if not v:
            raise ValueError("a rule needs at least one fix")
        return v

    @field_validator("examples")
    @classmethod
    def _both_outcomes(cls, v: list[Example]) -> list[Example]:
        if {e.expect for e in v} != {"fire", "pass"}:
            raise ValueError("examples must include at least one 'fire' and one 'pass'")
        return v

    def metric_ids(self) -> set[str]:
        return set(self.requires) | set(self.requires_any)

    @property
    def pool(self) -> str:
        """The time pool this rule's findings claim (``claims``, else its own name)."""
        return self.claims or self.name
