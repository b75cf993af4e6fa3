"""Rule texts: messages and fix snippets are Jinja2 templates rendered in a
sandbox over the metric namespaces, ``params`` and the finding's numbers.

Filters: ``ms`` (a number of milliseconds, "12.35 ms"), ``pct`` (a ratio as
a percentage, "50.0%"), ``ranks`` (rank ids as runs, "0-3, 7"); each gives
"n/a" for a value that is absent or not a finite number, since a metric the
rule does not require may be missing; ``zh`` (for the Chinese texts: the
phrases advisor writes into metric values in Chinese,
``advisor.metrics.labels_zh``).

Checked rendering (``checked=True``, what ``advisor rules validate`` uses
on a rule's examples) fails where a name is surely misspelt: a name that is
neither a metric namespace nor one the engine provides, or a parameter the
rule does not have. An absent metric stays "undefined" (test it with
``is defined``); a misspelt metric id is caught by the unknown-metric check.

**Bounds.** A rule file may come from the repository under test, and
Jinja's sandbox keeps a template from Python's internals, not from costing
unbounded time or memory. So a template may not define macros (the only
way to recurse) or loop inside a loop (:func:`check`, when the rule is
loaded); a string or list it builds with ``*``, a ``%`` or ``format``
width, a padding or indent, a ``replace``, and its whole text are at most
``MAX_TEMPLATE_SIZE`` characters; ``**`` of integers is at most
``MAX_POWER_BITS`` bits; and a rendering that takes longer than
``MAX_RENDER_SECONDS`` is stopped. A template that crosses a bound fails
with :class:`TemplateBoundError`, and the finding says its text could not
be rendered.
"""

from __future__ import annotations

import math
import re
import signal
import threading
from contextlib import contextmanager
from typing import Any

from jinja2 import Undefined, nodes
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.sandbox import SandboxedEnvironment
from jinja2.utils import missing


class Params(dict):
    """A rule's parameters in a template context (marks them for checked rendering)."""


class Lets(dict):
    """A rule's ``let`` values in a template context (marks them for checked
    rendering: a name the rule does not define is a typo)."""


class _CheckedUndefined(Undefined):
    """Undefined that raises at once for an unknown top-level name, parameter or let name."""

    def __init__(self, hint=None, obj=missing, name=None, exc=UndefinedError) -> None:
        super().__init__(hint, obj, name, exc)
        if obj is missing or isinstance(obj, (Params, Lets)):
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


def zh_filter(v: Any) -> str:
    """A metric value's text with advisor's own phrases in Chinese
    (``advisor.metrics.labels_zh``), for the zh rule texts."""
    from advisor.metrics.labels_zh import to_zh

    return to_zh(v)


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


#: Longest string or list a template may build, and longest text it may
#: render: a rule's message is a few hundred characters, a fix snippet a
#: few dozen lines.
MAX_TEMPLATE_SIZE = 100_000
#: Largest integer ``**`` may make, in bits (10**300 is about 1000 bits):
#: no rule text needs more, and an integer power tower takes hours.
MAX_POWER_BITS = 4096
#: Longest a template may take to render, in seconds: the built-in rules'
#: take milliseconds. Enforced with a timer signal in the main thread.
MAX_RENDER_SECONDS = 2.0
#: Deepest nesting of ``{% for %}`` loops; the built-in rules nest none.
MAX_LOOP_DEPTH = 1
#: String methods and filters whose integer argument is the size of what they build.
_SIZED = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs", "indent"})
#: A width or precision of six digits or more in a ``%`` or ``format`` spec.
_WIDE_SPEC = re.compile(r"%[-#0 +]*\*|%[-#0 +]*\d{6,}|%[-#0 +]*\d*\.(?:\*|\d{6,})|\{[^{}]*[:!][^{}]*(?:\{|\d{6,})")


class TemplateBoundError(SecurityError):
    """A template crossed one of the bounds of the module doc."""


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (str, list, tuple)) else 0


def _bounded(size: int, what: str) -> None:
    if size > MAX_TEMPLATE_SIZE:
        raise TemplateBoundError(f"{what} would be {size} long, more than {MAX_TEMPLATE_SIZE}")


def _spec_bounded(text: str) -> None:
    if _WIDE_SPEC.search(text):
        raise TemplateBoundError("a format width or precision that is computed or of six digits or more")


def _sized_args(name: str, args, kwargs) -> None:
    for v in (*args, *kwargs.values()):
        if isinstance(v, int) and not isinstance(v, bool):
            _bounded(abs(v), f"{name}()")


class _BoundedSandbox(SandboxedEnvironment):
    """The sandbox with the size bounds of the module doc."""

    intercepted_binops = frozenset({"*", "**", "%"})

    def call_binop(self, context, operator, left, right):
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if _size(seq) and isinstance(n, int) and not isinstance(n, bool):
                    _bounded(len(seq) * n, "a repeated string or list")
        elif operator == "**":
            if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1 \
                    and left.bit_length() * right > MAX_POWER_BITS:
                raise TemplateBoundError(f"an integer power of more than {MAX_POWER_BITS} bits")
        elif operator == "%" and isinstance(left, str):
            _spec_bounded(left)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 -- the sandbox's own signature
        target = getattr(__obj, "__wrapped__", __obj)
        owner, name = getattr(target, "__self__", None), getattr(target, "__name__", "")
        if isinstance(owner, str):
            if name in _SIZED:
                _sized_args(name, args, kwargs)
            elif name in ("format", "format_map"):
                _spec_bounded(owner)
            elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
                _bounded(len(owner) + (owner.count(args[0]) if args[0] else len(owner) + 1) * len(args[1]),
                         "a replaced string")
        return super().call(__context, __obj, *args, **kwargs)


def _sized_filter(name: str, func):
    def bounded(value, *args, **kwargs):
        _sized_args(name, args, kwargs)
        if name == "indent":
            _bounded(len(str(value)) * (1 + max([a for a in args if isinstance(a, int)] or [0])), "an indented text")
        return func(value, *args, **kwargs)
    return bounded


def _format_filter(func):
    def bounded(value, *args, **kwargs):
        if isinstance(value, str):
            _spec_bounded(value)
        return func(value, *args, **kwargs)
    return bounded


def _sandbox(undefined: type[Undefined]) -> SandboxedEnvironment:
    env = _BoundedSandbox(autoescape=False, trim_blocks=True, lstrip_blocks=True, undefined=undefined)
    env.filters.update(ms=ms_filter, pct=pct_filter, ranks=ranks_filter, zh=zh_filter)
    for name in _SIZED & set(env.filters):
        env.filters[name] = _sized_filter(name, env.filters[name])
    env.filters["format"] = _format_filter(env.filters["format"])
    env.globals.pop("lipsum", None)  # paragraphs of filler text, as many as asked
    return env


SANDBOX = _sandbox(Undefined)
CHECKING_SANDBOX = _sandbox(_CheckedUndefined)


def check(template: str) -> None:
    """Raise the parser's error when ``template`` is not a valid template,
    and SecurityError when it reaches for an attribute the sandbox refuses
    (a name starting with ``_``: ``x.__class__``, ``x['_y']``,
    ``x|attr('__class__')``), which would otherwise render as nothing or
    fail only on the profile that fires the rule; TemplateBoundError when it
    defines a macro, loops recursively or nests loops deeper than
    ``MAX_LOOP_DEPTH`` (module doc, Bounds)."""
    tree = SANDBOX.parse(template)
    if next(tree.find_all((nodes.Macro, nodes.CallBlock)), None) is not None:
        raise TemplateBoundError("a rule template may not define macros")
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, nodes.For):
            depth += 1
            if node.recursive or depth > MAX_LOOP_DEPTH:
                raise TemplateBoundError(f"loops nested {depth} deep or recursive, more than {MAX_LOOP_DEPTH}")
        stack.extend((child, depth) for child in node.iter_child_nodes())
    for node in tree.find_all((nodes.Getattr, nodes.Getitem, nodes.Filter)):
        if isinstance(node, nodes.Getattr):
            name = node.attr
        elif isinstance(node, nodes.Getitem):
            name = node.arg.value if isinstance(node.arg, nodes.Const) else None
        else:
            name = node.args[0].value if node.name == "attr" and node.args and isinstance(node.args[0], nodes.Const) else None
        if isinstance(name, str) and name.startswith("_"):
            raise SecurityError(f"access to attribute {name!r} is unsafe (the template sandbox refuses it)")


@contextmanager
def _time_bound(seconds: float):
    """TemplateBoundError raised in the block once ``seconds`` have passed
    (a timer signal: in the main thread only, elsewhere no bound)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise TemplateBoundError(f"rendering took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def render(template: str, context: dict[str, Any], *, checked: bool = False) -> str:
    """``template`` rendered over ``context`` (see the module doc for
    ``checked``), within the bounds of the module doc."""
    env = CHECKING_SANDBOX if checked else SANDBOX
    compiled = env.from_string(template)
    parts, size = [], 0
    with _time_bound(MAX_RENDER_SECONDS):
        for chunk in compiled.generate(context):
            size += len(chunk)
            _bounded(size, "the rendered text")
            parts.append(chunk)
    return "".join(parts)
