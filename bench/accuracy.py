"""Accuracy of the cluster calls on labelled generated scenarios.

For each fault kind (and healthy runs), ``--seeds`` scenarios per size are
generated (``bench.scenarios``, Ascend text layout, under /tmp), analyzed
with ``advisor.pipeline.analyze`` and scored:

* ``slow-rank`` is correct when the finding's ``scope.ranks`` are exactly
  the labelled ranks: the slow rank, or every rank of the data-starved
  host and no other (on a slow pipeline stage the call is tolerated, not
  required, when it names ranks of the stage); on a compute straggler
  (``slow-rank``: the same kernels, each slower) and a rank given more work
  (``more-work``: more kernels, each as fast) also when it names that cause:
  ``cluster.slow_rank_kernel_excess_ms`` at least the rule's
  ``device_share`` of the excess for the first, below it for the second;
* ``slow-link`` is correct when it fires and ``cluster.slowest_link`` is
  the labelled link, blamed on no rank's port; on a slow NIC, when it
  names that rank (``cluster.slow_link_rank`` and the finding's ranks), or,
  where its two slow links join the same two ranks (two hosts: either port
  may be at fault), when the slowest link is one of them;
* ``step-outlier`` is correct when it fires and its ``scope.steps`` are
  exactly the labelled stall steps;
* ``slow-pipeline-stage`` is correct when its ``scope.ranks`` are the
  labelled stage's ranks.

Slow links are also generated in pipeline-parallel runs (pp = 2): each
stage has its own data-parallel group, whose matrix files name a link's
ends by their ranks within the group, so the call is right only when the
reader has mapped them to global ranks (``collectors/ascend/link_ranks.py``).

A call of a rule in a scenario that does not expect it is a false positive
(healthy runs count one per rule that fires). Precision = correct calls /
all calls; recall = correct calls / scenarios that expect the rule.

The third table: healthy runs (both grids, plus healthy pipeline-parallel
runs with pp = 2 and 4 at each size) with any finding of medium severity
or above, of any rule, and which rules made them. The pipeline runs count
as healthy runs in the first table's "fires on healthy" too.

The fourth table is the anomaly model on healthy runs of several sizes:
the share of runs in which ``anomaly.step_outliers`` is non-empty (model
false positive), in which the ``step-outlier`` rule fires, and the share
of steady steps flagged.

    python -m bench.accuracy                  # default grid, text tables
    python -m bench.accuracy --markdown > docs/accuracy.md
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import shutil
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from datetime import date
from pathlib import Path

from bench.scenarios import Spec, generate

WORK = Path(os.environ.get("ADVISOR_BENCH_DIR", "/tmp/advisor-bench")) / "accuracy"
KINDS = ("healthy", "slow-rank", "more-work", "data-starved", "slow-link", "slow-nic", "slow-stage", "stall")
RULES = ("slow-rank", "slow-link", "step-outlier", "slow-pipeline-stage")
#: Severities a healthy run must never get (the accuracy target's bar for false alarms).
SEVERE = ("medium", "high", "critical")
#: Fault kinds whose labelled ranks are the slow ones.
SLOW_KINDS = ("slow-rank", "more-work", "data-starved", "slow-stage")
EXPECTS = {"slow-rank": "slow-rank", "more-work": "slow-rank", "data-starved": "slow-rank", "slow-link": "slow-link",
           "slow-nic": "slow-link", "stall": "step-outlier", "slow-stage": "slow-pipeline-stage"}
#: Pipeline sizes of the extra healthy runs (``--sizes`` permitting).
PIPELINES = (2, 4)
#: Calls that are neither required nor false when they name the right ranks.
TOLERATED = {("slow-stage", "slow-rank")}


def run_one(job: tuple) -> dict:
    """Generate, analyze and score one scenario (runs in a worker)."""
    from advisor.pipeline import analyze

    kind, ranks, steps, seed, kernels, *rest = job
    pp = rest[0] if rest else None
    out = WORK / f"{kind}_{ranks}r_{steps}s_{seed}_pp{pp or 0}"
    shutil.rmtree(out, ignore_errors=True)
    spec = Spec(ranks=ranks, steps=steps, fault=kind, seed=seed, kernels_per_step=kernels, pp=pp)
    data, labels = generate(spec, out)
    t = time.perf_counter()
    try:
        report = analyze(data, jobs=1)
    except Exception as exc:  # an advisor bug: count it, keep scoring the rest
        shutil.rmtree(out, ignore_errors=True)
        return {"kind": kind, "ranks": ranks, "steps": steps, "seed": seed, "pp": pp, "calls": {}, "severe": [],
                "expects": EXPECTS.get(kind), "outliers": None, "outlier_steps": None,
                "steady": steps, "seconds": time.perf_counter() - t, "severity": labels.get("severity"),
                "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:160]}
    elapsed = time.perf_counter() - t
    shutil.rmtree(out, ignore_errors=True)
    fired = {f.rule: f for f in report.all_findings()}
    metric = report.metrics

    def value(mid):
        m = metric.get(mid)
        return None if m is None else m.value

    calls = {}
    for rule in RULES:
        if rule in fired:
            calls[rule] = _judge(kind, rule, fired[rule], labels, value)
    outliers = value("anomaly.step_outliers")
    rank_outliers = value("anomaly.rank_outliers")
    severe = sorted(f.rule for f in report.all_findings() if f.severity in SEVERE)
    return {"kind": kind, "ranks": ranks, "steps": steps, "seed": seed, "pp": pp, "calls": calls, "severe": severe,
            "expects": EXPECTS.get(kind), "outliers": outliers,
            "outlier_steps": len(outliers) if isinstance(outliers, list) else None,
            "rank_outliers": rank_outliers, "labelled": labels.get("ranks") or [],
            "late_rank": value("cluster.late_rank"),
            "steady": steps - 1 if steps >= 4 else steps, "seconds": elapsed,
            "severity": labels.get("severity")}


def _judge(kind: str, rule: str, finding, labels: dict, value) -> str:
    """"tp", "fp", "wrong" (expected rule, wrong target) or "ok" (tolerated)."""
    scope = finding.scope
    want = set(labels.get("ranks") or [])
    if (kind, rule) in TOLERATED:
        return "ok" if set(scope.ranks) & want else "fp"
    if EXPECTS.get(kind) != rule:
        return "fp"
    if rule == "slow-rank":
        hit = set(scope.ranks) == want and _cause_named(kind, value)
    elif rule == "slow-link" and kind == "slow-nic":
        named = value("cluster.slow_link_rank") == labels.get("nic") and scope.ranks == [labels.get("nic")]
        # a rank whose port links it to one peer only (two hosts): either end may be at fault
        pair = len({end for lk in labels.get("links", []) for end in lk.split("-")}) == 2
        hit = named or (pair and value("cluster.slowest_link") in labels.get("links", []))
    elif rule == "slow-link":
        hit = value("cluster.slowest_link") == labels.get("link") and value("cluster.slow_link_rank") is None
    elif rule == "step-outlier":
        hit = sorted(scope.steps) == sorted(labels.get("steps") or [])
    else:
        hit = set(scope.ranks) == want
    return "tp" if hit else "wrong"


def _cause_named(kind: str, value) -> bool:
    """On a compute straggler or a rank given more work: whether the slow-rank
    finding names that cause (module doc); True for the other kinds."""
    if kind not in ("slow-rank", "more-work"):
        return True
    kernel, excess = value("cluster.slow_rank_kernel_excess_ms"), value("cluster.slow_rank_excess_ms")
    if kernel is None or excess is None:
        return False
    return (kernel >= _device_share() * excess) == (kind == "slow-rank")


@functools.lru_cache(maxsize=1)
def _device_share() -> float:
    """The slow-rank rule's ``device_share`` (its rule file read once per process)."""
    from advisor.engine.loader import load_rules

    return next(r for r in load_rules() if r.name == "slow-rank").params["device_share"].default


def _pool_map(jobs: list[tuple], workers: int) -> list[dict]:
    if workers <= 1:
        return [run_one(j) for j in jobs]
    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(run_one, jobs))


def score(results: list[dict]) -> dict:
    """(size, rule) -> counts; plus per-kind recall."""
    table: dict = defaultdict(lambda: {"tp": 0, "calls": 0, "expected": 0, "fp_healthy": 0, "healthy": 0})
    for r in results:
        for rule in RULES:
            cell = table[(r["ranks"], rule)]
            verdict = r["calls"].get(rule)
            if r["expects"] == rule:
                cell["expected"] += 1
            if r["kind"] == "healthy":
                cell["healthy"] += 1
                cell["fp_healthy"] += verdict is not None
            if verdict in ("tp", "wrong", "fp"):
                cell["calls"] += 1
            if verdict == "tp":
                cell["tp"] += 1
    return table


def _pct(num: int, den: int) -> str:
    return "n/a" if den == 0 else f"{100 * num / den:.0f}% ({num}/{den})"


def render(results: list[dict], fp_results: list[dict], md: bool, seeds: int, fp_seeds: int,
           wall: float) -> str:
    lines: list[str] = []
    sizes = sorted({r["ranks"] for r in results})

    def row(cells):
        return ("| " + " | ".join(cells) + " |") if md else "  ".join(f"{c:<24}" for c in cells)

    def head(cells):
        out = [row(cells)]
        if md:
            out.append("|" + "|".join("---" for _ in cells) + "|")
        return out

    if md:
        lines += ["# Accuracy of the cluster calls on generated scenarios", "",
                  f"Measured {date.today().isoformat()} with `python -m bench.accuracy --markdown` "
                  f"({seeds} seeds per fault kind and size, {fp_seeds} per healthy size below; "
                  f"{wall / 60:.1f} min on a shared, loaded 2-core machine, {platform.python_version()}).",
                  "", "Scenarios come from `bench/scenarios/model.py` (its docstring is the timing and fault "
                  "model); they are synthetic, in the real Ascend text layout, and every call below "
                  "is scored against the scenario's `labels.json`. Precision = correct calls / all "
                  "calls of the rule (healthy runs and other fault kinds included); recall = correct "
                  "calls / scenarios with that fault.", ""]
    lines += (["## Precision and recall per rule", ""] if md else ["Precision / recall per rule"])
    lines += head(["ranks", "rule", "precision", "recall", "fires on healthy"])
    table = score(results)
    for size in sizes:
        for rule in RULES:
            c = table[(size, rule)]
            lines.append(row([str(size), rule, _pct(c["tp"], c["calls"]), _pct(c["tp"], c["expected"]),
                              _pct(c["fp_healthy"], c["healthy"])]))
    lines.append("")
    lines += (["## Recall per fault kind", ""] if md else ["Recall per fault kind (the expected rule)"])
    lines += head(["ranks", "fault", "expected rule", "recall", "other rules fired (false)"])
    for size in sizes:
        for kind in KINDS:
            for pp in sorted({r.get("pp") or 1 for r in results if r["ranks"] == size and r["kind"] == kind}):
                rs = [r for r in results if r["ranks"] == size and r["kind"] == kind and (r.get("pp") or 1) == pp]
                rule = EXPECTS.get(kind, "-")
                tp = sum(r["calls"].get(rule) == "tp" for r in rs)
                others = defaultdict(int)
                for r in rs:
                    for k, v in r["calls"].items():
                        if v == "fp":
                            others[k] += 1
                label = kind if pp == 1 or kind == "slow-stage" else f"{kind}, pipeline pp={pp}"
                lines.append(row([str(size), label, rule, _pct(tp, len(rs)) if kind != "healthy" else "-",
                                  ", ".join(f"{k} {v}/{len(rs)}" for k, v in sorted(others.items())) or "none"]))
    lines.append("")
    lines += _severe_on_healthy(results + fp_results, md, row, head)
    lines += (["## Anomaly model on healthy runs (false-positive rate)", ""] if md
              else ["Anomaly model on healthy runs"])
    lines += head(["ranks", "steps", "runs with outliers", "step-outlier fires", "steps flagged"])
    groups = defaultdict(list)
    for r in fp_results:
        groups[(r["ranks"], r["steps"])].append(r)
    for (ranks, steps), rs in sorted(groups.items()):
        evaluated = [r for r in rs if r["outlier_steps"] is not None]
        flagged = sum(r["outlier_steps"] for r in evaluated)
        total = sum(r["steady"] for r in evaluated)
        fires = sum("step-outlier" in r["calls"] for r in rs)
        lines.append(row([str(ranks), str(steps), _pct(sum(r["outlier_steps"] > 0 for r in evaluated), len(evaluated)),
                          _pct(fires, len(rs)), _pct(flagged, total)]))
    lines.append("")
    lines += _rank_anomalies(results, md, row, head)
    lines += _late_ranks(results, md, row, head)
    errors = [r for r in results + fp_results if r.get("error")]
    if errors:
        lines += [f"Analyses that raised (scored as no call): {len(errors)}: "
                  + "; ".join(sorted({r['error'] for r in errors})), ""]
    if md:
        lines += ["Wall time of one analysis (in process, `jobs=1`), median: " + ", ".join(
            f"{size} ranks {_median([r['seconds'] for r in results if r['ranks'] == size]):.1f} s"
            for size in sizes) + ".", ""]
    return "\n".join(lines)


def _severe_on_healthy(results: list[dict], md: bool, row, head) -> list[str]:
    """Healthy runs with a finding of medium severity or above, any rule."""
    lines = (["## Findings of medium severity or above on healthy runs", ""] if md
             else ["Healthy runs with a finding of medium severity or above (any rule)"])
    lines += head(["ranks", "healthy runs", "with such a finding", "rules"])
    healthy = [r for r in results if r["kind"] == "healthy"]
    for size, pp in sorted({(r["ranks"], r.get("pp") or 1) for r in healthy}):
        rs = [r for r in healthy if r["ranks"] == size and (r.get("pp") or 1) == pp]
        rules = defaultdict(int)
        for r in rs:
            for rule in r["severe"]:
                rules[rule] += 1
        label = str(size) if pp == 1 else f"{size}, pipeline pp={pp}"
        lines.append(row([label, str(len(rs)), _pct(sum(bool(r["severe"]) for r in rs), len(rs)),
                          ", ".join(f"{k} {v}" for k, v in sorted(rules.items())) or "none"]))
    return [*lines, ""]


def _rank_anomalies(results: list[dict], md: bool, row, head) -> list[str]:
    """The anomaly model's rank calls per fault kind: exactly the labelled ranks
    where ranks are slow (``SLOW_KINDS``), none elsewhere."""
    lines = (["## Anomaly model on ranks", ""] if md else ["Anomaly model on ranks"])
    lines += head(["ranks", "fault", "evaluated", "flags exactly the slow ranks", "flags a rank that is not slow"])
    for size in sorted({r["ranks"] for r in results}):
        for kind in KINDS:
            rs = [r for r in results if r["ranks"] == size and r["kind"] == kind and not r.get("pp")
                  and isinstance(r.get("rank_outliers"), list)]
            if not rs:
                continue
            slow = kind in SLOW_KINDS
            exact = sum(sorted(r["rank_outliers"]) == sorted(r["labelled"]) for r in rs) if slow else None
            wrong = sum(bool(set(r["rank_outliers"]) - set(r["labelled"] if slow else [])) for r in rs)
            lines.append(row([str(size), kind, str(len(rs)), _pct(exact, len(rs)) if slow else "-",
                              _pct(wrong, len(rs))]))
    return [*lines, ""]


def _late_ranks(results: list[dict], md: bool, row, head) -> list[str]:
    """``cluster.late_rank`` per fault kind: the last rank to arrive at a
    collective, which must be a labelled slow rank where one is slow alone
    (a host of several slow ranks, or a stage, has no single last rank),
    and no rank on healthy runs."""
    lines = (["## The last rank at the collectives (`cluster.late_rank`)", ""] if md
             else ["The last rank at the collectives (cluster.late_rank)"])
    lines += head(["ranks", "fault", "runs", "names a rank", "names a labelled slow rank"])
    for size in sorted({r["ranks"] for r in results}):
        for kind in KINDS:
            rs = [r for r in results if r["ranks"] == size and r["kind"] == kind and not r.get("pp")]
            if not rs:
                continue
            named = [r for r in rs if r.get("late_rank") is not None]
            right = sum(r["late_rank"] in r["labelled"] for r in named)
            lines.append(row([str(size), kind, str(len(rs)), _pct(len(named), len(rs)),
                              _pct(right, len(named)) if named else "-"]))
    return [*lines, ""]


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.accuracy", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="8,64", help="rank counts (comma separated)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=6, help="scenarios per fault kind and size")
    ap.add_argument("--fp-ranks", default="1,8,64")
    ap.add_argument("--fp-steps", default="10,30,100")
    ap.add_argument("--fp-seeds", type=int, default=4)
    ap.add_argument("--kernels", type=int, default=8, help="compute kernels per step (speed)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    jobs = [(kind, size, args.steps, seed, args.kernels)
            for size in sizes for kind in KINDS for seed in range(args.seeds)]
    # healthy pipeline-parallel runs too: their Receive waits must not read as a fault
    jobs += [("healthy", size, args.steps, 2000 + seed, args.kernels, pp)
             for size in sizes for pp in PIPELINES if size >= 2 * pp for seed in range(args.seeds)]
    # slow links in pipeline-parallel runs: one data-parallel group per stage, whose
    # matrix files name ranks within the group; the call must name global ranks
    jobs += [("slow-link", size, args.steps, 3000 + seed, args.kernels, 2)
             for size in sizes if size >= 4 for seed in range(args.seeds)]
    fp_jobs = [("healthy", r, s, 1000 + seed, args.kernels)
               for r in (int(x) for x in args.fp_ranks.split(",") if x)
               for s in (int(x) for x in args.fp_steps.split(",") if x)
               for seed in range(args.fp_seeds)]
    t = time.perf_counter()
    results = _pool_map(jobs, args.workers)
    fp_results = _pool_map(fp_jobs, args.workers)
    wall = time.perf_counter() - t
    print(render(results, fp_results, args.markdown, args.seeds, args.fp_seeds, wall))
    return 0


if __name__ == "__main__":
    sys.exit(main())
