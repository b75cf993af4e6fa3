"""``python -m bench.scenarios``: write one generated run under a folder."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import orjson

from bench.scenarios import FAULTS, FORMATS, Spec, generate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scenarios",
                                 description="Write a labelled synthetic cluster profile.")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--fault", choices=FAULTS, default="healthy")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--format", choices=FORMATS, default="ascend-text")
    ap.add_argument("--pp", type=int, default=None, help="pipeline stages (default 1; 2/4 for slow-stage)")
    ap.add_argument("--ranks-per-host", type=int, default=None)
    ap.add_argument("--stall-every", type=int, default=None)
    ap.add_argument("--severity", type=float, default=None)
    ap.add_argument("--kernels-per-step", type=int, default=24)
    ap.add_argument("--collectives", type=int, default=1,
                    help="gradient buckets: the large all-reduce of a step as N operators")
    ap.add_argument("--level", type=int, choices=(0, 1), default=1,
                    help="Ascend profiler level: 0 (the profilers' default) writes no communication.json / "
                         "communication_matrix.json (database layout: no CommAnalyzer tables)")
    ap.add_argument("-o", "--output", required=True, type=Path,
                    help="folder to create (data/ and labels.json go in it); keep it under /tmp")
    ap.add_argument("--force", action="store_true", help="replace the output folder")
    args = ap.parse_args(argv)
    if args.output.exists():
        if not args.force:
            print(f"scenarios: error: {args.output} exists (use --force)", file=sys.stderr)
            return 2
        shutil.rmtree(args.output)
    spec = Spec(ranks=args.ranks, steps=args.steps, fault=args.fault, seed=args.seed,
                ranks_per_host=args.ranks_per_host, pp=args.pp, stall_every=args.stall_every,
                severity=args.severity, kernels_per_step=args.kernels_per_step,
                collectives=args.collectives)
    data, labels = generate(spec, args.output, args.format, args.level)
    print(f"{data}  {orjson.dumps(labels).decode()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
