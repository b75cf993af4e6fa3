"""The metric registry: every metric is one decorated function.

A metric function takes a Profile and returns its value (or a ``Value``
with evidence). Its docstring is the metric's one definition, printed by
``advisor metrics explain ID`` and shown in reports. The decorator
declares the table columns it needs; when the profile lacks them the metric
is "not evaluated" with that reason, and the function is never called.
A function may also raise ``NotEvaluated(reason)`` when the data is there
but does not support a value (e.g. a single rank for a cluster metric).

Weird data (NaN, inf, negative durations, empty groups) must never crash an
analysis: any other exception a metric function raises becomes a skipped
entry ``metric X failed on this input: <one line>``, and a non-finite value
is "no value". With ``ADVISOR_STRICT=1`` (:func:`advisor.profile.strict_mode`)
they propagate instead: the corpus and end-to-end tests run so, and a
metric that fails on real data fails the test.

``needs`` entries name tables and columns of the Profile's ``SCHEMA``; an
unknown one is an error when the metric is registered (at import).
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from advisor.model import Metric, MetricValue
from advisor.profile import SCHEMA, Profile, Skip, strict_mode
from advisor.runtime import forking


class NotEvaluated(Exception):
    """Raised by a metric function whose inputs cannot support a value."""


@dataclass
class Value:
    """A metric value with the evidence that produced it. A value that is a
    mean over steps may carry its standard error (``stderr``, same unit:
    the sample standard deviation over the ``samples`` steps / sqrt(samples));
    the engine reads it to size a finding's severity (``advisor.engine.evaluation``)."""

    value: MetricValue
    evidence: dict[str, Any] = field(default_factory=dict)
    stderr: float | None = None
    samples: int | None = None


@dataclass(frozen=True)
class MetricSpec:
    id: str
    unit: str
    scope: str
    needs: tuple[str, ...]
    func: Callable[[Profile], Any]

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.func.__doc__ or "")

    @property
    def summary(self) -> str:
        return self.doc.split("\n\n", 1)[0].replace("\n", " ")

    def missing(self, profile: Profile, _seen: dict[str, bool] | None = None) -> str | None:
        """Why this metric cannot be evaluated on ``profile``, or None.
        (``_seen``: answers for ``table.column`` needs already checked.)"""
        for need in self.needs:
            table, _, column = need.partition(".")
            if profile.table(table) is None:
                return f"no {table} table in this profile"
            if column:
                if _seen is None:
                    found = profile.has(table, column)
                elif need in _seen:
                    found = _seen[need]
                else:
                    found = _seen[need] = profile.has(table, column)
                if not found:
                    return f"the {table} table has no {column} values"
        return None


REGISTRY: dict[str, MetricSpec] = {}


def metric_namespaces() -> tuple[str, ...]:
    """The metric namespaces: the first part of every registered metric id
    (``step`` of ``step.free_ratio``), in registration order."""
    return tuple(dict.fromkeys(mid.partition(".")[0] for mid in REGISTRY))


def metric(id: str, *, unit: str, scope: str = "run", needs: tuple[str, ...] | list[str] = ()):
    """Register ``func`` as the definition of metric ``id``.

    ``needs`` lists ``table`` or ``table.column`` entries that must be present
    (ValueError for one the Profile's ``SCHEMA`` does not have).
    """
    for need in needs:
        table, _, column = need.partition(".")
        if table not in SCHEMA or (column and column not in SCHEMA[table]):
            raise ValueError(f"metric {id}: needs {need!r}, which is not a Profile table or column")

    def register(func: Callable[[Profile], Any]) -> Callable[[Profile], Any]:
        if id in REGISTRY:
            raise ValueError(f"metric {id} defined twice")
        if not func.__doc__:
            raise ValueError(f"metric {id} has no docstring (its definition)")
        REGISTRY[id] = MetricSpec(id=id, unit=unit, scope=scope, needs=tuple(needs), func=func)
        return func

    return register


#: Metric modules whose metrics a forked process computes beside this one
#: (``evaluate`` with ``jobs`` above 1): the operator metrics, which share
#: their intermediate tables (``Profile.memo``) among themselves and few
#: with the step, communication and cluster metrics computed here; the two
#: halves take about as long.
APART = frozenset({"advisor.metrics.ops", "advisor.metrics.kernels", "advisor.metrics.sequences"})
#: Operator rows (``ops`` table) from which they are computed apart: below
#: it they take less than forking and collecting them costs (~20 ms).
APART_MIN_OPS = 2000


def evaluate(profile: Profile, jobs: int = 1) -> tuple[dict[str, Metric], list[Skip]]:
    """Compute every registered metric the profile supports (in strict mode
    after checking the profile's tables against its ``SCHEMA``).

    With ``computes_apart``, the metrics of the ``APART`` modules are
    computed in a forked process (``runtime.forking.beside``) while this one
    computes the others: the same results in the same order."""
    if strict_mode():
        profile.check()
    specs = list(REGISTRY.values())
    apart = [s for s in specs if s.func.__module__ in APART] if computes_apart(profile, jobs) else []
    there = forking.beside(_outcomes, profile, apart) if apart else dict
    here = _outcomes(profile, [s for s in specs if s not in apart])
    outcomes = {**here, **there()}
    ordered = [outcomes[i] for i in REGISTRY if i in outcomes]
    return {o.id: o for o in ordered if isinstance(o, Metric)}, [o for o in ordered if isinstance(o, Skip)]


def computes_apart(profile: Profile, jobs: int) -> bool:
    """Whether ``evaluate`` computes the ``APART`` metrics in a process of
    their own: ``jobs`` above 1 and ``APART_MIN_OPS`` operator rows or more."""
    ops = profile.table("ops")
    return jobs > 1 and ops is not None and len(ops) >= APART_MIN_OPS


def _outcomes(profile: Profile, specs: list[MetricSpec]) -> dict[str, Metric | Skip]:
    """Metric id -> its outcome (``_outcome``), for ``specs``."""
    seen: dict[str, bool] = {}  # metrics share needs; each is checked once
    return {spec.id: _outcome(profile, spec, seen) for spec in specs}


def _outcome(profile: Profile, spec: MetricSpec, seen: dict[str, bool]) -> Metric | Skip:
    """One metric's value on ``profile``, or why it has none (module doc)."""
    reason = spec.missing(profile, seen)
    if reason is None:
        try:
            # overflow / 0-divide on weird data is handled by the checks
            # below (non-finite -> no value), not printed at the user
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                out = spec.func(profile)
        except NotEvaluated as exc:
            reason = str(exc)
        except Exception as exc:  # noqa: BLE001 -- bad data must not crash the report
            if strict_mode():
                raise
            reason = f"metric {spec.id} failed on this input: {_one_line(exc)}"
        else:
            if not isinstance(out, Value):
                out = Value(out)
            if out.value is None or _non_finite(out.value):
                reason = "no value on this profile"
            else:
                stderr = _stderr(out)
                return Metric(id=spec.id, value=_plain(out.value), unit=spec.unit, scope=spec.scope,
                              evidence=_plain(out.evidence), stderr=stderr,
                              samples=out.samples if stderr is not None else None)
    return Skip(what=f"metric {spec.id}", reason=reason)


def _stderr(out: Value) -> float | None:
    """``out.stderr`` as a float when it is finite and rests on two or more steps."""
    if out.stderr is None or not out.samples or out.samples < 2 or _non_finite(float(out.stderr)):
        return None
    return float(out.stderr)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text[:200]


def _non_finite(value: Any) -> bool:
    """A scalar NaN or infinity (numpy scalars included)."""
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (list, dict)):
        try:
            value = value.item()
        except (TypeError, ValueError):
            return False
    return isinstance(value, float) and not math.isfinite(value)


def _plain(value: Any) -> Any:
    """numpy/pandas scalars and containers -> plain JSON-able Python values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float):
        if not math.isfinite(value):  # NaN, +-inf: no value (JSON has none)
            return None
        return round(value, 6)
    return value
