"""Peak memory and wall time of ``advisor report`` against input size.

Generates inputs of growing size under /tmp (never in the repository; reused
between runs) and runs ``python -m advisor report`` on each in a fresh
process, reporting its wall time and peak resident memory (``ru_maxrss`` of
that process and the workers it waited for, from ``wait4``):

* Ascend clusters: N torch_npu rank folders (``step_trace_time.csv`` with S
  steps, ``kernel_details.csv`` with K kernels per step,
  ``communication.json``), for N in ``--ranks`` (default 8, 64, 256);
* Kineto traces of about M MB each, for M in ``--kineto-mb`` (default 50,
  200), built by ``bench.kineto_load`` from a real corpus trace
  (``--kineto-source``: ``nccl``, a GPU run without input shapes, by
  default; ``shapes``, a GPU run recorded with ``record_shapes``; ``cpu``,
  a CPU-only trace; several may be given).

A bounded reader shows as peak memory growing far slower than input size.
``--huge`` adds a 1024-rank folder and a 2 GB trace (minutes, GBs of /tmp).

    python -m bench.memory_vs_size
    python -m bench.memory_vs_size --ranks 8 64 --kineto-mb 50 --jobs 2
    python -m bench.memory_vs_size --huge
    python -m bench.memory_vs_size --ranks --kineto-mb 200 1000 --kineto-source nccl shapes cpu
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.kineto_load import generate
from bench.scenarios.ascend import KERNEL_HEADER_READ, OUT, STEP_TRACE_COLUMNS

OUT_DIR = Path(tempfile.gettempdir()) / "advisor_bench_memory"

#: the step trace without the pipeline columns (Stage, Bubble, ...), as older torch_npu writes it
STEP_HEADER = ",".join(STEP_TRACE_COLUMNS[:6]) + "\n"
OPS = [("MatMul", "AI_CORE", "DT_BF16;DT_BF16", '"4096,4096;4096,4096"'),
       ("Add", "AI_VECTOR_CORE", "FLOAT;FLOAT", '"4096;4096"'),
       ("Cast", "AI_VECTOR_CORE", "FLOAT16", '"4096"'),
       ("hcom_allReduce_", "HCCL", "FLOAT", '"1024"')]


def ascend_cluster(ranks: int, steps: int = 20, kernels: int = 200) -> Path:
    """(or reuse) ``ranks`` torch_npu rank folders under /tmp."""
    root = OUT_DIR / f"ascend_{ranks}r_{steps}s_{kernels}k"
    done = root / ".complete"
    if done.exists():
        return root
    for rank in range(ranks):
        out = root / f"node{rank // 8}_{rank}_20240101_ascend_pt" / OUT
        out.mkdir(parents=True, exist_ok=True)
        (out.parent / f"profiler_info_{rank}.json").write_text(json.dumps({"rank_id": rank}))
        slow = 1.3 if rank == ranks // 2 else 1.0
        rows = [STEP_HEADER]
        kern = [KERNEL_HEADER_READ]
        comm = {}
        for step in range(1, steps + 1):
            comp = 80000.0 * slow + (step % 3) * 50
            rows.append(f"{step},{comp},{6000.0},{14000.0},{20000.0},{3000.0 + rank % 7}\n")
            t = 1.7e15 + step * 1e5
            for k in range(kernels):
                name, core, dt, shape = OPS[k % len(OPS)]
                dur = 300.0 * slow if core != "HCCL" else 1200.0
                kern.append(f"{step},{name}_{k % 50},{name},{core},{t:.3f},{dur},{shape},{dt}\n")
                t += dur + 5
            comm[f"step{step}"] = {"collective": {f"hcom_allReduce__{step}_0@group": {
                "Communication Time Info": {"Start Timestamp(us)": t, "Elapse Time(ms)": 20.0,
                                            "Transit Time(ms)": 15.0, "Wait Time(ms)": 3.0 + rank % 4,
                                            "Synchronization Time(ms)": 1.0, "Idle Time(ms)": 2.0},
                "Communication Bandwidth Info": {"HCCS": {"Transit Size(MB)": 512.0, "Transit Time(ms)": 15.0,
                                                          "Bandwidth(GB/s)": 34.1, "Large Packet Ratio": 1.0,
                                                          "Size Distribution": {}}}}}}
        (out / "step_trace_time.csv").write_text("".join(rows))
        (out / "kernel_details.csv").write_text("".join(kern))
        (out / "communication.json").write_text(json.dumps(comm))
    done.write_text("")
    return root


def kineto_trace(size_mb: float, source: str = "nccl") -> Path:
    """(or reuse) a Kineto trace of about ``size_mb`` MB built from ``source``."""
    return generate(size_mb, gz=False, source=source)


def size_of(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def measure(target: Path, jobs: int | None) -> dict:
    """Wall time and peak RSS of one ``advisor report`` in a fresh process."""
    out = OUT_DIR / "report_out"
    cmd = [sys.executable, "-m", "advisor", "report", str(target), "-o", str(out), "--no-color"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"rc": proc.returncode, "wall_s": round(wall, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "error": err.strip().splitlines()[-1:] }


def baseline() -> dict:
    """Peak RSS of the interpreter with advisor's imports alone."""
    code = "import advisor.pipeline, advisor.reports"
    proc = subprocess.Popen([sys.executable, "-c", code])
    _, _, usage = os.wait4(proc.pid, 0)
    return {"peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="*", default=[8, 64, 256])
    ap.add_argument("--kineto-mb", type=float, nargs="*", default=[50, 200])
    ap.add_argument("--kineto-source", nargs="+", default=["nccl"], choices=["nccl", "shapes", "cpu"],
                    help="corpus trace(s) the Kineto inputs repeat (bench.kineto_load)")
    ap.add_argument("--jobs", type=int, default=None, help="--jobs for advisor report (default: its own)")
    ap.add_argument("--huge", action="store_true", help="also 1024 ranks and a 2 GB trace")
    ap.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    args = ap.parse_args(argv)
    ranks = list(args.ranks) + ([1024] if args.huge else [])
    sizes = list(args.kineto_mb) + ([2048] if args.huge else [])
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    rows = [("imports only", 0, baseline())]
    for n in ranks:
        target = ascend_cluster(n)
        rows.append((f"ascend {n} ranks", size_of(target), measure(target, args.jobs)))
        print(_line(*rows[-1]) if not args.json else json.dumps(rows[-1]), flush=True)
    for source in args.kineto_source:
        for mb in sizes:
            target = kineto_trace(mb, source)
            rows.append((f"kineto {source} {mb:g} MB", size_of(target), measure(target, args.jobs)))
            print(_line(*rows[-1]) if not args.json else json.dumps(rows[-1]), flush=True)
    if not args.json:
        print()
        print(f"{'input':<24} {'size MB':>9} {'peak RSS MB':>12} {'wall s':>8} {'cpu s':>7}  rc")
        for row in rows:
            print(_line(*row))
    return 0 if all(r[2].get("rc", 0) == 0 for r in rows) else 1


def _line(label: str, size: int, res: dict) -> str:
    return (f"{label:<24} {size / 2**20:>9.1f} {res['peak_rss_mb']:>12.1f} {res.get('wall_s', 0):>8.2f} "
            f"{res.get('cpu_s', 0):>7.2f}  {res.get('rc', '')} {' '.join(res.get('error') or [])}")


if __name__ == "__main__":
    sys.exit(main())
