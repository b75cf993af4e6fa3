"""``advisor run``: run an unmodified training script under the right profiler.

Public entry: :func:`run_profiled` -> :class:`RunResult`.

The script is not edited. The child process gets the bootstrap folder
(``live_bootstrap/``) first on ``PYTHONPATH``; its ``sitecustomize.py`` hooks
the import of torch (or mindspore) and profiles a window of optimizer steps
(see ``live_bootstrap/_advisor_live.py`` for how steps are delimited).
Configuration travels in environment variables:

=========================  ==================================================
``ADVISOR_TRACE_DIR``      where traces go (``<out_dir>/trace``)
``ADVISOR_STEPS``          active (recorded) steps
``ADVISOR_WARMUP``         warm-up steps before recording
``ADVISOR_STATUS_DIR``     where each profiling process writes a status JSON
``ADVISOR_FRAMEWORK``      optional: force pytorch / torch_npu / mindspore
``ADVISOR_PROFILE_MEMORY`` optional: "1" records torch memory events (off by default: overhead and noise)
``ADVISOR_WITH_STACK``     optional: "1" records Python stacks (call sites) and, where torch has it, Python GC
=========================  ==================================================

The job runs in its own session (process group) so a timeout or Ctrl-C can
stop all of it; processes that left the group (torchrun puts each worker in
a session of its own) or whose parent exited (a daemon) are found in the
process tree and stopped too (:mod:`advisor.collectors.live.tree`), also
when the command itself ends normally.

Output layout under ``out_dir`` (what may be there before a run, and what
a new run removes: :mod:`advisor.collectors.live.output`)::

    trace/                  rank<N>.<ns>.pt.trace.json    (PyTorch, one per rank)
                            <worker>_<ts>_ascend_pt/      (torch_npu)
                            *_ascend_ms/                  (MindSpore)
    .advisor-run/           status-<pid>.json             (what each process did)
    .advisor-output.json    what advisor wrote here (``advisor.runtime.files.MARKER``)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from advisor.collectors.io import limits
from advisor.collectors.io.files import open_regular, read_bytes
from advisor.collectors.live import output, tree
from advisor.collectors.live.backend import guess_framework, mindspore_options, select_backend
from advisor.collectors.live.output import STATUS_SUBDIR, TRACE_SUBDIR
from advisor.errors import ConfigError, InputError
from advisor.runtime import lifeline

BOOTSTRAP_DIR = Path(__file__).resolve().parent / "bootstrap"
KILL_GRACE = 10.0          # seconds between SIGTERM and SIGKILL
TIMEOUT_EXIT_CODE = 124    # as coreutils timeout(1)


@dataclass
class RunResult:
    """What ``advisor run`` produced.

    ``exit_code`` is the script's (launcher's) exit status; a death by
    signal N is ``128 + N`` and a timeout is 124. ``steps_captured`` is the
    number of *complete* recorded steps, the minimum over the ranks that
    wrote a trace (0 when none did). ``notes`` are one-line, user-facing
    remarks: partial windows, missing ranks, timeouts, crashes.
    """

    trace_dir: Path
    framework: str
    exit_code: int
    steps_captured: int
    notes: list[str] = field(default_factory=list)
    timed_out: bool = False
    trace_files: list[Path] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    #: worker -> its step times (ms) after the window, timed without the
    #: profiler (the bootstrap's ``unprofiled_step_ms``; see ``profiler_cost_note``)
    unprofiled_step_ms: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class Launch:
    """The resolved child command line."""

    argv: list[str]
    script: Path | None
    label: str


def resolve_command(command: list[str], python: str = sys.executable) -> Launch:
    """Turn ``advisor run``'s positional command into an argv.

    ``["train.py", ...]`` runs the script with ``python``; ``["-m", "pkg"]``
    runs a module; anything else is a launcher command (``torchrun ...``,
    ``python train.py``, ``bash run.sh``) run as given, with ``torchrun``
    falling back to ``python -m torch.distributed.run`` when it is not on
    PATH. Arguments are passed through untouched.
    """
    command = [str(c) for c in command]
    if not command:
        raise InputError("<command>", "no training script or command given")
    first = command[0]
    if first == "-m":
        if len(command) < 2:
            raise InputError("-m", "no module name given")
        return Launch([python, *command], None, f"-m {command[1]}")
    if first.endswith(".py") or (Path(first).is_file() and not os.access(first, os.X_OK)):
        script = Path(first)
        if not script.is_file():
            raise InputError(first, "no such training script")
        return Launch([python, *command], script, script.name)
    argv = list(command)
    if shutil.which(first) is None and not Path(first).is_file():
        if Path(first).name == "torchrun":
            argv = [python, "-m", "torch.distributed.run", *command[1:]]
        else:
            raise InputError(first, "command not found")
    script = next((Path(a) for a in command[1:] if a.endswith(".py") and Path(a).is_file()), None)
    label = script.name if script is not None else " ".join(command[:3])
    return Launch(argv, script, label)


def run_profiled(
    command: list[str],
    out_dir: Path,
    *,
    steps: int = 5,
    warmup: int = 3,
    timeout: float | None = None,
    python: str = sys.executable,
    framework: str | None = None,
    kill_grace: float = KILL_GRACE,
    stacks: bool = False,
    memory: bool = False,
) -> RunResult:
    """Run ``command`` with the profiler injected; return where the trace is.

    ``steps`` optimizer steps are recorded after ``warmup`` warm-up steps
    (the very first step of the run is never profiled). ``framework``
    forces the backend (default: decided from what the script imports).
    ``timeout`` (seconds) stops the whole job -- SIGTERM, then SIGKILL after
    ``kill_grace`` -- and still returns what was captured. ``stacks`` /
    ``memory`` record Python stacks and garbage collections / memory
    events (``ADVISOR_WITH_STACK`` / ``ADVISOR_PROFILE_MEMORY``; either
    set to "1" in the environment does the same). Raises
    ``InputError`` / ``ConfigError`` for an unusable command or option;
    a failing script is not an error: its exit code is in the result.
    """
    if steps < 1:
        raise ConfigError("--steps must be at least 1")
    if warmup < 0:
        raise ConfigError("--warmup must not be negative")
    if timeout is not None and timeout <= 0:
        raise ConfigError("--timeout must be positive")
    launch = resolve_command(command, python)
    try:
        guess = guess_framework(launch.script, framework)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None

    out_dir = Path(out_dir)
    trace_dir = (out_dir / TRACE_SUBDIR).resolve()
    status_dir = (out_dir / STATUS_SUBDIR).resolve()
    notes: list[str] = []
    removed = output.prepare(out_dir)
    if removed:
        notes.append(f"removed {removed} trace(s) of a previous run from {trace_dir}")

    env = _child_env(trace_dir, status_dir, steps, warmup, framework, guess, stacks=stacks, memory=memory)
    first, last = warmup + 1, warmup + steps
    _say(f"profiling {launch.label} ({guess}): warm-up {warmup} step(s), then steps "
         f"{first}-{last} -> {trace_dir}")

    started = time.monotonic()
    with lifeline.subreaper() as adopting:
        before = tree.Job.own_children() if adopting else set()
        try:
            proc = subprocess.Popen(launch.argv, env=env, start_new_session=True)
        except OSError as exc:
            raise InputError(launch.argv[0], f"cannot start ({exc.strerror})") from None
        job = tree.Job(proc, adopting, before)
        timed_out = False
        try:
            job.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _say(f"timeout after {timeout:g}s: stopping the job")
            how = job.stop(kill_grace, signal.SIGTERM)
            notes.append(f"timed out after {timeout:g}s; {how}")
        except KeyboardInterrupt:
            how = job.stop(kill_grace, signal.SIGINT)
            notes.append(f"interrupted; {how}")
        else:
            stray = job.living()
            if stray:
                how = job.stop(min(kill_grace, 2.0), signal.SIGTERM)
                notes.append(f"{len(stray)} process(es) of the job outlived it; {how}")
        job.reap()
    elapsed = time.monotonic() - started

    rc = proc.returncode if proc.returncode is not None else proc.wait()
    if timed_out:
        exit_code = TIMEOUT_EXIT_CODE
    elif rc < 0:
        exit_code = 128 - rc
        notes.append(f"{launch.label} was killed by {tree.signame(-rc)}")
    else:
        exit_code = rc
        if rc:
            notes.append(f"{launch.label} exited with code {rc}")

    result = _collect(trace_dir, status_dir, guess, steps, warmup, notes)
    output.record(out_dir)
    result.exit_code = exit_code
    result.timed_out = timed_out
    ranks = f" from {len(result.trace_files)} rank(s)" if len(result.trace_files) > 1 else ""
    _say(f"done in {elapsed:.1f}s: {result.steps_captured} step(s) captured{ranks} "
         f"({result.framework}) in {trace_dir}")
    return result


# --------------------------------------------------------------------------
# Environment and output folder


def _child_env(trace_dir: Path, status_dir: Path, steps: int, warmup: int,
               framework: str | None, guess: str, *, stacks: bool = False, memory: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(BOOTSTRAP_DIR) + (os.pathsep + old if old else "")
    env["ADVISOR_TRACE_DIR"] = str(trace_dir)
    env["ADVISOR_STATUS_DIR"] = str(status_dir)
    env["ADVISOR_STEPS"] = str(steps)
    env["ADVISOR_WARMUP"] = str(warmup)
    if stacks:
        env["ADVISOR_WITH_STACK"] = "1"
    if memory:
        env["ADVISOR_PROFILE_MEMORY"] = "1"
    if framework:
        env["ADVISOR_FRAMEWORK"] = select_backend((), lambda _: False, framework)
    else:
        env.pop("ADVISOR_FRAMEWORK", None)
    if guess == "mindspore":
        # Read by MindSpore at start-up; the bootstrap also sets it when the
        # import is only seen at run time.
        env["MS_PROFILER_OPTIONS"] = mindspore_options(trace_dir, env.get("MS_PROFILER_OPTIONS"))
    return env


_TRACE_FILE = re.compile(r"\.pt\.trace\.json(\.gz)?$")
_ASCEND_DIR = re.compile(r"_ascend_(pt|ms)$")


def _trace_units(trace_dir: Path) -> list[Path]:
    try:
        entries = sorted(trace_dir.iterdir())
    except OSError:
        return []
    return [p for p in entries
            if (p.is_file() and _TRACE_FILE.search(p.name))
            or (p.is_dir() and _ASCEND_DIR.search(p.name))]


# --------------------------------------------------------------------------
# Results


def _read_statuses(status_dir: Path) -> list[dict]:
    out = []
    for path in sorted(status_dir.glob("status-*.json")):
        try:
            data = json.loads(read_bytes(path))
        except (InputError, ValueError):
            continue
        if isinstance(data, dict):
            out.append(data)
    return out


_STEP_RE = re.compile(rb'"name"\s*:\s*"ProfilerStep#(\d+)"')


def profiler_step_ids(trace: Path) -> list[int]:
    """The ``ProfilerStep#N`` ids in a Kineto trace (streamed, any size)."""
    ids: set[int] = set()
    tail = b""
    with limits.open_gzip(trace) if trace.name.endswith(".gz") else open_regular(trace) as fh:
        while True:
            chunk = fh.read(1 << 22)
            if not chunk:
                break
            buf = tail + chunk
            ids.update(int(m.group(1)) for m in _STEP_RE.finditer(buf))
            tail = buf[-64:]
    return sorted(ids)


def _collect(trace_dir: Path, status_dir: Path, guess: str, steps: int, warmup: int,
             notes: list[str]) -> RunResult:
    statuses = _read_statuses(status_dir)
    units = _trace_units(trace_dir)
    frameworks = [s["framework"] for s in statuses if s.get("framework")]
    framework = max(set(frameworks), key=frameworks.count) if frameworks else guess
    if len(set(frameworks)) > 1:
        notes.append(f"processes used different profilers: {', '.join(sorted(set(frameworks)))}")
    ranks = sorted({s["rank"] for s in statuses if isinstance(s.get("rank"), int)})
    result = RunResult(trace_dir=trace_dir, framework=framework, exit_code=0,
                       steps_captured=0, notes=notes, trace_files=units, ranks=ranks)

    if framework == "mindspore":
        result.steps_captured = _mindspore_steps(units)
        notes.append("MindSpore is profiled through MS_PROFILER_OPTIONS for the whole run "
                     "(--steps/--warmup do not apply)")
        if not units:
            notes.append("MindSpore wrote no *_ascend_ms output")
        return result

    profiled = [s for s in statuses if s.get("phase") != "idle" and s.get("framework") != "mindspore"]
    for s in profiled:
        times = s.get("unprofiled_step_ms")
        if isinstance(times, list) and times and all(isinstance(t, (int, float)) and t > 0 for t in times):
            result.unprofiled_step_ms[str(s.get("worker") or s.get("pid"))] = [float(t) for t in times]
    for s in profiled:
        who = s.get("worker") or f"pid {s.get('pid')}"
        phase = s.get("phase")
        if phase == "failed":
            notes.append(f"{who}: profiler failed ({s.get('error')})")
        elif phase == "skipped":
            notes.append(f"{who}: not profiled ({s.get('error') or 'skipped'})")
        elif phase == "ended_in_warmup":
            notes.append(f"{who}: the process ended during warm-up after "
                         f"{s.get('steps_done', 0)} step(s), so no trace was written; "
                         "run more steps or lower --warmup")
        elif phase in ("warmup", "recording"):
            notes.append(f"{who}: the process died before its trace could be written "
                         "(killed, or os._exit)")
        elif phase == "flushed":
            notes.append(f"{who}: window cut short ({s.get('exit_reason')}): "
                         f"{s.get('active_completed', 0)} of {steps} step(s) complete; "
                         f"ProfilerStep#{s.get('partial_step')} is incomplete")
    captured = [int(s.get("active_completed") or 0) for s in profiled
                if s.get("phase") in ("complete", "flushed") and s.get("trace_files")]
    if captured:
        result.steps_captured = min(captured)
        if len(set(captured)) > 1:
            notes.append(f"ranks captured different step counts ({sorted(captured)}); "
                         f"using the smallest")
    elif units:
        # No status (e.g. the child could not write it): read the markers.
        counts = []
        for unit in units:
            if unit.is_file():
                ids = profiler_step_ids(unit)
                counts.append(max(0, len(ids)))
        result.steps_captured = min(counts) if counts else 0
    if not profiled and not units:
        notes.append("no optimizer step was seen, so nothing was profiled: advisor run "
                     "profiles training loops that call torch.optim.Optimizer.step() "
                     "(did the script fail early, or run under python -S / -I?)")
    elif result.steps_captured < steps and captured:
        notes.append(f"captured {result.steps_captured} of {steps} requested step(s)")
    return result


#: Profiled over unprofiled step time from which the note calls the
#: profiler's cost out: below it, step-to-step variation (a few percent
#: on a quiet host) is as large.
PROFILER_COST_RATIO = 1.1


def profiler_cost_note(result: RunResult, profiled_ms: float | None) -> str | None:
    """The run note comparing the steps after the window, timed without the
    profiler, with the recorded steps' mean (``profiled_ms``, the report's
    ``step.time_ms``): both are means over steps, then over ranks. None
    when either is missing. On an op-heavy loop the profiler's cost per
    operator (recording each event) adds to every recorded time."""
    if not result.unprofiled_step_ms or not profiled_ms or profiled_ms <= 0:
        return None
    per_rank = [sum(t) / len(t) for t in result.unprofiled_step_ms.values()]
    plain = sum(per_rank) / len(per_rank)
    steps = min(len(t) for t in result.unprofiled_step_ms.values())
    said = (f"the {steps} step(s) after the recorded window, timed without the profiler, took {plain:.2f} ms on "
            f"average against {profiled_ms:.2f} ms in the window")
    if profiled_ms >= PROFILER_COST_RATIO * plain:
        return (f"{said}: the profiler's own cost adds about {100 * (profiled_ms / plain - 1):.0f}% to the recorded "
                "steps, and every time in this report includes it")
    return f"{said}: the profiler adds little to these steps"


def _mindspore_steps(units: list[Path]) -> int:
    best = 0
    for unit in units:
        for csv in unit.glob("**/step_trace_time.csv"):
            try:
                rows = len(csv.read_text(encoding="utf-8", errors="replace").splitlines()) - 1
            except OSError:
                continue
            best = max(best, rows)
    return best


def _say(msg: str) -> None:
    print(f"advisor: {msg}", file=sys.stderr, flush=True)
