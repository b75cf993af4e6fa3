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
