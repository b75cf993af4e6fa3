"""Speed and peak memory: advisor beside msprof-analyze and HolisticTraceAnalysis.

For each size (ranks), one healthy scenario is generated under /tmp in the
Ascend text layout and in the Kineto layout (``bench.scenarios``, the same
run in both), then, once the inputs are flushed to disk and read once (no tool pays for
the generator's writeback or a cold cache), each tool runs in its own
subprocess under ``/usr/bin/time`` (wall time, peak resident set of the
largest process); a tool whose run is short (``REPEAT_BELOW_S``) runs
``--repeat`` times and its median run is reported; a run longer than
``--timeout`` (900 s) is stopped, and whatever a tool leaves running is
killed when it ends:

* ``advisor report DIR`` (default jobs, and ``-j 1``) on both layouts, and
  with ``--kernel-ranks all`` on the Ascend ones (above 128 ranks the
  default reads kernel files on a sample of 128 ranks, ``kernel_sample``);
* ``msprof-analyze cluster -d DIR -m all`` and ``msprof-analyze advisor all
  -d DIR`` on the Ascend layout;
* the same three Ascend commands on the run's step-trace and kernel files
  alone (``ascend-sk``: hard links, plus the metadata files), the input of
  the speed targets' msprof-analyze reference (docs/benchmarks.md);
* and on the same run in the Ascend database layout (``ascend-db``:
  ``ascend_pytorch_profiler_{rank}.db`` and ``analysis.db`` per rank, as
  newer CANN writes with ``export_type=db``);
* ``advisor report`` and both msprof-analyze commands on a cluster of the
  same size from a second, independently written generator
  (``ascend-alt``: ``bench.ascend_cluster``, its own column sets, file
  order, sizes and step count), so that no ratio rests on one generator;
* HolisticTraceAnalysis on the Kineto layout: ``TraceAnalysis(trace_dir)``
  + ``get_temporal_breakdown`` + ``get_comm_comp_overlap`` +
  ``get_potential_stragglers`` (a step that raises is reported, the others
  still run).

Then, for each ``--traces`` size (MB), one single large Kineto trace (a
real A100 DDP trace from the corpus repeated back to back in time,
``bench.kineto_load.generate``): ``advisor report`` on the trace beside the
same HolisticTraceAnalysis calls on its folder. Without the corpus these
rows are left out, and the output says so.

Before timing, advisor's modules are compiled to bytecode, as ``pip
install`` does for the peers (an editable install under
``PYTHONDONTWRITEBYTECODE=1`` would otherwise compile them on every run,
~0.1 s).

The peers run from ``$PEER_PYTHON`` (default /tmp/venv-peers/bin/python, a
venv with ``pip install msprof-analyze holistictraceanalysis``), so their
pinned dependencies never touch the advisor's environment. A tool that
fails shows its one-line reason in the table. No assertions on time.

    python -m bench.speed                    # 8 and 128 ranks, traces of 50 and 500 MB
    python -m bench.speed --traces ""        # no single-trace rows
    python -m bench.speed --sizes 8,128,1024 --markdown > /tmp/speed.md
    python -m bench.speed --curve 8,64,512,1024,2048,4096 --markdown   # advisor alone
    python -m bench.speed --sizes 128 --traces "" --collectives 80    # communication-heavy ranks
    python -m bench.speed --sizes 1024 --traces "" --inputs ascend,ascend-alt   # the two generators
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from bench import ascend_cluster
from bench.scenarios import Spec, build, write

WORK = Path(os.environ.get("ADVISOR_BENCH_DIR", "/tmp/advisor-bench")) / "speed"
PEER_PYTHON = os.environ.get("PEER_PYTHON", "/tmp/venv-peers/bin/python")
HTA_SCRIPT = """
import sys, warnings
warnings.simplefilter("ignore")
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
errors = []
for name, call in (("temporal", lambda: a.get_temporal_breakdown(visualize=False)),
                   ("overlap", lambda: a.get_comm_comp_overlap(visualize=False)),
                   ("stragglers", lambda: a.get_potential_stragglers())):
    try:
        call()
    except Exception as exc:
        errors.append(f"{name}: {type(exc).__name__}: {exc}".splitlines()[0][:120])
if errors:
    print("HTA-PARTIAL " + "; ".join(errors), file=sys.stderr)
"""


def _peer_bin(name: str) -> str:
    return str(Path(PEER_PYTHON).parent / name)


#: A run still going after this many seconds is stopped and reported as
#: timed out (msprof-analyze `advisor all` on 1024 generated ranks in the
#: database layout grew to 24 GB over ~14 min before the OOM killer ended it).
TIMEOUT_S = 900.0


def measure(cmd: list[str], cwd: Path, timeout: float = TIMEOUT_S) -> dict:
    """Run ``cmd`` under /usr/bin/time; wall s, peak RSS MB, status, note.

    The tool runs in a session of its own, its output goes to files, and
    whatever it leaves running when it ends (or times out) is killed: a
    worker of a killed msprof-analyze kept its pipes open, and a reader of
    those pipes waited for ever."""
    with tempfile.TemporaryDirectory(prefix="advisor-bench-") as tmp:
        tpath, opath, epath = (Path(tmp) / n for n in ("time", "out", "err"))
        t = time.perf_counter()
        with open(opath, "w") as out, open(epath, "w") as err:
            proc = subprocess.Popen(["/usr/bin/time", "-f", "%e %U %S %M", "-o", str(tpath), *cmd], cwd=cwd,
                                    stdout=out, stderr=err, start_new_session=True,
                                    env={**os.environ, "PYTHONWARNINGS": "ignore"})
            try:
                code = proc.wait(timeout=timeout)
                timed_out = False
            except subprocess.TimeoutExpired:
                code, timed_out = None, True
            _kill_session(proc.pid)
            if timed_out:
                code = proc.wait()
        wall = time.perf_counter() - t
        text = tpath.read_text().split() if tpath.exists() else []
        output = opath.read_text(errors="replace") + "\n" + epath.read_text(errors="replace")
    numbers = [w for w in text if w.replace(".", "", 1).isdigit()]
    rss = float(numbers[-1]) / 1024 if numbers else float("nan")
    cpu = float(numbers[-3]) + float(numbers[-2]) if len(numbers) >= 4 else float("nan")
    note = ""
    ok = code == 0 and not timed_out
    partial = re.search(r"HTA-PARTIAL (.*)", output)
    if partial:
        note = partial.group(1)
    errors = [ln for ln in output.splitlines() if re.search(r"\[ERROR\]|Error|error:|Traceback", ln)]
    if timed_out:
        note = f"stopped after {timeout:.0f} s"
    elif not ok:
        tail = [ln for ln in output.splitlines() if ln.strip()]
        killed = "killed (signal 9: out of memory?)" if "signal 9" in " ".join(text) else None
        note = (killed or (errors[-1] if errors else (tail[-1] if tail else f"exit {code}"))).strip()[:160]
    elif errors and not note:
        note = errors[0].strip()[:160]
    return {"wall": wall, "cpu": cpu, "rss": rss, "ok": ok, "note": note}


def _kill_session(pid: int) -> None:
    """Kill every process left in the session ``pid`` leads."""
    import signal

    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


#: Tools whose first run takes less than this are run ``--repeat`` times
#: and reported by their median wall time (the machine's speed drifts);
#: longer ones (the peers at 1024 ranks, minutes each) run once.
#: msprof-analyze always runs once: it stores what it parsed in the input
#: folder and reuses it, so a second run measures its cache (`advisor all`
#: at 8 ranks: 8.4 s cold, 3.4 s again).
REPEAT_BELOW_S = 30.0


def measure_median(cmd: list[str], cwd: Path, repeat: int, timeout: float = TIMEOUT_S) -> dict:
    """``measure``, repeated up to ``repeat`` times while runs are short:
    the run with the median wall time, and how many runs there were."""
    runs = [measure(cmd, cwd, timeout)]
    while len(runs) < repeat and runs[0]["ok"] and runs[0]["wall"] < REPEAT_BELOW_S:
        runs.append(measure(cmd, cwd, timeout))
    runs.sort(key=lambda r: r["wall"])
    return {**runs[len(runs) // 2], "runs": len(runs)}


#: Files of each rank folder in the step-trace-and-kernels input.
STEP_KERNEL_FILES = ("step_trace_time.csv", "kernel_details.csv", "profiler_info_*.json", "profiler_metadata.json")


def step_kernel_copy(ascend: Path, dest: Path) -> Path:
    """Hard links of ``ascend``'s step-trace, kernel and metadata files
    under ``dest`` (same folder tree, no communication files)."""
    for pattern in STEP_KERNEL_FILES:
        for f in ascend.rglob(pattern):
            target = dest / f.relative_to(ascend)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(f, target)
    return dest


def _advisor_command() -> list[str]:
    """The ``advisor`` command on the PATH, else this interpreter's ``python -m advisor``."""
    return ["advisor"] if shutil.which("advisor") else [sys.executable, "-m", "advisor"]


def _tools(inputs: dict[str, Path], out: Path) -> list[tuple[str, str, list[str]]]:
    """(tool, input format, command) for each run, on ``inputs`` (format -> folder)."""
    adv = _advisor_command()
    msprof = _peer_bin("msprof-analyze")

    def advisor(fmt: str, tag: str, jobs: list[str] = ()) -> tuple[str, str, list[str]]:
        label = "advisor report" + (" " + " ".join(jobs) if jobs else "")
        return label, fmt, adv + ["report", str(inputs.get(fmt, "")), "-o", str(out / f"adv_{tag}"), *jobs, "--no-color"]

    def peers(fmt: str, tag: str) -> list[tuple[str, str, list[str]]]:
        return [("msprof-analyze cluster -m all", fmt,
                 [msprof, "cluster", "-d", str(inputs.get(fmt, "")), "-m", "all", "-o", str(out / f"msc_{tag}")]),
                ("msprof-analyze advisor all", fmt,
                 [msprof, "advisor", "all", "-d", str(inputs.get(fmt, "")), "-o", str(out / f"msa_{tag}"), "-l", "en"])]

    return [
        advisor("ascend", "a"), advisor("ascend", "a1", ["-j", "1"]),
        advisor("ascend", "aall", ["--kernel-ranks", "all"]), *peers("ascend", "a"),
        advisor("kineto", "k"), advisor("kineto", "k1", ["-j", "1"]),
        ("HTA load+temporal+overlap+stragglers", "kineto",
         [PEER_PYTHON, "-c", HTA_SCRIPT, str(inputs.get("kineto", ""))]),
        advisor("ascend-sk", "sk"), advisor("ascend-sk", "skall", ["--kernel-ranks", "all"]), *peers("ascend-sk", "sk"),
        advisor("ascend-db", "db"), advisor("ascend-db", "dball", ["--kernel-ranks", "all"]), *peers("ascend-db", "db"),
        advisor("ascend-alt", "alt"), *peers("ascend-alt", "alt"),
    ]


def _compile_advisor() -> None:
    """Byte-compile advisor's packages (what a regular install has)."""
    import compileall
    import importlib.util

    for name in ("advisor", "advisor.collectors", "advisor.metrics", "advisor.reports", "advisor.rules"):
        spec = importlib.util.find_spec(name)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            compileall.compile_dir(folder, maxlevels=0, quiet=1)


def _settle(folder: Path) -> None:
    """Flush the just-written inputs to disk and read them once, so that no
    tool (the first one above all) pays for the generator's writeback or a
    cold page cache."""
    os.sync()
    for f in folder.rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                while fh.read(1 << 20):
                    pass


#: The inputs each size is measured on (``--inputs`` picks some).
INPUTS = ("ascend", "kineto", "ascend-sk", "ascend-db", "ascend-alt")


def _inputs(ranks: int, steps: int, kernels: int, collectives: int, base: Path, wanted) -> dict[str, Path]:
    """The ``wanted`` inputs of one size under ``base``: format -> folder."""
    sc = build(Spec(ranks=ranks, steps=steps, fault="healthy", seed=7, kernels_per_step=kernels,
                    collectives=collectives))
    inputs: dict[str, Path] = {}
    if {"ascend", "ascend-sk"} & set(wanted):
        inputs["ascend"] = write(sc, base / "ascend", "ascend-text")
    if "kineto" in wanted:
        inputs["kineto"] = write(sc, base / "kineto", "kineto")
    if "ascend-sk" in wanted:
        inputs["ascend-sk"] = step_kernel_copy(inputs["ascend"], base / "ascend_sk")
    if "ascend-db" in wanted:
        inputs["ascend-db"] = write(sc, base / "ascend_db", "ascend-db")
    if "ascend-alt" in wanted:
        inputs["ascend-alt"] = ascend_cluster.write(base / "ascend_alt", ascend_cluster.Layout(ranks=ranks))
    return inputs


def run_size(ranks: int, steps: int, kernels: int, repeat: int = 1, collectives: int = 1,
             timeout: float = TIMEOUT_S, wanted=INPUTS) -> list[dict]:
    base = WORK / f"{ranks}r"
    shutil.rmtree(base, ignore_errors=True)
    t = time.perf_counter()
    inputs = _inputs(ranks, steps, kernels, collectives, base, wanted)
    gen = time.perf_counter() - t
    sizes = {name: sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 1e6 for name, p in inputs.items()}
    _settle(base)
    out = base / "out"
    out.mkdir()
    rows = []
    for label, fmt, cmd in _tools(inputs, out):
        if fmt not in wanted:
            continue
        m = measure_median(cmd, base, 1 if label.startswith("msprof-analyze") else repeat, timeout)
        rows.append({"ranks": ranks, "tool": label, "format": fmt, "input_mb": sizes[fmt], "gen_s": gen, **m})
        print(f"  {ranks:>5} {fmt:<7} {label:<38} {m['wall']:8.1f}s {m['rss']:8.0f}MB "
              f"{'ok' if m['ok'] else 'FAIL'} {m['note']}", file=sys.stderr)
    shutil.rmtree(base, ignore_errors=True)
    return rows


def run_trace(size_mb: int, repeat: int = 1, timeout: float = TIMEOUT_S) -> list[dict]:
    """``advisor report`` and HTA on one generated Kineto trace of ~``size_mb`` MB."""
    from bench.kineto_load import SOURCE, generate

    if not SOURCE.exists():
        print(f"  trace {size_mb} MB: skipped, corpus trace not found ({SOURCE})", file=sys.stderr)
        return []
    trace = generate(size_mb, gz=False)
    _settle(trace.parent)
    out = Path(tempfile.mkdtemp(prefix="speed_trace_", dir=WORK.parent if WORK.parent.exists() else None))
    adv = _advisor_command()
    rows = []
    for label, cmd in (("advisor report", adv + ["report", str(trace), "-o", str(out / "adv"), "--no-color"]),
                       ("HTA load+temporal+overlap+stragglers", [PEER_PYTHON, "-c", HTA_SCRIPT, str(trace.parent)])):
        m = measure_median(cmd, out, repeat, timeout)
        rows.append({"ranks": 1, "tool": label, "format": "kineto trace", "input_mb": trace.stat().st_size / 1e6,
                     "gen_s": 0.0, **m})
        print(f"  trace {size_mb:>4} MB {label:<38} {m['wall']:8.1f}s {m['rss']:8.0f}MB "
              f"{'ok' if m['ok'] else 'FAIL'} {m['note']}", file=sys.stderr)
    shutil.rmtree(out, ignore_errors=True)
    return rows


def cost_point(ranks: int, steps: int, kernels: int, collectives: int = 1) -> dict:
    """``advisor report`` alone on one healthy Ascend-text run of ``ranks``."""
    base = WORK / f"curve_{ranks}r"
    shutil.rmtree(base, ignore_errors=True)
    ascend = write(build(Spec(ranks=ranks, steps=steps, fault="healthy", seed=7, kernels_per_step=kernels,
                              collectives=collectives)), base / "ascend", "ascend-text")
    size = sum(f.stat().st_size for f in ascend.rglob("*") if f.is_file()) / 1e6
    _settle(base)
    adv = _advisor_command()
    m = measure(adv + ["report", str(ascend), "-o", str(base / "out"), "--no-color"], base)
    shutil.rmtree(base, ignore_errors=True)
    row = {"ranks": ranks, "steps": steps, "input_mb": size, **m}
    print(f"  {ranks:>5} ranks {size:8.0f} MB {m['wall']:7.1f}s wall {m['cpu']:7.1f}s cpu "
          f"{m['rss']:6.0f}MB {'ok' if m['ok'] else 'FAIL ' + m['note']}", file=sys.stderr)
    return row


def render_curve(rows: list[dict], md: bool) -> str:
    """The cost curve: time and memory per rank-step should stay flat."""
    head = ["ranks", "steps", "input MB", "wall s", "CPU s", "peak MB", "wall ms / rank-step",
            "CPU ms / rank-step", "status"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"] if md else \
        ["  ".join(f"{h:<10}" for h in head)]
    for r in rows:
        n = r["ranks"] * r["steps"]
        cells = [str(r["ranks"]), str(r["steps"]), f"{r['input_mb']:.0f}", f"{r['wall']:.1f}",
                 f"{r['cpu']:.1f}", f"{r['rss']:.0f}", f"{1000 * r['wall'] / n:.2f}",
                 f"{1000 * r['cpu'] / n:.2f}", "ok" if r["ok"] else f"failed: {r['note']}"]
        lines.append("| " + " | ".join(cells) + " |" if md else "  ".join(f"{c:<10}" for c in cells))
    return "\n".join(lines + [""])


#: How the table names each input format.
INPUT_LABELS = {"ascend-sk": "ascend step+kernel files", "ascend-db": "ascend database layout",
                "ascend-alt": "ascend, second generator"}


def render(rows: list[dict], md: bool, steps: int, kernels: int, collectives: int = 1) -> str:
    lines = []
    if md:
        lines += ["# Benchmarks: advisor beside msprof-analyze and HolisticTraceAnalysis", "",
                  f"Measured {date.today().isoformat()} with `python -m bench.speed --markdown` on a "
                  f"**shared, loaded machine** (2 cores, shared with several other jobs while this ran; "
                  f"{platform.platform()}, Python {platform.python_version()}): absolute times are "
                  "pessimistic and noisy; the ratios are the point.", "",
                  f"Input: one healthy generated run per size (`bench.scenarios`, {steps} steps, "
                  f"{kernels} compute kernels per step and rank"
                  + (f", the large all-reduce of each step as {collectives} gradient buckets" if collectives > 1 else "")
                  + "), the same run in the Ascend text layout "
                  "(per-rank `*_ascend_pt` folders) and as Kineto traces (one per rank); and a cluster of the "
                  "same size from a second, independently written generator (`bench.ascend_cluster`: "
                  f"{ascend_cluster.Layout.steps} steps, {ascend_cluster.Layout.kernels} kernels and "
                  f"{ascend_cluster.Layout.buckets} all-reduce buckets per step, the full documented column sets, "
                  "hosts of 8 devices written in shuffled order). Each tool runs "
                  "in its own subprocess under `/usr/bin/time`: wall time and the peak resident memory "
                  f"of its largest process; a tool whose run takes under {REPEAT_BELOW_S:.0f} s runs again "
                  "(`runs`) and its median run is shown. Ratio = tool / `advisor report` (default jobs) on the same "
                  "layout. msprof-analyze 26.2.0 and holistictraceanalysis 0.5.0 from PyPI, in their own venv.",
                  ""]
    head = ["ranks", "input", "tool", "runs", "wall s", "CPU s", "peak MB", "time ratio", "memory ratio", "status"]
    lines.append("| " + " | ".join(head) + " |" if md else "  ".join(f"{h:<12}" for h in head))
    if md:
        lines.append("|" + "|".join("---" for _ in head) + "|")
    for r in rows:
        ref = next((x for x in rows if x["ranks"] == r["ranks"] and x["format"] == r["format"]
                    and x["input_mb"] == r["input_mb"] and x["tool"] == "advisor report"), None)
        tr = f"{r['wall'] / ref['wall']:.2f}x" if ref and ref["ok"] else "-"
        mr = f"{r['rss'] / ref['rss']:.2f}x" if ref and ref["ok"] else "-"
        status = ("ok" if r["ok"] else "failed") + (f": {r['note']}" if r["note"] else "")
        source = INPUT_LABELS.get(r["format"], r["format"])
        cells = [str(r["ranks"]), f"{source} {r['input_mb']:.0f} MB", r["tool"], str(r.get("runs", 1)),
                 f"{r['wall']:.1f}",
                 f"{r['cpu']:.1f}", f"{r['rss']:.0f}", tr, mr, status.replace("|", "/")]
        lines.append("| " + " | ".join(cells) + " |" if md else "  ".join(f"{c:<12}" for c in cells))
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.speed", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="8,128", help="rank counts, e.g. 8,128,1024")
    ap.add_argument("--traces", default="50,500", help="sizes (MB) of single Kineto traces, e.g. 50,500; "
                    "empty for none")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each tool whose first run is shorter "
                    f"than {REPEAT_BELOW_S:.0f} s; the median is reported")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--kernels", type=int, default=100, help="compute kernels per step and rank")
    ap.add_argument("--collectives", type=int, default=1, help="all-reduce operators per step (gradient "
                    "buckets; real LLM jobs write hundreds)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds after which a run is stopped "
                    "and reported as such (its processes killed)")
    ap.add_argument("--inputs", default=",".join(INPUTS), help=f"inputs to measure, of {','.join(INPUTS)}")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--curve", default="", help="rank counts for advisor's cost curve alone "
                    "(Ascend text layout), e.g. 8,64,512,1024,2048,4096; skips the peers")
    args = ap.parse_args(argv)
    _compile_advisor()
    if args.curve:
        rows = [cost_point(int(x), args.steps, args.kernels, args.collectives) for x in args.curve.split(",") if x]
        print(render_curve(rows, args.markdown))
        return 0
    rows = []
    for size in (int(x) for x in args.sizes.split(",") if x):
        rows += run_size(size, args.steps, args.kernels, args.repeat, args.collectives, args.timeout,
                         [x for x in args.inputs.split(",") if x])
    for size in (int(x) for x in args.traces.split(",") if x):
        rows += run_trace(size, args.repeat, args.timeout)
    print(render(rows, args.markdown, args.steps, args.kernels, args.collectives))
    return 0


if __name__ == "__main__":
    sys.exit(main())
