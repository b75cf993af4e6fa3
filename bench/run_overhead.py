"""Overhead of ``advisor run``: step time inside and outside the profiled window.

A small CPU training script (an MLP; ``--hidden`` sets how long its
operators take: 1024 gives ~15 ms steps of ~50 tiny operators) records the
wall time of every step into a JSON file. It runs ``--repeats`` times
plainly (``python script.py``) and ``--repeats`` times under ``advisor run
--warmup W --steps N``, alternating so machine load hits both alike. For
each kind of step the figure is the median over runs of the run's median
step time, as a ratio to the plain runs' same steps:

* ``inside``: the N recorded steps (profiler on, default settings);
* ``export``: the step after the window (the trace is written then);
* ``after``: the steps after that (profiler off again: should be 1.00).

No assertions: it prints a table (``--markdown`` for docs/).

    python -m bench.run_overhead                 # 5 + 5 runs of 40 steps
    python -m bench.run_overhead --repeats 9 --markdown
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = '''
import json, os, sys, time
import torch
from torch import nn
steps, hidden = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 256), torch.randn(256, 1)
times = []
for _ in range(steps):
    t = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    times.append(time.perf_counter() - t)
with open(os.environ["BENCH_STEP_TIMES"], "w") as fh:
    json.dump(times, fh)
'''


def _run(cmd: list[str], times_file: Path, cwd: Path) -> list[float]:
    env = {**os.environ, "BENCH_STEP_TIMES": str(times_file)}
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not times_file.exists():
        raise SystemExit(f"{' '.join(cmd)} failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
    return json.loads(times_file.read_text())


def measure(repeats: int, steps: int, warmup: int, window: int, hidden: int) -> dict[str, list[float]]:
    """Per run, the median step time of each kind (plain_*, run_*), in ms."""
    work = Path(tempfile.mkdtemp(prefix="advisor_overhead_"))
    script = work / "train.py"
    script.write_text(SCRIPT)
    advisor = [shutil.which("advisor") or sys.executable, *([] if shutil.which("advisor") else ["-m", "advisor.cli"])]
    kinds = {"inside": slice(warmup, warmup + window), "export": slice(warmup + window, warmup + window + 1),
             "after": slice(warmup + window + 1, steps)}
    out: dict[str, list[float]] = {f"{who}_{k}": [] for who in ("plain", "run") for k in kinds}
    try:
        for i in range(repeats):
            plain = _run([sys.executable, str(script), str(steps), str(hidden)], work / f"plain{i}.json", work)
            prof = _run([*advisor, "run", "--warmup", str(warmup), "--steps", str(window), "-o",
                         str(work / f"out{i}"), "--no-color", str(script), str(steps), str(hidden)], work / f"run{i}.json", work)
            for k, sl in kinds.items():
                out[f"plain_{k}"].append(1000 * statistics.median(plain[sl]))
                out[f"run_{k}"].append(1000 * statistics.median(prof[sl]))
            print(f"  run {i + 1}/{repeats}: " + ", ".join(
                f"{k} {out['run_' + k][-1]:.1f}/{out['plain_' + k][-1]:.1f} ms" for k in kinds), file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def render(out: dict[str, list[float]], md: bool, args) -> str:
    rows = []
    for k, what in (("inside", f"{args.window} recorded steps (profiler on)"),
                    ("export", "the step after the window (trace written)"),
                    ("after", "later steps (profiler off)")):
        plain, run = statistics.median(out[f"plain_{k}"]), statistics.median(out[f"run_{k}"])
        rows.append((what, f"{plain:.2f}", f"{run:.2f}", f"{run / plain:.2f}x"))
    head = ("steps", "plain ms (median)", "advisor run ms (median)", "ratio")
    if md:
        lines = ["| " + " | ".join(head) + " |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    else:
        lines = ["  ".join(f"{h:<24}" for h in head)] + ["  ".join(f"{c:<24}" for c in r) for r in rows]
    return (f"{args.repeats} plain and {args.repeats} profiled runs of {args.steps} steps, hidden {args.hidden}, "
            f"--warmup {args.warmup} --steps {args.window}\n\n" + "\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run_overhead", description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=40, help="training steps per run")
    ap.add_argument("--warmup", type=int, default=3, help="advisor run --warmup")
    ap.add_argument("--window", type=int, default=5, help="advisor run --steps")
    ap.add_argument("--hidden", type=int, default=1024, help="MLP width: larger = longer operators")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    print(render(measure(args.repeats, args.steps, args.warmup, args.window, args.hidden), args.markdown, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
