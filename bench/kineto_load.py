"""Large-trace loading benchmark: advisor's Kineto reader vs HolisticTraceAnalysis.

Generates (once, under /tmp, never in the repository) a Kineto trace of about
the requested size by repeating the events of a corpus trace back to back in
time (each copy shifted past the previous one, with its own step numbers and
correlation ids), then loads it in a fresh subprocess per tool and reports
wall time and peak resident memory (``ru_maxrss`` of that subprocess; the
memory of the imports alone is shown as ``base``).

``--source`` picks the corpus trace: ``nccl`` (default,
``hta/nccl_parser_config/nccl_data.json.gz``: A100 DDP, no input shapes),
``shapes`` (``kineto-tb-plugin/resnet50_num_workers_0``: V100 ResNet-50
recorded with ``record_shapes``, 2021 vocabulary) or ``cpu`` (the same
ResNet trace without its device and runtime events: a CPU-only trace).

HTA is measured when importable, in this interpreter or in the one named by
``$ADVISOR_HTA_PYTHON`` (e.g. a separate venv with ``pip install
holistictraceanalysis``); otherwise the report says it was not measured.

    python -m bench.kineto_load --size-mb 300
    python -m bench.kineto_load --size-mb 300 --gz      # gzipped input
    python -m bench.kineto_load --size-mb 300 --source shapes --no-hta
    python -m bench.kineto_load --baseline /tmp/old     # also an older checkout
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("ADVISOR_CORPUS", REPO.parent / "shared" / "corpus"))
SOURCES = {
    "nccl": CORPUS / "hta" / "nccl_parser_config" / "nccl_data.json.gz",
    "shapes": CORPUS / "kineto-tb-plugin" / "resnet50_num_workers_0" / "worker0.1623143089861.pt.trace.json.gz",
}
SOURCES["cpu"] = SOURCES["shapes"]
SOURCE = SOURCES["nccl"]
#: Categories dropped from the source for ``--source cpu``.
DEVICE_SIDE = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset",
               "cuda_runtime", "Runtime", "cuda_driver", "ac2g", "async"}
OUT_DIR = Path(os.environ.get("ADVISOR_BENCH_DIR", "/tmp/advisor-bench"))


def source_events(source: str) -> tuple[dict, list]:
    """The corpus trace of ``source`` as (document without events, events)."""
    import orjson

    doc = orjson.loads(gzip.decompress(SOURCES[source].read_bytes()))
    events = doc.pop("traceEvents")
    if source == "cpu":
        events = [e for e in events if e.get("cat") not in DEVICE_SIDE]
        doc.pop("deviceProperties", None)
    return doc, events


def generate(size_mb: float, gz: bool, source: str = "nccl") -> Path:
    """Write (or reuse) a trace of about ``size_mb`` MB (uncompressed JSON)."""
    import orjson

    tag = "" if source == "nccl" else f"_{source}"
    folder = OUT_DIR / f"kineto_{int(size_mb)}mb{tag}{'_gz' if gz else ''}"
    path = folder / ("rank-0.pt.trace.json" + (".gz" if gz else ""))
    if path.exists():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    doc, events = source_events(source)
    base = len(orjson.dumps(events))
    copies = max(1, round(size_mb * 1e6 / base))
    times = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(e.get("ts", 0) + e.get("dur", 0) for e in events if isinstance(e.get("ts"), (int, float))) - min(times)
    span = float(span) * 1.01
    corr_max = max(int(e.get("args", {}).get("correlation", 0) or 0) for e in events) + 1
    head = orjson.dumps(doc)[:-1] + b', "traceEvents": ['
    tmp = path.with_suffix(path.suffix + ".part")
    opener = gzip.open(tmp, "wb", compresslevel=1) if gz else open(tmp, "wb")
    with opener as fh:
        fh.write(head)
        for k in range(copies):
            shifted = []
            for e in events:
                e = dict(e)
                if isinstance(e.get("ts"), (int, float)):
                    e["ts"] = e["ts"] + k * span
                name = e.get("name")
                if isinstance(name, str) and name.startswith("ProfilerStep#"):
                    e["name"] = f"ProfilerStep#{int(name[13:]) + k * 1000}"
                args = e.get("args")
                if isinstance(args, dict) and "correlation" in args:
                    e["args"] = dict(args, correlation=int(args["correlation"]) + k * corr_max)
                shifted.append(e)
            chunk = orjson.dumps(shifted)[1:-1]
            fh.write(chunk if k == 0 else b",\n" + chunk)
        fh.write(b"]}")
    tmp.rename(path)
    return path


ADVISOR_CHILD = textwrap.dedent("""
    import json, resource, sys, time
    from pathlib import Path
    from advisor.collectors.kineto import collector as kineto
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    p = kineto.read(Path(sys.argv[1]))
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    peak = r1.ru_maxrss
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "peak_mb": peak / 1024, "base_mb": base / 1024,
                      "steps": len(p.steps), "ops": len(p.ops)}))
""")

HTA_CHILD = textwrap.dedent("""
    import json, resource, sys, time, warnings, logging
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from hta.common.trace import Trace
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    tr = Trace(trace_dir=sys.argv[2], trace_files={0: sys.argv[1]})
    tr.parse_traces(max_ranks=1, use_multiprocessing=False)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    peak = r1.ru_maxrss
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    df = tr.get_trace(0)
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "peak_mb": peak / 1024, "base_mb": base / 1024,
                      "events": len(df)}))
""")


def _run(python: str, code: str, *args: str, pythonpath: str | None = None) -> dict | str:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=str(OUT_DIR))
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["failed"])[-1]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _hta_python() -> str | None:
    for py in (os.environ.get("ADVISOR_HTA_PYTHON"), sys.executable):
        if py and shutil.which(py) or (py and Path(py).exists()):
            ok = subprocess.run([py, "-c", "import hta.common.trace"], capture_output=True)
            if ok.returncode == 0:
                return py
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=300.0)
    ap.add_argument("--gz", action="store_true", help="write the generated trace gzipped")
    ap.add_argument("--source", choices=sorted(SOURCES), default="nccl",
                    help="corpus trace to repeat (default nccl; see the module doc)")
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument("--baseline", metavar="DIR",
                    help="also time the advisor package found under DIR (e.g. an older "
                         "checkout laid out as DIR/advisor/collectors/...)")
    args = ap.parse_args(argv)
    if not SOURCES[args.source].exists():
        print(f"corpus trace not found: {SOURCES[args.source]}", file=sys.stderr)
        return 2
    path = generate(args.size_mb, args.gz, args.source)
    size = path.stat().st_size / 1e6
    print(f"trace: {path} ({size:.0f} MB on disk)")
    adv = _run(sys.executable, ADVISOR_CHILD, str(path))
    _print("advisor kineto.read", adv)
    if args.baseline:
        base = _run(sys.executable, ADVISOR_CHILD, str(path), pythonpath=args.baseline)
        _print(f"baseline kineto.read ({args.baseline})", base)
    if args.no_hta:
        return 0
    py = _hta_python()
    if py is None:
        print("HTA: not installed (pip install holistictraceanalysis, or set ADVISOR_HTA_PYTHON)")
        return 0
    hta = _run(py, HTA_CHILD, str(path), str(path.parent))
    _print("HTA Trace.parse_traces", hta)
    if isinstance(adv, dict) and isinstance(hta, dict):
        print(f"ratio HTA/advisor: wall {hta['wall_s'] / adv['wall_s']:.1f}x, "
              f"CPU {hta['cpu_s'] / adv['cpu_s']:.1f}x, "
              f"peak RSS {hta['peak_mb'] / adv['peak_mb']:.1f}x")
    return 0


def _print(label: str, res: dict | str) -> None:
    if isinstance(res, str):
        print(f"{label}: failed: {res}")
        return
    extra = ", ".join(f"{k}={v}" for k, v in res.items() if k not in ("wall_s", "cpu_s", "peak_mb", "base_mb"))
    print(f"{label}: {res['wall_s']:.2f} s wall ({res['cpu_s']:.2f} s CPU), peak RSS {res['peak_mb']:.0f} MB "
          f"(imports alone {res['base_mb']:.0f} MB; {extra})")


if __name__ == "__main__":
    raise SystemExit(main())
