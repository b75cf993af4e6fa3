"""Repeatability of verdicts on real CPU training runs.

Each scenario is one ``advisor run`` of ``examples/train_ddp.py`` (gloo DDP
on CPU, started by torchrun), repeated ``--repeats`` times. A verdict holds
when the same script gets the same set of medium-or-worse findings run after
run; this prints, per run, that set and the figures the communication and
cluster rules read (exposed shares by collective kind, the slow rank and its
excess), then per scenario how often the most frequent set came.

    python -m bench.repeatability                       # every scenario, 10 runs each
    python -m bench.repeatability one-bucket bucketed --repeats 5

Scenarios (``SCENARIOS``; the real-run tests use the same commands):

* ``one-bucket``: ``BIG_MLP`` (3.2M parameters, 12.7 MB of gradients) under
  DDP with one 25 MB bucket: one all-reduce after backward.
* ``bucketed``: ``DP_MODEL`` with 0.25 MB buckets, reduced while the conv
  stem's backward still runs.
* ``after-backward``: ``DP_MODEL``, one all-reduce per gradient after
  backward (no DDP).
* ``alltoall``: the small MLP behind a DLRM-style embedding exchange by
  all-to-all.
* ``vary-batch-2``: two ranks of ``UNEVEN``'s MLP, each drawing its batch
  size per step (16 to 128 rows).
* ``fsdp-2``: two ranks of a 4-layer, 512-wide MLP sharded by FSDP, one
  unit per Linear layer.
* ``straggler-2``: two ranks, rank 1 sleeping 30 ms every step.
* ``healthy-2``: the same two ranks without the sleep.
* ``uneven-2``: two ranks of a larger MLP (``UNEVEN``), rank 1 given
  batches 4x rank 0's: it executes 4x the FLOPs, slower in compute in
  every step.
* ``accum-sync``: two ranks accumulating gradients over 4 micro-batches per
  optimizer step (``ACCUM``), all-reduced after every micro-batch;
  ``accum-no-sync`` the same with the first three under ``model.no_sync()``.
* ``slow-data``: ``examples/train_cnn.py`` on one process, every sample
  2 ms to load, no DataLoader workers: the loop waits for its batches.

Loops users write, audited against their measured truth (``PAIR`` unless
said; docs/accuracy.md "Runs the rules were not built on"):

* ``rank0-checkpoint-2``: rank 0 alone saves a checkpoint of ``UNEVEN``'s
  MLP (``torch.save``) every step; ``rank0-log-2`` appends a log line per
  parameter tensor; ``balanced-mlp-2`` the same MLP without either.
* ``slow-data-2``: rank 1's Dataset takes 20 ms per batch.
* ``find-unused-2``: DDP(find_unused_parameters=True), every parameter used.
* ``tiny-bucket-2``: ``DP_MODEL`` with 0.01 MB buckets (one all-reduce per
  gradient tensor); ``default-bucket-2`` with DDP's default.
* ``wide-layer-2``: ``WIDE_MLP`` under DDP's default buckets: the first
  bucket holds the 4 MB weight of the 1024 x 1024 layer, so it waits for
  that layer's backward whatever the bucket size.
* ``batchnorm-2``: BatchNorm after each hidden layer, DDP broadcasting
  rank 0's buffers before every forward; ``batchnorm-nobcast-2`` without.
* ``log-loss-2``: the loss all-reduced and read every step.
* ``healthy-4`` / ``busy-4``: four ranks, rank 2 spinning 20 ms per step in
  ``busy-4``; ``healthy-3`` / ``busy-3``: three ranks, rank 1 spinning.

Runs use OMP_NUM_THREADS=1 as the tests do, and this interpreter's advisor
and torch (run it with another checkout's interpreter to compare). No
assertions.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(os.environ.get("ADVISOR_REPO", Path(__file__).resolve().parent.parent))
SCRIPT = ROOT / "examples" / "train_ddp.py"
SERIOUS = ("medium", "high", "critical")

#: 2-process data-parallel model: an MLP (8 layers, 0.18M parameters in 18
#: gradient tensors, 0.7 MB of float32 gradients) behind a conv stem that has
#: few parameters (4 tensors) but most of the compute. DDP's default 25 MB
#: bucket holds every gradient (one all-reduce after backward); 0.25 MB
#: buckets give three (two MLP buckets, reduced during the stem's backward,
#: and the stem's).
DP_MODEL = ("--hidden", "128", "--layers", "8", "--conv-channels", "32", "--image-size", "32")
#: An MLP whose 12.7 MB of float32 gradients (3.2M parameters, mostly three
#: 1024 x 1024 layers) make an all-reduce that is a large share of its step.
BIG_MLP = ("--hidden", "1024", "--layers", "4")
#: An MLP of 4.3 MB of float32 gradients, 4.2 MB of them one 1024 x 1024
#: weight whose backward comes last but for a thin first layer.
WIDE_MLP = ("--features", "32", "--hidden", "1024", "--layers", "2", "--batch-size", "64")
#: Steps profiled in the data-parallel runs, of the steps trained.
DP_STEPS, DP_TRAIN_STEPS = 10, "14"
#: Two ranks of a small MLP, for the cluster rules, and the steps profiled:
#: a straggler is slow in every step, and a run of 9 steady steps lets a
#: host's passing load show as scatter between steps.
PAIR = ("--steps", "14", "--hidden", "256", "--layers", "2")
PAIR_STEPS = 10
#: Two ranks of an MLP large enough that 4x the batch is milliseconds of
#: compute, rank 1 given 4x the batch (``--heavy-factor``).
UNEVEN = ("--steps", "14", "--hidden", "512", "--layers", "3", "--batch-size", "32",
          "--heavy-rank", "1", "--heavy-factor", "4")


def torchrun(nproc: int, *args: str) -> list[str]:
    """torchrun of ``examples/train_ddp.py`` by this interpreter."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
            str(SCRIPT), *args]


#: Two ranks accumulating 4 micro-batches of 16 per optimizer step.
ACCUM = ("--steps", "14", "--hidden", "512", "--layers", "3", "--batch-size", "64", "--accum", "4")

#: name -> (profiled steps, command)
SCENARIOS = {
    "one-bucket": (DP_STEPS, torchrun(2, "--steps", DP_TRAIN_STEPS, *BIG_MLP, "--bucket-cap-mb", "25")),
    "bucketed": (DP_STEPS, torchrun(2, "--steps", DP_TRAIN_STEPS, *DP_MODEL, "--bucket-cap-mb", "0.25")),
    "after-backward": (DP_STEPS, torchrun(2, "--steps", DP_TRAIN_STEPS, *DP_MODEL, "--allreduce", "after-backward")),
    "alltoall": (8, torchrun(2, "--steps", "14", "--exchange", "alltoall")),
    "vary-batch-2": (PAIR_STEPS, torchrun(2, *UNEVEN[:-6], "--batch-size", "64", "--vary-batch")),
    "fsdp-2": (PAIR_STEPS, torchrun(2, "--steps", "14", "--hidden", "512", "--layers", "4", "--allreduce", "fsdp")),
    "straggler-2": (PAIR_STEPS, torchrun(2, *PAIR, "--slow-rank", "1", "--slow-ms", "30")),
    "healthy-2": (PAIR_STEPS, torchrun(2, *PAIR)),
    "uneven-2": (PAIR_STEPS, torchrun(2, *UNEVEN)),
    "accum-sync": (PAIR_STEPS, torchrun(2, *ACCUM, "--sync-every-micro-batch")),
    "accum-no-sync": (PAIR_STEPS, torchrun(2, *ACCUM)),
    "rank0-checkpoint-2": (PAIR_STEPS, torchrun(2, *UNEVEN[:-4], "--rank0-extra", "checkpoint")),
    "rank0-log-2": (PAIR_STEPS, torchrun(2, *UNEVEN[:-4], "--rank0-extra", "log")),
    "balanced-mlp-2": (PAIR_STEPS, torchrun(2, *UNEVEN[:-4])),
    "slow-data-2": (PAIR_STEPS, torchrun(2, *PAIR, "--slow-data-rank", "1", "--slow-data-ms", "20")),
    "find-unused-2": (PAIR_STEPS, torchrun(2, *PAIR, "--find-unused-parameters")),
    "tiny-bucket-2": (DP_STEPS, torchrun(2, "--steps", DP_TRAIN_STEPS, *DP_MODEL, "--bucket-cap-mb", "0.01")),
    "default-bucket-2": (DP_STEPS, torchrun(2, "--steps", DP_TRAIN_STEPS, *DP_MODEL)),
    "wide-layer-2": (DP_STEPS, torchrun(2, "--steps", DP_TRAIN_STEPS, *WIDE_MLP)),
    "batchnorm-2": (PAIR_STEPS, torchrun(2, *PAIR, "--norm", "batch")),
    "batchnorm-nobcast-2": (PAIR_STEPS, torchrun(2, *PAIR, "--norm", "batch", "--no-broadcast-buffers")),
    "log-loss-2": (PAIR_STEPS, torchrun(2, *PAIR, "--log-loss")),
    "healthy-4": (PAIR_STEPS, torchrun(4, *PAIR)),
    "busy-4": (PAIR_STEPS, torchrun(4, *PAIR, "--busy-rank", "2", "--busy-ms", "20")),
    "healthy-3": (PAIR_STEPS, torchrun(3, *PAIR)),
    "busy-3": (PAIR_STEPS, torchrun(3, *PAIR, "--busy-rank", "1", "--busy-ms", "20")),
    "slow-data": (5, [sys.executable, str(ROOT / "examples" / "train_cnn.py"), "--steps", "10",
                      "--slow-data", "0.002", "--num-workers", "0"]),
}
#: Metrics printed per run (those present).
FIGURES = ("comm.exposed_allreduce_ratio", "comm.exposed_alltoall_ratio", "comm.exposed_fsdp_ratio",
           "comm.allreduce_layout", "comm.gradient_mb", "comm.bucket_cap_mb", "cluster.slow_rank",
           "cluster.slow_rank_excess_ms", "cluster.slow_rank_excess_ratio", "cluster.slow_rank_zscore",
           "cluster.slow_rank_flops_ratio", "ops.thin_matmul_ratio", "comm.grad_syncs_per_step",
           "comm.unapplied_grad_syncs_per_step", "cluster.slow_component", "step.time_ms")


#: Environment of the runs: one thread per rank for torch's operators (the
#: host has 2 cores; the ranks and gloo's threads share them).
ENV = {"OMP_NUM_THREADS": "1"}


def argv(steps: int, command: list[str], out: Path) -> list[str]:
    """The ``advisor run`` command line profiling ``steps`` steps of
    ``command`` (after one warm-up step) into ``out``."""
    return [sys.executable, "-m", "advisor", "run", "--steps", str(steps), "--warmup", "1",
            "-o", str(out), "--no-color", "--", *command]


def run(steps: int, command: list[str], out: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """One ``advisor run`` (:func:`argv`)."""
    return subprocess.run(argv(steps, command, out), capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **ENV), cwd=out.parent)


def advisor_run(steps: int, command: list[str], out: Path, timeout: float = 300) -> dict:
    """One ``advisor run``; the report, or {"error": ...}."""
    result = run(steps, command, out, timeout)
    if result.returncode != 0:
        return {"error": result.stderr.strip().splitlines()[-1:] or [f"exit {result.returncode}"]}
    return json.loads((out / "report.json").read_text())


def serious(report: dict) -> frozenset[str]:
    """The medium-or-worse findings of a report, as rule(severity) strings."""
    return frozenset(f"{f['rule']}({f['severity']})" for f in report.get("findings", [])
                     if f["severity"] in SERIOUS)


def rules_of(found: frozenset[str]) -> frozenset[str]:
    """The rule names of :func:`serious` strings, severities left out."""
    return frozenset(s.split("(", 1)[0] for s in found)


def figures(report: dict) -> dict:
    metrics = report.get("metrics", {})
    out = {}
    for mid in FIGURES:
        value = metrics.get(mid, {}).get("value")
        if value is not None:
            out[mid.split(".", 1)[1]] = round(value, 3) if isinstance(value, float) else value
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                    help=f"of {', '.join(SCENARIOS)} (default: all)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--keep", type=Path, default=None, help="keep the run folders here")
    args = ap.parse_args(argv)
    unknown = set(args.scenarios) - set(SCENARIOS)
    if unknown:
        ap.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    base = args.keep or Path(tempfile.mkdtemp(prefix="advisor-repeat-"))
    summary = {}
    for name in args.scenarios or list(SCENARIOS):
        steps, command = SCENARIOS[name]
        sets: collections.Counter = collections.Counter()
        names: collections.Counter = collections.Counter()
        for i in range(args.repeats):
            out = base / name / f"run{i}"
            out.parent.mkdir(parents=True, exist_ok=True)
            report = advisor_run(steps, command, out)
            found = serious(report) if "error" not in report else frozenset({"ERROR"})
            sets[found] += 1
            names[rules_of(found)] += 1
            print(f"{name} {i}: {sorted(found) or '-'} {report.get('error') or figures(report)}", flush=True)
        top, count = sets.most_common(1)[0]
        top_names, count_names = names.most_common(1)[0]
        summary[name] = (sorted(top) or "-", count, sorted(top_names) or "-", count_names, args.repeats)
        print(f"{name}: most frequent set {sorted(top) or '-'} in {count} of {args.repeats} runs; "
              f"all sets: {[(sorted(s) or '-', n) for s, n in sets.most_common()]}", flush=True)
    print("\nsummary: the most frequent set of medium-or-worse findings, with severities / rules only")
    for name, (top, count, top_names, count_names, repeats) in summary.items():
        print(f"  {name:16s} {count}/{repeats} {top}   {count_names}/{repeats} {top_names}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
