"""Rule texts: messages and fix snippets are Jinja2 templates rendered in a
sandbox over the metric namespaces, ``params`` and the finding's numbers.

Filters: ``ms`` (a number of milliseconds, "12.35 ms"), ``pct`` (a ratio as
a percentage, "50.0%"), ``ranks`` (rank ids as runs, "0-3, 7"); each gives
"n/a" for a value that is absent or not a finite number, since a metric the
rule does not require may be missing.

Checked rendering (``checked=True``, what ``advisor rules validate`` uses
on a rule's examples) fails where a name is surely misspelt: a name that is
neither a metric namespace nor one the engine provides, or a parameter the
rule does not have. An absent metric stays "undefined" (test it with
``is defined``); a misspelt metric id is caught by the unknown-metric check.
"""

from __future__ import annotations

import math
from typing import Any

from jinja2 import Undefined, nodes
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.sandbox import SandboxedEnvironment
from jinja2.utils import missing


class Params(dict):
    """A rule's parameters in a template context (marks them for checked rendering)."""


class _CheckedUndefined(Undefined):
    """Undefined that raises at once for an unknown top-level name or parameter."""

    def __init__(self, hint=None, obj=missing, name=None, exc=UndefinedError) -> None:
        super().__init__(hint, obj, name, exc)
        if obj is missing or isinstance(obj, Params):
            self._fail_with_undefined_error()


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


def ms_filter(v: Any) -> str:
    f = _number(v)
    return f"{f:.2f} ms" if f is not None else "n/a"


def pct_filter(v: Any) -> str:
    f = _number(v)
    return f"{100 * f:.1f}%" if f is not None else "n/a"


def ranks_filter(v: Any) -> str:
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


def _sandbox(undefined: type[Undefined]) -> SandboxedEnvironment:
    env = SandboxedEnvironment(autoescape=False, trim_blocks=True, lstrip_blocks=True, undefined=undefined)
    env.filters.update(ms=ms_filter, pct=pct_filter, ranks=ranks_filter)
    return env


SANDBOX = _sandbox(Undefined)
CHECKING_SANDBOX = _sandbox(_CheckedUndefined)


def check(template: str) -> None:
    """Raise the parser's error when ``template`` is not a valid template,
    and SecurityError when it reaches for an attribute the sandbox refuses
    (a name starting with ``_``: ``x.__class__``, ``x['_y']``,
    ``x|attr('__class__')``), which would otherwise render as nothing or
    fail only on the profile that fires the rule."""
    for node in SANDBOX.parse(template).find_all((nodes.Getattr, nodes.Getitem, nodes.Filter)):
        if isinstance(node, nodes.Getattr):
            name = node.attr
        elif isinstance(node, nodes.Getitem):
            name = node.arg.value if isinstance(node.arg, nodes.Const) else None
        else:
            name = node.args[0].value if node.name == "attr" and node.args and isinstance(node.args[0], nodes.Const) else None
        if isinstance(name, str) and name.startswith("_"):
            raise SecurityError(f"access to attribute {name!r} is unsafe (the template sandbox refuses it)")


def render(template: str, context: dict[str, Any], *, checked: bool = False) -> str:
    """``template`` rendered over ``context`` (see the module doc for ``checked``)."""
    env = CHECKING_SANDBOX if checked else SANDBOX
    return env.from_string(template).render(context)
