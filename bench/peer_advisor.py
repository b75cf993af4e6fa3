"""Side by side: msprof-analyze ``advisor all`` and advisor on the same inputs.

For each input -- the corpus's Ascend folders, the example profiles, and
generated clusters with each fault of ``bench.scenarios`` (Ascend text
layout) -- the incumbent runs on a copy (it writes into the folder it
reads) with ``--agent``, which prints its result as one JSON document: the
"problems" sheet of its report, one row per problem (category, description,
suggestion, statistics). Each row is mapped to the check that wrote it and
from there to advisor's rules (``docs/peer_checks.yaml``,
``advisor.engine.peer_checks``); advisor analyzes the same input, and the
row counts as reported when one of those rules fired. Its estimated gain
stands beside it.

A "slow rank" row names each step component whose spread across ranks
passed the incumbent's threshold (Computing, Communication, Free); each is
one problem. "There is no slow rank issues" is not a problem. For a
generated input, a problem "names the injected fault" when its check and
component are what the fault changes (``FAULT_CHECKS``); the others are
what the incumbent reports about a run that has no such fault by
construction.

The incumbent is the ``msprof-analyze`` of a separate virtual environment
(``ADVISOR_PEER_VENV``, default ``/tmp/venv-peers``), never installed
beside advisor.

    python -m bench.peer_advisor              # text
    python -m bench.peer_advisor --markdown   # the section of docs/accuracy.md
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import orjson

from advisor.engine import peer_checks

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
PEER_VENV = Path(os.environ.get("ADVISOR_PEER_VENV", "/tmp/venv-peers"))

#: Ascend folders of the corpus (the incumbent reads a folder; advisor the same folder)
CORPUS_INPUTS = (
    "mstt/test/ut/advisor/advisor_backend/compute_advice",
    "mstt/test/ut/advisor/compute_advice/data",
    "mstt/test/ut/advisor/advisor_backend/timeline_advice",
    "mstt/test/resource/advisor",
)
#: generated faults (bench.scenarios.FAULTS) and what the incumbent would
#: report about each: (check, step component of a "slow rank" row or None)
FAULT_CHECKS = {
    "healthy": set(),
    "slow-rank": {("slow-rank", "Computing")},
    "data-starved": {("slow-rank", "Free")},
    "slow-link": {("slow-link", None)},
    "slow-nic": {("slow-link", None)},
    "slow-stage": {("slow-rank", "Computing"), ("pp-stage-computation", None)},
    "stall": set(),
    "small-packets": {("packet", None)},
    "rdma-retransmission": {("rdma-retransmission", None), ("cluster-rdma-retransmission", None)},
    "exposed-allreduce": {("overall-summary", None)},
    "slow-link-type": {("slow-link", None)},
    "bandwidth-contention": {("bandwidth-contention", None)},
    "more-work": {("slow-rank", "Computing")},
}
#: seconds one incumbent run may take (it takes minutes on a busy machine)
PEER_TIMEOUT_S = 1800

#: one component's paragraph of a "slow rank" row (SlowRankAnalyzer.produce_bottleneck)
_SLOW_RANK_COMPONENT = re.compile(r"^(\w[\w ()]*?)\s*\n\s*has some issues in the cluster.*?has reached [\d.]+ ?ms\.",
                                  re.MULTILINE | re.DOTALL)


# ------------------------------------------------------------------ incumbent

def peer_executable() -> Path | None:
    exe = PEER_VENV / "bin" / "msprof-analyze"
    return exe if exe.is_file() else None


def peer_version() -> str | None:
    for meta in sorted(PEER_VENV.glob("lib/python3*/site-packages/msprof_analyze-*.dist-info/METADATA")):
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return None


def peer_command(data: Path, out: Path) -> list[str]:
    """``msprof-analyze advisor all`` on ``data``, English texts, the
    structured JSON result on stdout (``--agent``)."""
    return [str(peer_executable()), "advisor", "all", "-d", str(data), "-o", str(out), "-l", "en", "--agent"]


def parse_agent_output(stdout: str) -> dict:
    """The JSON document ``--agent`` prints (its last line that is one)."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
    raise ValueError("no JSON document in the incumbent's output")


@dataclass
class PeerProblem:
    category: str
    description: str
    component: str | None = None  # the step component a "slow rank" row names
    check: peer_checks.PeerCheck | None = None

    @property
    def label(self) -> str:
        return f"{self.category}: {self.component}" if self.component else self.category

    @property
    def summary(self) -> str:
        text = " ".join(self.description.split())
        return text if len(text) <= 160 else text[:157] + "..."


def problems(doc: dict, table: peer_checks.PeerChecks) -> list[PeerProblem]:
    """The incumbent's problems in its JSON result, each mapped to its check."""
    sheet = (doc.get("message") or {}).get("problems") or {}
    headers = [str(h).lower() for h in sheet.get("headers", [])]
    if not headers:
        return []
    cat_i = headers.index("category") if "category" in headers else 0
    desc_i = headers.index("description") if "description" in headers else 1
    out: list[PeerProblem] = []
    for row in sheet.get("data", []):
        category, description = str(row[cat_i]), str(row[desc_i])
        check = table.for_category(category)
        if check is not None and check.check == "slow-rank":
            out += [PeerProblem(category, m.group(0), m.group(1).strip(), check)
                    for m in _SLOW_RANK_COMPONENT.finditer(description)]
            continue
        out.append(PeerProblem(category, description, None, check))
    return out


def run_peer(data: Path, work: Path) -> tuple[dict | None, str]:
    """Run the incumbent on a copy of ``data`` under ``work``: (its JSON
    result, or None, and a note: how long it took or why it failed)."""
    copy, out = work / "input", work / "output"
    if data.is_dir():
        shutil.copytree(data, copy)
    else:
        copy.mkdir(parents=True)
        shutil.copy2(data, copy / data.name)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(peer_command(copy, out), capture_output=True, text=True, timeout=PEER_TIMEOUT_S,
                              cwd=work, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {PEER_TIMEOUT_S} s"
    took = f"{time.perf_counter() - t0:.0f} s"
    try:
        return parse_agent_output(proc.stdout), took
    except ValueError as exc:
        return None, f"{exc} (exit {proc.returncode})"


# ------------------------------------------------------------------- advisor

@dataclass
class Side:
    """One input: the incumbent's problems and advisor's findings."""

    name: str
    fault: str | None
    peer_note: str
    peer_status: str
    problems: list[PeerProblem] = field(default_factory=list)
    findings: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)  # rule -> gain ms, %
    verdict: str = ""
    checked: dict[str, str] = field(default_factory=dict)  # rule that did not fire -> what advisor found

    def why_not(self, p: PeerProblem) -> str:
        """What advisor found with the rules of a problem it does not report."""
        rules = p.check.rules if p.check else ()
        return "; ".join(f"{r} {self.checked[r]}" for r in rules if r in self.checked)

    def reported(self, p: PeerProblem) -> list[str]:
        return [r for r in (p.check.rules if p.check else ()) if r in self.findings]

    def injected(self, p: PeerProblem) -> bool | None:
        if self.fault is None:
            return None
        key = p.check.check if p.check else None
        return (key, p.component) in FAULT_CHECKS.get(self.fault, set()) or (
            (key, None) in FAULT_CHECKS.get(self.fault, set()))


def run_advisor(data: Path) -> tuple[str, dict[str, tuple[float | None, float | None]], dict[str, str]]:
    """(verdict, fired rule -> (gain ms, gain %), and for every other rule
    what advisor found: ``passed`` with the values its condition read, or
    ``skipped`` with the reason)."""
    from advisor import analyze
    from advisor.engine.evaluation import _metric_ref_pattern
    from advisor.engine.loader import load_rules
    from advisor.errors import AdvisorError

    try:
        report = analyze(data, use_config=False)
    except AdvisorError as exc:
        return f"error: {exc}", {}, {}
    found = {f.rule: (f.estimated_gain_ms, f.estimated_gain_pct) for f in report.all_findings()}
    skipped = {s.what.removeprefix("rule "): s.reason for s in report.skipped}
    checked = {}
    for rule in load_rules():
        if rule.name in found:
            continue
        if rule.name in skipped:
            checked[rule.name] = f"skipped: {_short(skipped[rule.name], 60)}"
            continue
        refs = sorted({f"{a}.{b}" for a, b in _metric_ref_pattern().findall(rule.condition)})
        values = [f"{m}={_short(report.metrics[m].value)}" for m in refs if m in report.metrics]
        checked[rule.name] = "passed" + (f" ({', '.join(values)})" if values else "")
    return (report.verdict.status if report.verdict else "no verdict"), found, checked


def _short(value, width: int = 40) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    text = str(value)
    return text if len(text) <= width else text[:width - 3] + "..."


# --------------------------------------------------------------------- inputs

def inputs(work: Path, ranks: int, steps: int, seed: int) -> list[tuple[str, Path, str | None]]:
    """(name, folder, injected fault or None) of every input."""
    from bench.scenarios import FAULTS, Spec, generate

    out: list[tuple[str, Path, str | None]] = []
    for rel in CORPUS_INPUTS:
        if (CORPUS / rel).exists():
            out.append((f"corpus/{rel}", CORPUS / rel, None))
    for case in sorted(p for p in (ROOT / "examples").iterdir() if (p / "profiler").is_dir()):
        out.append((f"examples/{case.name}", case, None))
    for fault in FAULTS:
        data, _ = generate(Spec(ranks=ranks, steps=steps, fault=fault, seed=seed), work / "scenarios" / fault)
        out.append((f"generated/{fault} ({ranks} ranks, {steps} steps)", data, fault))
    return out


def measure(work: Path, ranks: int, steps: int, seed: int, only: str | None = None) -> list[Side]:
    table = peer_checks.load()
    sides = []
    for name, data, fault in inputs(work, ranks, steps, seed):
        if only and only not in name:
            continue
        doc, note = run_peer(data, Path(tempfile.mkdtemp(dir=work, prefix="peer-")))
        status = "failed" if doc is None else str(doc.get("status"))
        side = Side(name, fault, note, status, problems(doc, table) if doc else [])
        side.verdict, side.findings, side.checked = run_advisor(data)
        print(f"{name}: incumbent {status} ({note}), {len(side.problems)} problem(s); "
              f"advisor {side.verdict}: {', '.join(side.findings) or '-'}", file=sys.stderr)
        sides.append(side)
    return sides


# --------------------------------------------------------------------- output

def _gain(side: Side, rules: list[str]) -> str:
    parts = []
    for r in rules:
        ms, pct = side.findings[r]
        parts.append(f"{r} {ms:.3g} ms/step" + (f" ({pct:.1f}%)" if pct is not None else "") if ms is not None
                     else f"{r} (no gain)")
    return "; ".join(parts)


def _rule_names() -> set[str]:
    from advisor.engine.loader import load_rules

    return {r.name for r in load_rules()}


def totals(sides: list[Side], known: set[str]) -> dict[str, int]:
    probs = [(s, p) for s in sides for p in s.problems]
    inj = [(s, p) for s, p in probs if s.injected(p)]
    return {
        "problems": len(probs),
        "reported": sum(bool(s.reported(p)) for s, p in probs),
        "injected": len(inj),
        "injected_reported": sum(bool(s.reported(p)) for s, p in inj),
        "unmapped": sum(p.check is None for _, p in probs),
        "not_yet": sum(bool(p.check and p.check.rules) and not set(p.check.rules) & known for _, p in probs),
    }


def _rules_cell(p: PeerProblem, known: set[str]) -> str:
    rules = p.check.rules if p.check else ()
    return ", ".join(r if r in known else f"{r} (not in this rule set)" for r in rules) or "-"


def render(sides: list[Side], markdown: bool, known: set[str] | None = None) -> str:
    known = _rule_names() if known is None else known
    t = totals(sides, known)
    head = (f"advisor reports {t['reported']} of {t['problems']} incumbent problems; "
            f"{t['injected']} of them name the injected fault of a generated input, and advisor reports "
            f"{t['injected_reported']} of those; {t['not_yet']} map only to rules not in this rule set; "
            f"{t['unmapped']} row(s) map to no known check.")
    lines: list[str] = []
    if markdown:
        lines += [head, "",
                  "| input | incumbent problem | its check | injected fault? | advisor rule | advisor reports it | "
                  "advisor's gain, or what its rules found |",
                  "|---|---|---|---|---|---|---|"]
    for s in sides:
        fault = s.fault or "-"
        if markdown:
            if not s.problems:
                lines.append(f"| {s.name} ({fault}) | none ({s.peer_status}) | | | | | |")
            for p in s.problems:
                got = s.reported(p)
                inj = {None: "-", True: "yes", False: "no"}[s.injected(p)]
                lines.append(
                    f"| {s.name} ({fault}) | **{p.label}**: {p.summary.replace('|', '/')} | "
                    f"{p.check.check if p.check else '?'} | {inj} | {_rules_cell(p, known)} | "
                    f"{'yes' if got else 'no'} | {_gain(s, got) if got else s.why_not(p).replace('|', '/')} |")
        else:
            lines.append(f"{s.name} [fault: {fault}]  incumbent: {s.peer_status} ({s.peer_note})")
            for p in s.problems:
                got = s.reported(p)
                lines.append(f"  - {p.label} -> {p.check.check if p.check else '?'}: "
                             f"{'REPORTED ' + _gain(s, got) if got else 'not reported: ' + (s.why_not(p) or '-')}"
                             + ("  [injected]" if s.injected(p) else ""))
            lines.append(f"  advisor ({s.verdict}): " + (", ".join(
                f"{r} {ms:.3g} ms" if ms is not None else r for r, (ms, _) in s.findings.items()) or "no findings"))
    if markdown:
        lines += ["", "advisor's findings on each input (the incumbent's problems above are mapped to these):", ""]
        lines += [f"- {s.name}: {s.verdict}; " + (", ".join(
            f"`{r}` {ms:.3g} ms/step" if ms is not None else f"`{r}`" for r, (ms, _) in s.findings.items())
            or "no findings") + f" (incumbent run: {s.peer_note})" for s in sides]
    else:
        lines.append(head)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.peer_advisor", description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", action="store_true", help="a Markdown section for docs/accuracy.md")
    ap.add_argument("--ranks", type=int, default=8, help="ranks of each generated cluster (default 8: two hosts)")
    ap.add_argument("--steps", type=int, default=8, help="steps of each generated cluster (default 8)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", help="run only inputs whose name contains this")
    args = ap.parse_args(argv)
    if peer_executable() is None:
        print(f"bench.peer_advisor: no msprof-analyze in {PEER_VENV} (set ADVISOR_PEER_VENV)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="advisor-peer-") as tmp:
        sides = measure(Path(tmp), args.ranks, args.steps, args.seed, args.only)
    text = render(sides, args.markdown)
    if args.markdown:
        from advisor import __version__

        text = (f"Measured {date.today().isoformat()}: msprof-analyze {peer_version()} (`advisor all --agent`, "
                f"English) and advisor {__version__}, one after the other on a copy of each input; generated "
                f"clusters: {args.ranks} ranks, {args.steps} steps, seed {args.seed}, Ascend text layout.\n\n" + text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
