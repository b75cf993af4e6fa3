"""The gate's configuration: the ``[gate]`` table of the user's config file
(found and read by ``advisor.settings``; in ``pyproject.toml`` it is
``[tool.advisor.gate]``). Without one, the defaults below apply.

::

    [gate]
    alpha = 0.01                 # significance level of the rank test
    fail_on = ["high"]           # rule names and/or one severity ("high" = high or above)
    ignore = ["step-outlier"]    # rules whose findings never fail the gate
    baseline_runs = 10           # history baseline: median of the last N runs
    run_noise = "0%"             # declared run-to-run noise of the runner
    fail_on_anomaly = false      # also fail when the history anomaly model flags the run
    on_unmeasurable = "error"    # a budget that cannot be evaluated: "error" (exit 2) or "fail" (exit 1)

    [gate.budgets]               # metric id (or alias) = allowed change
    step_time_ms = "+5%"         # slower by more than 5% fails
    "step.data_wait_ms" = "+2ms" # absolute budgets in the metric's unit
    "step.computing_ratio" = "-0.05"   # "-" : a drop is the regression

Every threshold lives here once: ``DEFAULT_*`` below (the significance level
is the comparison's, ``advisor.regression.compare.DEFAULT_ALPHA``). A bad
table raises ``ConfigError`` with one line naming the file and the key:
unknown keys, rules or metrics, an alpha outside [``MIN_ALPHA``,
``MAX_ALPHA``], an empty ``budgets`` table, amounts that are not finite.

**Weakening** (:func:`weakenings`): a table that loosens the defaults --
a smaller ``alpha``, any ``ignore``, a ``fail_on`` without ``high`` or a
lower severity, a default budget removed or widened, a ``run_noise`` above
0%, a ``baseline_runs`` above the default. Allowed, and named in every verdict; refused under strict config when
the file belongs to the working tree under test (``advisor.settings``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from advisor.errors import ConfigError
from advisor.model import SEVERITY_ORDER
from advisor.regression.compare import DEFAULT_ALPHA
from advisor.settings import Settings, load_settings, untrusted_refusal

#: Default budgets: a significant step-time regression of more than 5% fails.
DEFAULT_BUDGETS = {"step_time_ms": "+5%"}
#: Default findings that fail: new findings of high severity or above.
DEFAULT_FAIL_ON = ["high"]
#: History baseline: the median of the last N runs on the branch.
DEFAULT_BASELINE_RUNS = 10
#: Smallest significance level a config may set. Each budget's rank test
#: also checks that its sample sizes can reach the level at all
#: (``advisor.regression.gate``); below this the gate would ask for odds
#: of one in a million that no profile of a few dozen steps is meant to give.
MIN_ALPHA = 1e-6
#: Largest significance level a config may set: above it the rank test
#: alone would call one in five runs of an unchanged program significant.
MAX_ALPHA = 0.2
#: What a budget that cannot be evaluated does (a metric the run did not
#: measure, a zero baseline for a relative budget, too few steps to reach
#: alpha): "error" -- exit 2, as for bad input; "fail" -- the check fails
#: (exit 1). Never a pass.
UNMEASURABLE = ("error", "fail")

#: Short names for budget keys (metric ids are accepted as they are).
METRIC_ALIASES = {
    "step_time_ms": "step.time_ms",
    "computing_ms": "step.computing_ms",
    "data_wait_ms": "step.data_wait_ms",
    "free_ms": "step.free_ms",
    "exposed_comm_ms": "step.exposed_comm_ms",
}
_BUDGET_RE = re.compile(r"^\s*([+-])?\s*(\d+(?:\.\d*)?|\.\d+)\s*(%|ms)?\s*$")


@dataclass(frozen=True)
class Budget:
    """One parsed budget: ``metric`` may change by ``amount`` in ``direction``
    (+1: an increase is the regression, -1: a decrease); ``relative``
    amounts are fractions of the baseline, absolute ones are in the
    metric's unit."""

    key: str
    metric: str
    direction: int
    amount: float
    relative: bool
    text: str


def parse_budget(key: str, text: str) -> Budget:
    """``"+5%"`` / ``"5%"`` / ``"+2ms"`` / ``"-0.05"`` -> Budget (ValueError if not)."""
    m = _BUDGET_RE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a budget (expected e.g. '+5%', '+2ms' or '-0.05')")
    sign, number, unit = m.groups()
    amount = float(number)
    if not math.isfinite(amount):
        raise ValueError(f"{text!r} is not a finite amount")
    relative = unit == "%"
    if relative:
        amount /= 100.0
    metric = METRIC_ALIASES.get(key, key)
    return Budget(key, metric, -1 if sign == "-" else 1, amount, relative, str(text).strip())


class GateConfig(BaseModel):
    """The ``[gate]`` table (see module doc)."""

    model_config = ConfigDict(extra="forbid")

    budgets: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_BUDGETS))
    fail_on: list[str] = Field(default_factory=lambda: list(DEFAULT_FAIL_ON))
    ignore: list[str] = Field(default_factory=list)
    alpha: float = Field(DEFAULT_ALPHA, ge=MIN_ALPHA, le=MAX_ALPHA, allow_inf_nan=False)
    baseline_runs: int = Field(DEFAULT_BASELINE_RUNS, ge=1, le=1000)
    run_noise: str = "0%"
    fail_on_anomaly: bool = False
    on_unmeasurable: Literal["error", "fail"] = UNMEASURABLE[0]
    source: str = Field("defaults", exclude=True, description="where the config came from")

    @field_validator("budgets")
    @classmethod
    def _budgets(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("is empty, so the gate would check no metric (leave the table out for the "
                             f"default {', '.join(f'{k} = {v!r}' for k, v in DEFAULT_BUDGETS.items())})")
        for key, text in value.items():
            try:
                parse_budget(key, text)
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None
        return value

    @field_validator("run_noise")
    @classmethod
    def _noise(cls, value: str) -> str:
        m = _BUDGET_RE.match(value)
        if not m or m.group(1) == "-" or m.group(3) != "%" or not math.isfinite(float(m.group(2))):
            raise ValueError(f"{value!r} is not a relative noise level (expected e.g. '10%')")
        return value

    def parsed_budgets(self) -> list[Budget]:
        return [parse_budget(k, v) for k, v in self.budgets.items()]

    @property
    def run_noise_fraction(self) -> float:
        return parse_budget("run_noise", self.run_noise).amount

    @property
    def fail_severity(self) -> str | None:
        """The lowest severity that fails (None: only named rules fail)."""
        sev = [s for s in self.fail_on if s in SEVERITY_ORDER]
        return min(sev, key=SEVERITY_ORDER.__getitem__) if sev else None

    @property
    def fail_rules(self) -> set[str]:
        return {s for s in self.fail_on if s not in SEVERITY_ORDER}


def gate_config(settings: Settings, known_rules: set[str] | None = None) -> GateConfig:
    """The gate config of ``settings`` (the defaults without a config file).
    ``known_rules``: rule names and ids accepted in ``fail_on``/``ignore``
    (default: the built-in rules and the config's own rule files). Raises
    ConfigError (one line)."""
    if settings.source is None:
        return GateConfig()
    path, prefix = settings.source, settings.gate_table
    try:
        config = GateConfig.model_validate(settings.gate)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in (prefix, *err["loc"]))
        msg = err["msg"].removeprefix("Value error, ")
        if tuple(err["loc"]) == ("budgets",) and ": " in msg:   # name the budget key itself
            key, msg = msg.split(": ", 1)
            loc = f"{loc}.{key}"
        raise ConfigError(f"{path}: {loc}: {msg}") from None
    if known_rules is None:
        from advisor.engine.loader import load_rules

        rules = load_rules(settings.rules)
        known_rules = {r.name for r in rules} | {r.id for r in rules}
    for key in ("fail_on", "ignore"):
        for name in getattr(config, key):
            if name not in known_rules and not (key == "fail_on" and name in SEVERITY_ORDER):
                hint = " or a severity (" + ", ".join(SEVERITY_ORDER) + ")" if key == "fail_on" else ""
                raise ConfigError(f"{path}: {prefix}.{key}: unknown rule {name!r} (see `advisor rules list`{hint})")
    from advisor.metrics import REGISTRY

    for b in config.parsed_budgets():
        if b.metric not in REGISTRY:
            raise ConfigError(f"{path}: {prefix}.budgets.{b.key}: unknown metric {b.metric!r} "
                              f"(see `advisor metrics list`; aliases: {', '.join(METRIC_ALIASES)})")
    if settings.untrusted:
        for key, why in weakenings(config):
            raise ConfigError(f"{path}: {prefix}.{key}: {why}; {untrusted_refusal('settings that loosen the gate')}")
    config.source = str(path)
    return config


def weakenings(config: GateConfig) -> list[tuple[str, str]]:
    """(key, why) for each way ``config`` loosens the default gate (see the
    module doc); empty when it only keeps or tightens the defaults."""
    out: list[tuple[str, str]] = []
    if config.alpha < DEFAULT_ALPHA:
        out.append(("alpha", f"{config.alpha:g} is below the default {DEFAULT_ALPHA:g}, so a regression "
                             "needs more evidence to fail"))
    if config.ignore:
        out.append(("ignore", f"{', '.join(config.ignore)}: findings of ignored rules never fail"))
    default_floor = min(DEFAULT_FAIL_ON, key=SEVERITY_ORDER.__getitem__)
    floor = config.fail_severity
    if floor is None or SEVERITY_ORDER[floor] > SEVERITY_ORDER[default_floor]:
        out.append(("fail_on", f"no longer fails on new findings of severity {default_floor} "
                               f"({'only on ' + floor + ' and above' if floor else 'only on named rules'})"))
    mine = config.parsed_budgets()
    for key, text in DEFAULT_BUDGETS.items():
        default = parse_budget(key, text)
        kept = [b for b in mine if b.metric == default.metric and b.direction == default.direction
                and b.relative == default.relative and b.amount <= default.amount]
        if not kept:
            wider = [b.text for b in mine if b.metric == default.metric]
            out.append((f"budgets.{key}", f"{' / '.join(wider)} is looser than the default {text}" if wider
                        else f"drops the default budget {key} = {text!r}"))
    if config.run_noise_fraction > 0:
        out.append(("run_noise", f"{config.run_noise} widens every budget's limit"))
    if config.baseline_runs > DEFAULT_BASELINE_RUNS:
        out.append(("baseline_runs", f"{config.baseline_runs} is above the default {DEFAULT_BASELINE_RUNS}: a history "
                                     "baseline reaching further back is older (slower before later speed-ups) and "
                                     "its run-to-run floor wider"))
    return out


def load_gate_config(path: Path | None = None, *, start: Path | None = None,
                     known_rules: set[str] | None = None) -> GateConfig:
    """The gate config of the file ``path``, else of the config file found
    from ``start`` (``advisor.settings.load_settings``), else the defaults."""
    return gate_config(load_settings(path, start=start), known_rules)
