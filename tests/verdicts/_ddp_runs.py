"""One ``advisor run`` of a ``bench/repeatability.py`` scenario (a real
gloo DDP run on CPU), for the real-run verdict tests."""

from __future__ import annotations

from bench.repeatability import ENV, SCENARIOS, argv
from tests.e2e._teardown import advisor_run_report

#: Severities a verdict test counts as a finding the user acts on.
SERIOUS = {"medium", "high", "critical"}


def scenario_report(name: str, tmp_path) -> dict:
    """report.json of scenario ``name`` run under ``advisor run`` in ``tmp_path``."""
    steps, command = SCENARIOS[name]
    out = tmp_path / name
    out.parent.mkdir(parents=True, exist_ok=True)
    return advisor_run_report(argv(steps, command, out), out, steps, cwd=tmp_path, env=ENV)


def starved_rank(report: dict) -> bool:
    """Whether the report's slow-rank finding is a rank the host starved of
    CPU: on a CPU-only run, slower in compute at the same FLOPs, a clear
    outlier (robust z at least 3.5) corroborated by the others' wait at the
    collectives, and the fix says so. A healthy loop shows it when the
    machine's other load keeps one rank off a core in every step (two gloo
    ranks beside another multi-rank run: rank 0 computing 12.1 ms a step
    against 3.1 ms, z 5.5, the other waiting 12.8 ms), which is true of that
    run; no other slow-rank finding is."""
    found = {f["rule"]: f for f in report["findings"]}.get("slow-rank")
    metrics = {k: v.get("value") for k, v in report["metrics"].items()}
    evidence = report["metrics"].get("cluster.slow_rank", {}).get("evidence", {})
    return (found is not None and report["run"]["device"] == "cpu"
            and metrics.get("cluster.slow_component") == "compute"
            and abs((metrics.get("cluster.slow_rank_flops_ratio") or 0.0) - 1.0) < 0.05
            and (metrics.get("cluster.slow_rank_zscore") or 0.0) >= 3.5
            and evidence.get("others_wait_ms", 0.0) >= 0.5 * metrics["cluster.slow_rank_excess_ms"]
            and "less of a core" in found["fix"]["text"])
