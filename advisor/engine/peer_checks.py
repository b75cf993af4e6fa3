"""The incumbent tools' checks and what in advisor covers each one.

The data is ``docs/peer_checks.yaml`` (one entry per check of
msprof-analyze's ``advisor all`` and of HolisticTraceAnalysis); this module
reads it, checks that every rule, metric and command it names exists, and
says which checks are covered. ``advisor.engine.docs`` renders it into
``docs/rules.md``; ``bench.peer_advisor`` maps the incumbent's reported
problems to advisor's rules with it.

Rule names listed under ``planned`` may be missing from the rule set (rules
written alongside the table); every other name must exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

DATA_PATH = Path(__file__).resolve().parents[2] / "docs" / "peer_checks.yaml"

#: The per-rank and per-stage analyses of msprof-analyze put ``RANK n`` /
#: ``Rank n`` before a check's category (``RANK 4 operator dynamic shape
#: issues``); categories are matched after it.
_RANK_PREFIX = re.compile(r"^\s*rank\s+\d+\s+", re.IGNORECASE)


@dataclass(frozen=True)
class PeerCheck:
    peer: str
    check: str
    title: str
    source: str
    category: str | None = None
    rules: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    command: str | None = None
    not_covered: str | None = None
    beyond: str | None = None

    def matches(self, category: str) -> bool:
        """Whether a row of the peer's problems sheet with this category
        comes from this check."""
        if not self.category:
            return False
        name = _RANK_PREFIX.sub("", category.strip())
        return re.search(self.category, name, re.IGNORECASE) is not None


@dataclass(frozen=True)
class PeerChecks:
    peers: dict[str, dict[str, str]]
    planned: frozenset[str]
    checks: tuple[PeerCheck, ...] = field(default_factory=tuple)

    def for_category(self, category: str, peer: str = "msprof-analyze") -> PeerCheck | None:
        """The check that wrote a problems-sheet row of ``category``."""
        return next((c for c in self.checks if c.peer == peer and c.matches(category)), None)

    def covered(self, check: PeerCheck, *, with_planned: bool = False) -> bool:
        """A check is covered when a rule, metric or command of advisor
        reports it (planned rules count only ``with_planned``)."""
        rules = [r for r in check.rules if with_planned or r not in self.planned]
        return bool(rules or check.metrics or check.command)

    def share(self, *, with_planned: bool = False) -> tuple[int, int]:
        """(covered checks, all checks)."""
        return sum(self.covered(c, with_planned=with_planned) for c in self.checks), len(self.checks)


def load(path: Path = DATA_PATH) -> PeerChecks:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    checks = tuple(
        PeerCheck(**{**c, "rules": tuple(c.get("rules", ())), "metrics": tuple(c.get("metrics", ()))})
        for c in data["checks"])
    return PeerChecks(peers=data["peers"], planned=frozenset(data.get("planned", ())), checks=checks)


def problems(table: PeerChecks, rule_names: set[str], metric_ids: set[str], commands: set[str]) -> list[str]:
    """What is wrong with the table given advisor's rules, metrics and
    commands: unknown names, stale ``planned`` entries, checks with neither
    a cover nor a reason, bad patterns, duplicate ids."""
    out: list[str] = []
    seen: set[tuple[str, str]] = set()
    for name in sorted(table.planned & rule_names):
        out.append(f"planned rule {name!r} exists now: remove it from `planned`")
    for c in table.checks:
        key = (c.peer, c.check)
        where = f"{c.peer}/{c.check}"
        if key in seen:
            out.append(f"{where}: listed twice")
        seen.add(key)
        if c.peer not in table.peers:
            out.append(f"{where}: unknown peer {c.peer!r}")
        for r in c.rules:
            if r not in rule_names and r not in table.planned:
                out.append(f"{where}: no rule named {r!r}")
        for m in c.metrics:
            if m not in metric_ids:
                out.append(f"{where}: no metric {m!r}")
        if c.command and c.command not in commands:
            out.append(f"{where}: no command `advisor {c.command}`")
        has_cover = bool(c.rules or c.metrics or c.command)
        if has_cover == bool(c.not_covered):
            out.append(f"{where}: give either rules/metrics/command or not_covered (the data it would need)")
        if c.category:
            try:
                re.compile(c.category)
            except re.error as exc:
                out.append(f"{where}: bad category pattern ({exc})")
    return out
