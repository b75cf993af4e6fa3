"""A trace recorded without a schedule (``with torch.profiler.profile() as
prof:`` around a few iterations, no ``prof.step()``) has no
``ProfilerStep#N`` markers. Each iteration still ends with the optimizer's
``step()`` (``Optimizer.step#<class>.step``), so the steps are cut there
and every per-step check runs (not one window with step NA). A loop
with two optimizers (a GAN's) is cut at the later one, once per
iteration."""

from __future__ import annotations

import subprocess
import sys

import pytest

import advisor

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

SCRIPT = """
import sys, torch
from torch import nn
from torch.profiler import profile, ProfilerActivity

torch.manual_seed(0)
gen, disc = nn.Linear(64, 256), nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))
opt_d = torch.optim.AdamW(disc.parameters(), lr=1e-3)
opt_g = torch.optim.AdamW(gen.parameters(), lr=1e-3)
z = torch.randn(64, 64)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    for step in range(int(sys.argv[2])):
        loss_d = disc(gen(z).detach()).mean()
        opt_d.zero_grad(); loss_d.backward(); opt_d.step()
        if sys.argv[3] == "gan":
            loss_g = -disc(gen(z)).mean()
            opt_g.zero_grad(); loss_g.backward(); opt_g.step()
prof.export_chrome_trace(sys.argv[1])
"""


@pytest.mark.parametrize("loop", ["one", "gan"])
def test_steps_are_cut_where_the_optimizer_steps(tmp_path, loop):
    script, trace = tmp_path / "loop.py", tmp_path / "trace.json"
    script.write_text(SCRIPT)
    subprocess.run([sys.executable, str(script), str(trace), "6", loop], check=True, capture_output=True,
                   timeout=300, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert "ProfilerStep#" not in trace.read_text()
    report = advisor.analyze(trace)
    assert report.run.steps_found == 6, report.run.notes
    assert any("steps cut where the optimizer's step() ends" in n for n in report.run.notes)
    assert report.metrics["step.time_ms"].value > 0


def test_a_gpu_trace_without_its_step_markers_reads_as_with_them(corpus, tmp_path):
    """A real V100 ResNet-50 trace (6 steps, DataLoader without workers)
    with its ProfilerStep#N events removed: the steps cut at the optimizer's
    step() give the same findings, and the mean step within 0.1%."""
    import gzip
    import json

    source = corpus / "kineto-tb-plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(source.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    stripped = tmp_path / "worker0.pt.trace.json"
    stripped.write_text(json.dumps(doc))
    marked, cut = advisor.analyze(source), advisor.analyze(stripped)
    assert cut.run.steps_found == marked.run.steps_found == 6
    assert [(f.rule, f.severity) for f in cut.findings] == [(f.rule, f.severity) for f in marked.findings]
    assert cut.metrics["step.time_ms"].value == pytest.approx(marked.metrics["step.time_ms"].value, rel=1e-3)
