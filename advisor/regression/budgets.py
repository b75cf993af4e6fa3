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

    [gate.budgets]               # metric id (or alias) = allowed change
    step_time_ms = "+5%"         # slower by more than 5% fails
    "step.data_wait_ms" = "+2ms" # absolute budgets in the metric's unit
    "step.computing_ratio" = "-0.05"   # "-" : a drop is the regression

Every threshold lives here once: ``DEFAULT_*`` below (the significance level
is the comparison's, ``advisor.regression.compare.DEFAULT_ALPHA``). A bad
table raises ``ConfigError`` with one line naming the file and the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from advisor.errors import ConfigError
from advisor.model import SEVERITY_ORDER
from advisor.regression.compare import DEFAULT_ALPHA
from advisor.settings import Settings, load_settings

#: Default budgets: a significant step-time regression of more than 5% fails.
DEFAULT_BUDGETS = {"step_time_ms": "+5%"}
#: Default findings that fail: new findings of high severity or above.
DEFAULT_FAIL_ON = ["high"]
#: History baseline: the median of the last N runs on the branch.
DEFAULT_BASELINE_RUNS = 10

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
    alpha: float = Field(DEFAULT_ALPHA, gt=0, lt=0.5)
    baseline_runs: int = Field(DEFAULT_BASELINE_RUNS, ge=1, le=1000)
    run_noise: str = "0%"
    fail_on_anomaly: bool = False
    source: str = Field("defaults", exclude=True, description="where the config came from")

    @field_validator("budgets")
    @classmethod
    def _budgets(cls, value: dict[str, str]) -> dict[str, str]:
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
        if not m or m.group(1) == "-" or m.group(3) != "%":
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
    config.source = str(path)
    return config


def load_gate_config(path: Path | None = None, *, start: Path | None = None,
                     known_rules: set[str] | None = None) -> GateConfig:
    """The gate config of the file ``path``, else of the config file found
    from ``start`` (``advisor.settings.load_settings``), else the defaults."""
    return gate_config(load_settings(path, start=start), known_rules)
