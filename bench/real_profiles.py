"""advisor's verdicts on the real profiles of the corpus, against what a
careful expert concludes on each.

The expected conclusions live in ``bench/real_profiles.yaml`` (one entry
per input, from the corpus README; its header lists the checks). This runs
``advisor.pipeline.analyze`` on each input and judges the report: an entry
is right when every check holds. ``tests/verdicts/test_real_profiles.py``
asserts every entry right; ``--markdown`` prints the table of
docs/accuracy.md ("Real profiles").

    python -m bench.real_profiles                 # text table
    python -m bench.real_profiles --markdown      # the table of docs/accuracy.md

The corpus is found at ``$ADVISOR_CORPUS`` or ``../shared/corpus`` beside
the checkout. An input advisor cannot read is wrong, with its one-line
error as advisor's verdict.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from advisor.errors import AdvisorError
from advisor.model import SEVERITY_ORDER

ROOT = Path(__file__).resolve().parent.parent
EXPECTATIONS = Path(__file__).with_suffix(".yaml")
CORPUS = Path(os.environ.get("ADVISOR_CORPUS", ROOT.parent / "shared" / "corpus"))
#: Lowest severity counted as serious (the verdict's PROBLEM_SEVERITY).
SERIOUS = "medium"
CHECKS = {"input", "files", "expert", "verdict", "lead", "present", "absent", "absent_serious", "no_serious",
          "metrics", "not_evaluated", "scope_ranks", "says", "missing_says"}


@dataclass
class Outcome:
    """One entry judged: advisor's verdict in a line, and what did not hold."""

    entry: dict
    advisor: str
    problems: list[str]

    @property
    def right(self) -> bool:
        return not self.problems

    @property
    def label(self) -> str:
        files = self.entry.get("files")
        return self.entry["input"] + (f" ({', '.join(files)})" if files else "")


def expectations(path: Path = EXPECTATIONS) -> list[dict]:
    """The entries of ``real_profiles.yaml``; ValueError on an unknown key."""
    entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    for e in entries:
        unknown = set(e) - CHECKS
        if unknown:
            raise ValueError(f"{path}: {e.get('input')}: unknown keys {sorted(unknown)}")
    return entries


def _serious(severity: str) -> bool:
    return SEVERITY_ORDER[severity] >= SEVERITY_ORDER[SERIOUS]


def judge(entry: dict, report) -> list[str]:
    """What in ``entry`` does not hold on ``report`` (empty: right)."""
    problems: list[str] = []
    found = report.all_findings()
    fired = {f.rule for f in found}
    serious = [f for f in found if _serious(f.severity)]
    status = report.verdict.status if report.verdict else None
    if "verdict" in entry and status not in entry["verdict"]:
        problems.append(f"verdict {status}, expected {' or '.join(entry['verdict'])}")
    if "lead" in entry:
        lead = next((f.rule for f in report.findings if any(_serious(g.severity) for g in (f, *f.contributing))),
                    None)
        if lead != entry["lead"]:
            problems.append(f"led by {lead}, expected {entry['lead']}")
    problems += [f"{r} did not fire" for r in entry.get("present", []) if r not in fired]
    problems += [f"{r} fired" for r in entry.get("absent", []) if r in fired]
    problems += [f"{f.rule} fired at {f.severity}" for f in serious if f.rule in entry.get("absent_serious", [])]
    if entry.get("no_serious") and serious:
        problems.append("serious findings: " + ", ".join(f"{f.rule} ({f.severity})" for f in serious))
    for metric, want in (entry.get("metrics") or {}).items():
        got = report.metrics.get(metric)
        if got is None:
            problems.append(f"{metric} not evaluated")
        elif isinstance(want, list):
            if not (isinstance(got.value, (int, float)) and want[0] <= got.value <= want[1]):
                problems.append(f"{metric} = {got.value!r}, expected {want[0]}..{want[1]}")
        elif got.value != want:
            problems.append(f"{metric} = {got.value!r}, expected {want!r}")
    problems += [f"{m} evaluated" for m in entry.get("not_evaluated", []) if m in report.metrics]
    for rule, ranks in (entry.get("scope_ranks") or {}).items():
        named = [sorted(f.scope.ranks) for f in found if f.rule == rule]
        if sorted(ranks) not in named:
            problems.append(f"{rule} names ranks {named}, expected {sorted(ranks)}")
    for rule, phrases in (entry.get("says") or {}).items():
        text = " ".join(f.message for f in found if f.rule == rule)
        problems += [f"{rule} does not say {p!r}" for p in phrases if p not in text]
    missing = " ".join(report.verdict.missing) if report.verdict else ""
    problems += [f"the verdict does not say {p!r}" for p in entry.get("missing_says", []) if p not in missing]
    return problems


def _figure(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def summary(report, metrics=()) -> str:
    """advisor's verdict in a line: status, the serious findings (or all,
    if none is), then the values of ``metrics`` (those the entry checks)."""
    found = report.all_findings()
    shown = [f for f in found if _serious(f.severity)] or found
    status = report.verdict.status if report.verdict else "-"
    line = status + (": " + ", ".join(f"{f.rule} ({f.severity})" for f in shown) if shown else "")
    figures = [f"{m} = {_figure(report.metrics[m].value)}" for m in metrics if m in report.metrics]
    return line + ("; " + ", ".join(figures) if figures else "")


def run_entry(entry: dict, corpus: Path = CORPUS) -> Outcome:
    """Analyze one entry's input (only its ``files``, linked into a fresh
    folder, when it names them) and judge the report."""
    from advisor.pipeline import analyze

    path = corpus / entry["input"]
    with tempfile.TemporaryDirectory(prefix="advisor-real-") as tmp:
        if entry.get("files"):
            for name in entry["files"]:
                (Path(tmp) / name).symlink_to(path / name)
            path = Path(tmp)
        try:
            report = analyze(path, jobs=1)
        except AdvisorError as exc:
            return Outcome(entry, f"error: {exc}", [f"not read: {exc}"])
    return Outcome(entry, summary(report, entry.get("metrics") or ()), judge(entry, report))


def render(outcomes: list[Outcome], md: bool) -> str:
    right = sum(o.right for o in outcomes)
    lines = []
    if md:
        lines += ["| input | expected (the expert's conclusion) | advisor | right |", "|---|---|---|---|"]
        for o in outcomes:
            verdict = "right" if o.right else "**wrong**: " + "; ".join(o.problems)
            lines.append(f"| `{o.label}` | {o.entry['expert']} | {o.advisor} | {verdict} |")
    else:
        for o in outcomes:
            lines.append(f"{'right' if o.right else 'WRONG'}  {o.label}: {o.advisor}")
            lines += [f"       - {p}" for p in o.problems]
    lines.append(f"\n{right} of {len(outcomes)} right")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.real_profiles", description=__doc__.split("\n")[0])
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    args = ap.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"real-profile corpus not found at {args.corpus} (set ADVISOR_CORPUS)", file=sys.stderr)
        return 2
    outcomes = [run_entry(e, args.corpus) for e in expectations()]
    print(render(outcomes, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
