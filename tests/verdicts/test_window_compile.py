"""A real CPU run under torch.compile, profiled by ``advisor run``: a window
that holds the compile is reported as start-up (torch.compile), not as a
slow step, and its per-step figures come from the steps after it; with the
warm-up steps skipped, there is no start-up to report.

The model sees batches of changing length (32, 40, 48, 56 rows in turn), as
padded variable-length batches do: the first batch compiles a static graph
before the profiler starts (``advisor run`` starts it after the first
step), the second recompiles with dynamic shapes -- inside ``ProfilerStep#1``
when profiling from the first step -- and every later batch reuses it.
"""

from __future__ import annotations

import pytest

from tests._profiled import profiled

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

SCRIPT = """
import torch
from torch import nn

torch.manual_seed(0)
model = torch.compile(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(10):
    rows = 32 + 8 * (step % 4)
    x, y = torch.randn(rows, 64), torch.randn(rows, 1)
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
"""
SERIOUS = {"medium", "high", "critical"}


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory):
    """One Inductor cache for both runs (the second compiles from it)."""
    return tmp_path_factory.mktemp("inductor")


def _run(tmp_path, cache, warmup: int) -> dict:
    return profiled(tmp_path, SCRIPT, steps=3, warmup=warmup, env={"TORCHINDUCTOR_CACHE_DIR": str(cache)},
                    name="train_compiled.py", timeout=600)[0]


def test_compile_in_the_window_is_startup_not_a_slow_step(tmp_path, compile_cache):
    report = _run(tmp_path, compile_cache, warmup=0)
    m = {k: v["value"] for k, v in report["metrics"].items()}
    found = {f["rule"]: f for f in report["findings"]}
    assert [f["rule"] for f in report["findings"] if f["severity"] in SERIOUS] == []
    warm = found["warmup-window"]
    assert warm["severity"] == "info" and warm["estimated_gain_ms"] is None
    assert "(torch.compile)" in warm["message"] and "left out: step 1" in warm["message"]
    assert m["window.warmup_steps"] == [1]
    assert m["window.warmup_items"][0]["kind"] == "compile" and m["window.warmup_items"][0]["step"] == 1
    assert m["window.warmup_ratio"] > 0.5 and m["window.steady_warmup_ratio"] < 0.5
    # the step time is the steady steps', not the compile's
    assert m["step.time_ms"] < 0.2 * m["window.warmup_ms"]
    assert "step-outlier" not in found and "host-bound" not in found


def test_with_the_warmup_steps_skipped_there_is_no_startup(tmp_path, compile_cache):
    report = _run(tmp_path, compile_cache, warmup=3)
    assert "warmup-window" not in {f["rule"] for f in report["findings"]}
    evidence = report["metrics"]["window.warmup_ms"]["evidence"]
    assert "compile" not in evidence.get("by_kind_ms", {}), evidence
