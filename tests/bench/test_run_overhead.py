"""bench.run_overhead measures the steps it says it measures: the window
slices it compares are the ProfilerStep ids a real ``advisor run`` records.
No timing asserts (the benchmark prints ratios; it asserts nothing)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import orjson
import pytest

from bench.run_overhead import SCRIPT, _window_slices


def test_window_slices_match_the_recorded_profiler_steps(tmp_path):
    pytest.importorskip("torch")
    steps, warmup, window = 12, 2, 3
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    times = tmp_path / "times.json"
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "advisor", "run", "--warmup", str(warmup), "--steps", str(window),
         "-o", str(out), "--no-color", str(script), str(steps), "32"],
        cwd=tmp_path, env={**os.environ, "BENCH_STEP_TIMES": str(times)},
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(orjson.loads(times.read_bytes())) == steps

    traces = list((out / "trace").rglob("*.pt.trace.json*"))
    assert len(traces) == 1
    names = {e.get("name", "") for e in orjson.loads(traces[0].read_bytes())["traceEvents"]}
    recorded = sorted(int(m.group(1)) for n in names if (m := re.fullmatch(r"ProfilerStep#(\d+)", n)))

    kinds = _window_slices(steps, warmup, window)
    # profiled steps = the "inside" steps plus the one that exports the trace
    assert recorded == list(range(kinds["inside"].start, kinds["export"].stop))
    assert kinds["after"].start == kinds["export"].stop and kinds["after"].stop == steps
