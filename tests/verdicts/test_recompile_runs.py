"""torch.compile recompiling, on real CPU runs under ``advisor run``: an MLP
compiled with the ``aot_eager`` backend (Dynamo and AOTAutograd, no C++
compiler needed) and fed a new batch size every step.

* ``dynamic=False``: every new shape fails a guard and the function is
  compiled again, about 0.2 s each, until its eighth compilation, after
  which torch runs it uncompiled. advisor called such a window "mostly
  one-time start-up: profile later steps" (inconclusive), which profiling
  later would never have cured.
* the default (``dynamic=None``): the second shape recompiles once with the
  batch dimension dynamic and never again; that one recompilation is
  start-up, and the window stays "mostly start-up".
"""

from __future__ import annotations

from tests._profiled import needs_torch, profiled, value

SCRIPT = """
import sys, torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
compiled = torch.compile(model, backend="aot_eager", dynamic={"static": False, "default": None}[sys.argv[1]])
for step in range(12):
    b = 32 + 4 * step  # a new batch size every step
    x, y = torch.randn(b, 256), torch.randint(0, 10, (b,))
    opt.zero_grad()
    nn.functional.cross_entropy(compiled(x), y).backward()
    opt.step()
"""


def _run(tmp_path, mode: str, steps: int) -> dict:
    return profiled(tmp_path / mode, SCRIPT, mode, steps=steps, warmup=0, name="train_compiled.py")[0]


@needs_torch
def test_a_guard_failing_every_step_is_recompilation_not_start_up(tmp_path):
    report = _run(tmp_path, "static", steps=8)
    # the first compilation ran before the profiler started; each profiled step compiles the next shape,
    # and the eighth (0/8) finds the limit reached
    assert value(report, "window.recompiles") == 8
    assert report["metrics"]["window.recompiles"]["evidence"]["compile_ids"] == [f"0/{c}" for c in range(1, 9)]
    assert value(report, "window.recompile_steps") == 8
    assert value(report, "window.recompile_limit_reached") is True
    found = {f["rule"]: f for f in report["findings"]}
    assert "recompile" in found and found["recompile"]["severity"] in ("high", "critical"), list(found)
    assert "new input shape" in found["recompile"]["message"]
    assert "limit of 8 compilations" in found["recompile"]["message"]
    assert "dynamic=True" in found["recompile"]["fix"]["code"]
    # the steady steps leave the compiling steps out, and what the function saves compiled is not in the
    # profile: no saving per step is claimed (it was the steady step's whole time, a fraction of a ms)
    assert found["recompile"]["estimated_gain_ms"] is None and found["recompile"]["time_at_stake_ms"] is None
    assert "No saving per step is estimated" in found["recompile"]["message"]
    assert report["verdict"]["status"] == "problems", report["verdict"]["reason"]
    assert "warmup-window" not in found  # not "profile later steps"


@needs_torch
def test_the_one_automatic_dynamic_recompilation_is_start_up(tmp_path):
    report = _run(tmp_path, "default", steps=6)
    assert value(report, "window.recompiles") == 1
    assert value(report, "window.recompile_ratio") == 0.0
    assert "recompile" not in {f["rule"] for f in report["findings"]}
    assert report["verdict"]["status"] == "inconclusive", report["verdict"]["reason"]
    assert "start-up" in report["verdict"]["reason"]
