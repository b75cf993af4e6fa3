"""What the profiler's own cost adds to the recorded steps (``advisor run``,
PyTorch's profiler on a CPU, OMP_NUM_THREADS=1).

``advisor run`` times the driver's steps after the recorded window with
the profiler off, and the report's notes compare them with the window's
mean step. Measured on a 2-core host: an MLP of 100 layers 32 wide (some
2000 operators a step) took 7.7 ms a step without the profiler and 20.5 ms
under it; a 3-layer MLP 1024 wide on a batch of 256 (a few dozen larger
operators) about the same either way.
"""

from __future__ import annotations

import re

import pytest

from advisor.collectors.live.runner import PROFILER_COST_RATIO
from tests._profiled import needs_torch, profiled, value

SCRIPT = """
import sys, torch
from torch import nn

kind, steps = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
width, depth, rows = (32, 100, 64) if kind == "many-small" else (1024, 3, 256)
layers = []
for _ in range(depth):
    layers += [nn.Linear(width, width), nn.Tanh()]
model = nn.Sequential(*layers, nn.Linear(width, 2))
opt = torch.optim.Adam(model.parameters(), 1e-3, foreach=True)
x, y = torch.randn(rows, width), torch.randint(0, 2, (rows,))
for step in range(steps):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
STEPS, WARMUP = 5, 3
#: the first step, the warm-up and the recorded steps: the window closes at the end of this one
WINDOW_END = 1 + WARMUP + STEPS
NOTE = re.compile(r"the (\d+) step\(s\) after the recorded window, timed without the profiler, took ([\d.]+) ms on "
                  r"average against ([\d.]+) ms in the window: (.*)")


def _note(report: dict) -> re.Match | None:
    return next(filter(None, map(NOTE.fullmatch, report["run"]["notes"])), None)


def _run(tmp_path, kind: str, steps: int) -> dict:
    return profiled(tmp_path / kind, SCRIPT, kind, steps, steps=STEPS, warmup=WARMUP, name="train_cost.py")[0]


@needs_torch
def test_an_op_heavy_loop_is_told_what_the_profiler_adds(tmp_path):
    report = _run(tmp_path, "many-small", WINDOW_END + STEPS + 1)
    note = _note(report)
    assert note is not None, report["run"]["notes"]
    timed, plain, window, said = int(note[1]), float(note[2]), float(note[3]), note[4]
    assert timed == STEPS and window == pytest.approx(value(report, "step.time_ms"), abs=0.006)
    cost = re.fullmatch(r"the profiler's own cost adds about (\d+)% to the recorded steps, and every time in this "
                        r"report includes it", said)
    # the note calls the cost out from PROFILER_COST_RATIO: measured 166% on a quiet host, 29% in a CI run where the
    # other test worker loaded the cores while the plain steps were timed (how much is host noise, not asserted)
    assert cost is not None and window >= PROFILER_COST_RATIO * plain, said
    assert int(cost[1]) == pytest.approx(100 * (window / plain - 1), abs=1.0)


@needs_torch
def test_a_loop_of_few_large_operators_is_told_the_profiler_adds_little(tmp_path):
    report = _run(tmp_path, "few-large", WINDOW_END + STEPS + 1)
    note = _note(report)
    assert note is not None, report["run"]["notes"]
    plain, window = float(note[2]), float(note[3])
    assert window < 1.5 * plain, note[0]  # a few percent, under the host's step-to-step noise


@needs_torch
def test_a_script_that_ends_with_the_window_gets_no_comparison(tmp_path):
    report = _run(tmp_path, "many-small", WINDOW_END)
    assert _note(report) is None
