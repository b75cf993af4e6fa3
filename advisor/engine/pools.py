"""One cause, one finding: findings that claim the same time are one.

A rule's ``claims`` names the *time pool* its finding's time comes from: a
part of the step such as the data wait (``data_wait``: ``input-bound`` and
``slow-dataset-op`` both measure it), the device idle time the host causes
(``host_idle``: ``host-bound``, ``launch-bound``) or the float32 matrix
kernels (``fp32_matrix``: ``fp32-compute``, ``no-tensor-cores``). A rule
without ``claims`` has a pool of its own.

**Merging** (:func:`merge`). The findings of one pool become one: the
*primary* is the one first in report order (the largest expected gain:
``evaluation.expected_gain_ms``, the gain times the confidence), except that a finding
of a rule that names a cause leads one of a ``symptom`` rule (steps slower
than the rest, an idle device) whatever their estimates; the others are its
``contributing`` causes, in the same order, each still a whole finding of
its own rule (message, fix, evidence). They share the same time, so their
gains are never added: the primary's gain is at most the pool's time at
stake, the largest time at stake among its findings (each measures the
same time, some of it more completely).

A symptom contributing to a cause gives up its own fix
(:func:`leave_fixes_to_causes`).

**The total** (:func:`clamp_total`). Pools are meant as disjoint parts of
the step, but a rule's measure may overlap another's (a slow rank's extra
free time is also free time; outlier steps hold every other cause). So
the primary findings' gains are clamped together to the step time: the
step time is handed out to them from the most confident down (ties: larger
gain first), each keeping at most what it estimated; a finding that gets
less has its gain lowered and a caveat saying so. The least sure gains
give way first, and a sure gain is never cut for an unsure one.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from advisor.model import Finding


def pool_time(findings: list[Finding]) -> float | None:
    """The time at stake of one pool: the largest time at stake (else
    estimated gain) among its findings; None when none has either."""
    times = [f.time_at_stake_ms if f.time_at_stake_ms is not None else f.estimated_gain_ms for f in findings]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def merge(findings: list[Finding], *, rank_key: Callable[[Finding], tuple]) -> list[Finding]:
    """One finding per time pool (see module doc); ``rank_key`` orders the
    findings of a pool (the first is the primary). Findings without a
    ``claims`` pool stay as they are."""
    pools: dict[str, list[Finding]] = {}
    alone: list[Finding] = []
    for f in findings:
        if f.claims is None:
            alone.append(f)
        else:
            pools.setdefault(f.claims, []).append(f)
    out = list(alone)
    for members in pools.values():
        members = sorted(members, key=rank_key)
        primary, rest = members[0], members[1:]
        if rest:
            most = pool_time(members)
            gain = primary.estimated_gain_ms
            if gain is not None and most is not None and gain > most:
                if primary.estimated_gain_pct is not None and gain > 0:
                    primary.estimated_gain_pct = round(primary.estimated_gain_pct * most / gain, 2)
                primary.estimated_gain_ms = most
            primary.contributing = [*primary.contributing, *rest]
        out.append(primary)
    return out


def leave_fixes_to_causes(findings: list[Finding], symptoms: set[str], *, note: Callable[..., str]) -> None:
    """A ``symptom`` finding that contributes to a finding naming its cause
    keeps no fix of its own -- the cause's fix is the one to apply, and the
    symptom's generic one would aim elsewhere -- and says so
    (``note(cause=title)``)."""
    for f in findings:
        if f.rule in symptoms:
            continue
        for c in f.contributing:
            if c.rule in symptoms and c.fix is not None:
                c.fix = None
                c.caveats = [*c.caveats, note(cause=f.title)]


def clamp_total(findings: list[Finding], step_ms: float | None, *, note: Callable[..., str]) -> None:
    """Lower the primary findings' gains so that together they do not
    exceed ``step_ms`` (see module doc); ``note(was=, now=, step=)`` is the
    caveat a lowered finding gets. Does nothing without a step time."""
    if not step_ms or not math.isfinite(float(step_ms)) or step_ms <= 0:
        return
    left = float(step_ms)
    order = sorted((f for f in findings if f.estimated_gain_ms is not None),
                   key=lambda f: (-(f.confidence if f.confidence is not None else 0.0), -f.estimated_gain_ms, f.rule))
    for f in order:
        was = f.estimated_gain_ms
        now = min(was, math.floor(max(left, 0.0) * 1000.0) / 1000.0)
        left -= now
        if now < was:
            f.estimated_gain_ms = now
            f.estimated_gain_pct = round(100.0 * now / float(step_ms), 2)
            f.caveats = [*f.caveats, note(was=_num(was), now=_num(now), step=_num(step_ms))]


def _num(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
