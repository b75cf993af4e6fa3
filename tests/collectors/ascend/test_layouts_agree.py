"""The same generated cluster run, written in the Ascend text layout and in the
database layout, gives the same findings and metrics: the two readers are
two ways into one set of tables, whatever the fault."""

from __future__ import annotations


import pytest


from advisor.pipeline import analyze
from bench.scenarios import Spec, generate


def _findings(report) -> list[tuple]:
    return [(f.rule, f.severity, f.scope.ranks, f.scope.steps, f.message) for f in report.findings]


def _same(a, b) -> bool:
    """Equal, numbers to rounding: the database layout keeps integer ns
    where the text layout writes us with three decimals, and metrics round
    ms to three decimals."""
    if isinstance(a, float) and isinstance(b, float):
        return b == pytest.approx(a, rel=1e-5, abs=2e-3, nan_ok=True)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("fault,pp", [("data-starved", 1), ("slow-nic", 1), ("stall", 1), ("slow-stage", 2)])
def test_text_and_database_layouts_give_the_same_report(tmp_path, fault, pp):
    spec = Spec(ranks=16, steps=12, fault=fault, seed=3, kernels_per_step=4, pp=pp)
    text, labels = generate(spec, tmp_path / "text", "ascend-text")
    db, _ = generate(spec, tmp_path / "db", "ascend-db")
    a, b = analyze(text, jobs=1), analyze(db, jobs=1)
    assert a.findings, f"{fault}: nothing found, the comparison would prove little"
    assert _findings(a) == _findings(b)
    assert set(a.metrics) == set(b.metrics)
    for mid, m in a.metrics.items():
        assert _same(m.value, b.metrics[mid].value), (mid, m.value, b.metrics[mid].value)
    hosts = {r: f"node{r // labels['ranks_per_host']}" for r in range(spec.ranks)}
    for report in (a, b):
        assert report.run.ranks == list(range(spec.ranks))
    if fault == "data-starved":  # the starved host is named from the rank folders in both layouts
        starved = hosts[labels["ranks"][0]]
        assert all(f"host {starved}" in r.findings[0].message for r in (a, b))
