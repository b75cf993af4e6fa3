"""Overhead of ``advisor run``: step time inside and outside the profiled window.

A small CPU training script (an MLP; ``--hidden`` sets how long its
operators take: 1024 gives ~15 ms steps of ~170 profiled operators) records
the wall time of every step into a JSON file. It runs ``--repeats`` times
plainly (``python script.py``) and ``--repeats`` times under ``advisor run
--warmup W --steps N``, alternating so machine load hits both alike. Each
profiled run is paired with the plain run before it; for each kind of step
the figure is the median over pairs of (profiled run's median step time /
plain run's median step time), with the range over pairs:

* ``inside``: the recorded steps before the last one (profiler on);
* ``export``: the last recorded step (the trace is written in its
  optimizer-step hook);
* ``after``: the steps after the window (profiler off again: should be 1.00).

Machine noise between two processes is ~10% here, so ``--per-op`` also
measures, in one process, what the profiler costs per recorded operator:
blocks of steps alternate between no profiler and ``torch.profiler`` with
the settings ``advisor run`` uses (CPU activity, ``record_shapes`` on, memory
off) and with ``record_shapes`` off; cost per operator = (profiled - plain
step time) / operators recorded per step. Step overhead of any job is about
that cost times its operators per step.

No assertions: it prints a table (``--markdown`` for docs/).

    python -m bench.run_overhead                 # 9 + 9 runs of 40 steps
    python -m bench.run_overhead --per-op --hidden 64
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


def _window_slices(steps: int, warmup: int, window: int) -> dict[str, slice]:
    """Step indices of each kind. advisor run starts the profiler in the
    optimizer-step hook of step 0, so warm-up is steps 1..W, the recorded
    window W+1..W+N, and the trace is exported inside step W+N."""
    last = warmup + window
    return {"inside": slice(warmup + 1, last), "export": slice(last, last + 1), "after": slice(last + 1, steps)}


def measure(repeats: int, steps: int, warmup: int, window: int, hidden: int) -> dict[str, list[float]]:
    """Per pair of runs, the profiled/plain ratio of median step times of each kind."""
    work = Path(tempfile.mkdtemp(prefix="advisor_overhead_"))
    script = work / "train.py"
    script.write_text(SCRIPT)
    advisor = [shutil.which("advisor") or sys.executable, *([] if shutil.which("advisor") else ["-m", "advisor.cli"])]
    kinds = _window_slices(steps, warmup, window)
    out: dict[str, list[float]] = {k: [] for k in kinds} | {"plain_ms": []}
    try:
        for i in range(repeats):
            plain = _run([sys.executable, str(script), str(steps), str(hidden)], work / f"plain{i}.json", work)
            prof = _run([*advisor, "run", "--warmup", str(warmup), "--steps", str(window), "-o",
                         str(work / f"out{i}"), "--no-color", str(script), str(steps), str(hidden)], work / f"run{i}.json", work)
            for k, sl in kinds.items():
                out[k].append(statistics.median(prof[sl]) / statistics.median(plain[sl]))
            out["plain_ms"].append(1000 * statistics.median(plain[kinds["inside"]]))
            print(f"  pair {i + 1}/{repeats}: " + ", ".join(f"{k} {out[k][-1]:.2f}x" for k in kinds), file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def render(out: dict[str, list[float]], md: bool, args) -> str:
    rows = []
    for k, what in (("inside", "recorded steps but the last (profiler on)"),
                    ("export", "last recorded step (trace written)"),
                    ("after", "later steps (profiler off)")):
        rows.append((what, f"{statistics.median(out[k]):.2f}x", f"{min(out[k]):.2f}-{max(out[k]):.2f}x"))
    head = ("steps", "profiled / plain (median of pairs)", "range over pairs")
    return (f"{args.repeats} pairs of plain and profiled runs of {args.steps} steps, hidden {args.hidden} "
            f"(plain step {statistics.median(out['plain_ms']):.1f} ms), --warmup {args.warmup} --steps {args.window}\n\n"
            + _table(head, rows, md))


def _table(head: tuple[str, ...], rows: list[tuple[str, ...]], md: bool) -> str:
    if md:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    else:
        w = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
        lines = ["  ".join(f"{c:<{n}}" for c, n in zip(r, w)) for r in (head, *rows)]
    return "\n".join(lines) + "\n"


PER_OP = '''
import json, statistics, sys, time
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile
blocks, per_block, hidden = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 256), torch.randn(256, 1)
def step():
    opt.zero_grad(set_to_none=True)
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
def block():
    ts = []
    for _ in range(per_block):
        t = time.perf_counter(); step(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)
for _ in range(5):
    step()
modes = {"plain": None, "shapes": True, "no_shapes": False}
res, ops = {m: [] for m in modes}, 0
for _ in range(blocks):
    for m, shapes in modes.items():
        if shapes is None:
            res[m].append(block())
            continue
        with profile(activities=[ProfilerActivity.CPU], record_shapes=shapes, profile_memory=False) as p:
            res[m].append(block())
        ops = len(p.events()) / per_block
print(json.dumps({"ops_per_step": ops, **{m: statistics.median(v) for m, v in res.items()}}))
'''


def measure_per_op(blocks: int, per_block: int, hidden: int) -> dict[str, float]:
    """Median step time without and with the profiler, in one process."""
    proc = subprocess.run([sys.executable, "-c", PER_OP, str(blocks), str(per_block), str(hidden)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"per-op benchmark failed: {proc.stderr.strip()[-300:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def render_per_op(r: dict[str, float], md: bool, args) -> str:
    plain, ops = r["plain"], r["ops_per_step"]
    rows = [("no profiler", f"{plain * 1e3:.2f}", "1.00x", "-")]
    for m, what in (("shapes", "profiler, record_shapes on (advisor run)"), ("no_shapes", "profiler, record_shapes off")):
        rows.append((what, f"{r[m] * 1e3:.2f}", f"{r[m] / plain:.2f}x", f"{(r[m] - plain) / ops * 1e6:.1f}"))
    head = ("setting", "step ms (median)", "ratio", "us per operator")
    return (f"one process, {args.blocks} alternating blocks of {args.per_block} steps, hidden {args.hidden}, "
            f"{ops:.0f} operators recorded per step\n\n" + _table(head, rows, md))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run_overhead", description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=9, help="pairs of plain and profiled runs")
    ap.add_argument("--steps", type=int, default=40, help="training steps per run")
    ap.add_argument("--warmup", type=int, default=3, help="advisor run --warmup")
    ap.add_argument("--window", type=int, default=5, help="advisor run --steps")
    ap.add_argument("--hidden", type=int, default=1024, help="MLP width: larger = longer operators")
    ap.add_argument("--per-op", action="store_true", help="in-process cost per recorded operator instead")
    ap.add_argument("--blocks", type=int, default=9, help="--per-op: blocks of each setting")
    ap.add_argument("--per-block", type=int, default=15, help="--per-op: steps per block")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    if args.per_op:
        print(render_per_op(measure_per_op(args.blocks, args.per_block, args.hidden), args.markdown, args))
    else:
        print(render(measure(args.repeats, args.steps, args.warmup, args.window, args.hidden), args.markdown, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
