"""bench.phases: on a generated cluster, every phase of ``advisor report``
is timed and printed, and the read-only mode reads the ranks."""

from __future__ import annotations

import re

from bench import ascend_cluster, phases

PHASES = ("imports", "compiling the rules", "reading and merging the ranks", "engine, summary tables", "metrics",
          "writing the report files", "total")


def _seconds(out: str) -> dict[str, float]:
    return {m.group(1).strip(): float(m.group(2)) for m in re.finditer(r"^(.+?)\s+(\d+\.\d+) s", out, re.M)}


def test_every_phase_is_timed_on_a_generated_cluster(tmp_path, capsys):
    cluster = ascend_cluster.write(tmp_path / "cluster", ascend_cluster.Layout(ranks=2, steps=2, kernels=8))
    phases.main([str(cluster), "--jobs", "1"])
    spent = _seconds(capsys.readouterr().out)
    assert set(spent) == set(PHASES)
    assert spent["total"] > 0 and spent["reading and merging the ranks"] > 0
    phases.main([str(cluster), "--read-only"])
    assert _seconds(capsys.readouterr().out)["reading the ranks"] > 0
