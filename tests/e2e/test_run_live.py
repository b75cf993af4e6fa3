"""End-to-end tests of ``advisor run``'s engine (run_profiled): real child
processes, real torch profiler, no mocks.

Torch runs are skipped (with the reason) when torch is not importable;
MindSpore runs when mindspore is not importable. Wall time is kept low by
recording few, tiny steps and by sharing one run between the checks that
only read its output.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
import time
from pathlib import Path

import pytest
from _teardown import run_twice_on_teardown_abort

from advisor.collectors.live.backend import (
    guess_framework,
    importable,
    mindspore_options,
    script_imports,
    select_backend,
)
from advisor.collectors.live.runner import profiler_step_ids, resolve_command, run_profiled
from advisor.errors import ConfigError, InputError

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

HAS_TORCH = importable("torch")
needs_torch = pytest.mark.skipif(
    not HAS_TORCH, reason="torch is not importable here (pip install torch==2.13.0)")

# A tiny loop without a DataLoader: fast, and able to crash or hang on cue.
# Two optimizers step in each iteration (as in a GAN): the step boundary
# must fall after the second one.
LOOP = textwrap.dedent("""
    import os, subprocess, sys, time
    import torch
    from torch import nn

    steps = int(os.environ.get("T_STEPS", "12"))
    crash_at = int(os.environ.get("T_CRASH_AT", "-1"))
    hang_at = int(os.environ.get("T_HANG_AT", "-1"))
    torch.manual_seed(0)
    model, head = nn.Linear(8, 4), nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_head = torch.optim.Adam(head.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt_head, 3)
    for step in range(steps):
        x = torch.randn(16, 8)
        loss = head(model(x)).pow(2).mean()
        opt.zero_grad()
        opt_head.zero_grad()
        loss.backward()
        if step == crash_at:
            raise RuntimeError(f"boom at step {step}")
        if step == hang_at:
            same_group = subprocess.Popen(["sleep", "120"])
            own_session = subprocess.Popen(["sleep", "121"], start_new_session=True)
            with open(os.environ["T_PIDS"], "w") as fh:
                fh.write(f"{os.getpid()} {same_group.pid} {own_session.pid}")
            time.sleep(120)
        opt.step()
        opt_head.step()
        sched.step()
""")


def _multi_process_run(capfd, run):
    """``run()`` of a gloo job (see ``_teardown``); the job's stderr reaches
    this process's file descriptor 2, read through ``capfd``."""
    return run_twice_on_teardown_abort(run, lambda r: r.exit_code, lambda r: capfd.readouterr().err)


def _trace_files(trace_dir: Path) -> list[Path]:
    return sorted(trace_dir.glob("*.pt.trace.json"))


def _events(trace: Path) -> list[dict]:
    return [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"]


def _pid_running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def _processes_with_env(key: str, value: str) -> list[int]:
    """Live processes whose environment has key=value (our job's markers)."""
    needle = f"{key}={value}".encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/environ", "rb") as fh:
                    env = fh.read().split(b"\0")
            except OSError:
                continue
            if needle in env and _pid_running(int(name)):
                found.append(int(name))
    return found


# --------------------------------------------------------------------------
# One real single-process run, shared by the checks that read its output.
# A user's own sitecustomize (which imports torch) sits on PYTHONPATH.


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory):
    if not HAS_TORCH:
        pytest.skip("torch is not importable here (pip install torch==2.13.0)")
    base = tmp_path_factory.mktemp("mlp")
    usersite = base / "usersite"
    usersite.mkdir()
    marker = base / "user-sitecustomize-ran.txt"
    (usersite / "sitecustomize.py").write_text(textwrap.dedent(f"""
        import sys
        import torch   # torch imported before the script: hooks must still catch it
        with open({str(marker)!r}, "a") as fh:
            fh.write(__name__ + " " + str(sys.modules.get("sitecustomize") is not None) + "\\n")
    """))
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(usersite) + (os.pathsep + old if old else "")
    try:
        t0 = time.monotonic()
        result = run_profiled([str(EXAMPLES / "train_mlp.py"), "--steps", "10"],
                              base / "out", steps=4, warmup=2)
        elapsed = time.monotonic() - t0
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    return result, marker, elapsed


def test_single_process_run_records_requested_steps(mlp_run):
    result, _, _ = mlp_run
    assert result.exit_code == 0, result.notes
    assert result.framework == "pytorch"
    assert result.steps_captured == 4
    assert result.ranks == [0]
    traces = _trace_files(result.trace_dir)
    assert len(traces) == 1 and traces[0].name.startswith("rank0.")
    assert result.trace_files == traces
    # First step is never profiled, then 2 warm-up steps: recorded ids 3..6,
    # i.e. ProfilerStep#N is the 0-based training iteration.
    assert profiler_step_ids(traces[0]) == [3, 4, 5, 6]


def test_steps_contain_data_loading_and_optimizer(mlp_run):
    result, _, _ = mlp_run
    events = _events(_trace_files(result.trace_dir)[0])
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]

    def inside(e):
        return [s["name"] for s in steps
                if s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"] + 1]

    fetches = [e for e in events if e["name"].startswith("enumerate(DataLoader)")]
    updates = [e for e in events if e["name"].startswith("Optimizer.step#")]
    assert len(fetches) == 4 and len(updates) == 4
    # Each step holds its own batch fetch (at its start) and its own update
    # (properly nested: the step closes after Optimizer.step).
    for e in fetches + updates:
        assert len(inside(e)) == 1, e["name"]
    # ... and the fetch comes first: before every forward op and the update of
    # its step (ordering, not timing: a loaded machine stretches the gaps).
    forward = [e for e in events if e["name"] in ("aten::linear", "aten::addmm", "aten::mm")]
    for s in steps:
        mine = [f for f in fetches if inside(f) == [s["name"]]]
        assert len(mine) == 1
        later = [e for e in forward + updates if inside(e) == [s["name"]]]
        assert later and all(mine[0]["ts"] < e["ts"] for e in later)


def test_users_sitecustomize_still_runs(mlp_run):
    result, marker, _ = mlp_run
    assert marker.is_file(), "the shadowed sitecustomize did not run"
    # It ran once (no DataLoader workers here) as the module 'sitecustomize'.
    assert marker.read_text().split() == ["sitecustomize", "True"]
    assert result.steps_captured == 4      # and torch, imported by it, was still hooked


# --------------------------------------------------------------------------


@needs_torch
@pytest.mark.skipif(sys.platform != "linux", reason="gloo multi-process test runs on Linux")
def test_torchrun_two_ranks_write_two_traces(tmp_path, capfd):
    result = _multi_process_run(capfd, lambda: run_profiled(
        ["torchrun", "--standalone", "--nproc_per_node", "2",
         str(EXAMPLES / "train_ddp.py"), "--steps", "8"],
        tmp_path / "out", steps=2, warmup=1, timeout=240))
    assert result.exit_code == 0, result.notes
    traces = _trace_files(result.trace_dir)
    assert sorted(t.name.split(".")[0] for t in traces) == ["rank0", "rank1"]
    infos = [json.loads(t.read_text()).get("distributedInfo") for t in traces]
    assert sorted(i["rank"] for i in infos) == [0, 1]
    assert {i["world_size"] for i in infos} == {2} and {i["backend"] for i in infos} == {"gloo"}
    for t in traces:
        assert profiler_step_ids(t) == [2, 3]
    assert result.ranks == [0, 1]
    assert result.steps_captured == 2


@needs_torch
@pytest.mark.skipif(sys.platform != "linux", reason="gloo multi-process test runs on Linux")
def test_mp_spawn_children_write_one_trace_per_rank(tmp_path, capfd):
    """Without torchrun, train_ddp.py starts its ranks with mp.spawn: the
    children inherit PYTHONPATH and are profiled, each under its own rank."""
    result = _multi_process_run(capfd, lambda: run_profiled(
        ["python", str(EXAMPLES / "train_ddp.py"), "--steps", "6"],
        tmp_path / "out", steps=1, warmup=1, timeout=240))
    assert result.exit_code == 0, result.notes
    traces = _trace_files(result.trace_dir)
    assert sorted(t.name.split(".")[0] for t in traces) == ["rank0", "rank1"]
    assert result.ranks == [0, 1] and result.steps_captured == 1


@needs_torch
def test_crash_keeps_exit_code_and_partial_trace(tmp_path, monkeypatch):
    script = tmp_path / "crash.py"
    script.write_text(LOOP)
    monkeypatch.setenv("T_CRASH_AT", "5")
    result = run_profiled([str(script)], tmp_path / "out", steps=4, warmup=1)
    assert result.exit_code == 1
    assert any("exited with code 1" in n for n in result.notes)
    traces = _trace_files(result.trace_dir)
    assert len(traces) == 1
    # Step 1 warms up, 2..5 are recorded; iteration 5 crashes: 2-4 complete, 5 cut.
    assert profiler_step_ids(traces[0]) == [2, 3, 4, 5]
    assert result.steps_captured == 3
    # The flushed trace is valid JSON, and each complete step holds both
    # optimizers' updates (the boundary follows the last optimizer).
    events = _events(traces[0])
    steps = {e["name"]: e for e in events if e["name"].startswith("ProfilerStep#")}
    for n in (2, 3, 4):
        s = steps[f"ProfilerStep#{n}"]
        inner = {e["name"] for e in events if e["name"].startswith("Optimizer.step#")
                 and s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"]}
        assert inner == {"Optimizer.step#SGD.step", "Optimizer.step#Adam.step"}
    assert any("ProfilerStep#5 is incomplete" in n for n in result.notes)


@needs_torch
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_timeout_kills_whole_job_and_keeps_partial_trace(tmp_path, mlp_run, monkeypatch):
    _, _, reference = mlp_run            # how long a short run takes on this machine
    timeout = max(10.0, 1.5 * reference + 4)
    script = tmp_path / "hang.py"
    script.write_text(LOOP)
    pids_file = tmp_path / "pids"
    monkeypatch.setenv("T_HANG_AT", "4")
    monkeypatch.setenv("T_PIDS", str(pids_file))
    t0 = time.monotonic()
    result = run_profiled([str(script)], tmp_path / "out", steps=4, warmup=1,
                          timeout=timeout, kill_grace=5)
    elapsed = time.monotonic() - t0
    assert pids_file.is_file(), f"the script never reached its hang ({result.notes})"
    assert result.timed_out and result.exit_code == 124
    assert elapsed < timeout + 10
    assert any(n.startswith("timed out") for n in result.notes)
    # Nothing left: the script, its child in the same group, and the child
    # that made a session of its own.
    for pid in map(int, pids_file.read_text().split()):
        assert not _pid_running(pid), f"pid {pid} survived"
    assert _processes_with_env("ADVISOR_TRACE_DIR", str(result.trace_dir)) == []
    # SIGTERM made the script flush: steps 2-3 complete, 4 cut by the timeout.
    traces = _trace_files(result.trace_dir)
    assert len(traces) == 1
    assert profiler_step_ids(traces[0]) == [2, 3, 4]
    assert result.steps_captured == 2
    assert _events(traces[0])              # complete, parseable JSON


def test_script_without_training_loop_gets_a_note(tmp_path):
    script = tmp_path / "hello.py"
    script.write_text("print('no training here')\n")
    result = run_profiled([str(script)], tmp_path / "out")
    assert result.exit_code == 0 and result.steps_captured == 0
    assert result.trace_files == []
    assert any("no optimizer step was seen" in n for n in result.notes)


# --------------------------------------------------------------------------
# Backend selection (pure logic) and MindSpore wiring without MindSpore.


def _only(*names):
    return lambda name: name in names


@pytest.mark.parametrize("imported, available, forced, expected", [
    ({"torch"}, (), None, "pytorch"),
    ({"torch"}, ("torch", "torch_npu"), None, "torch_npu"),
    ({"torch", "torch_npu"}, ("torch",), None, "torch_npu"),
    ({"mindspore", "numpy"}, ("torch", "torch_npu"), None, "mindspore"),
    ({"mindspore", "torch"}, ("torch",), None, "pytorch"),
    (set(), ("torch",), None, "pytorch"),
    (set(), ("torch", "torch_npu"), None, "torch_npu"),
    (set(), ("mindspore",), None, "mindspore"),
    (set(), (), None, "pytorch"),
    ({"torch"}, ("torch", "torch_npu"), "pytorch", "pytorch"),
    ({"torch"}, (), "ms", "mindspore"),
    ({"torch"}, (), "torch-npu", "torch_npu"),
])
def test_select_backend(imported, available, forced, expected):
    assert select_backend(imported, _only(*available), forced) == expected


def test_select_backend_rejects_unknown_framework(tmp_path):
    with pytest.raises(ValueError, match="unknown framework"):
        select_backend({"torch"}, _only(), "jax")
    script = tmp_path / "t.py"
    script.write_text("import torch\n")
    with pytest.raises(ConfigError, match="unknown framework"):
        run_profiled([str(script)], tmp_path / "out", framework="jax")


def test_script_imports_follows_local_modules(tmp_path):
    (tmp_path / "model.py").write_text("import mindspore.nn as nn\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from torch_npu.contrib import x\n")
    script = tmp_path / "train.py"
    script.write_text("import os\nimport model\nfrom pkg import y\n"
                      "import importlib\nimportlib.import_module('numpy')\n")
    assert script_imports(script) >= {"os", "model", "pkg", "mindspore", "torch_npu", "numpy"}
    assert script_imports(script, follow_local=0) == {"os", "model", "pkg", "importlib", "numpy"}
    (tmp_path / "ms.py").write_text("import mindspore\nfrom mindspore import nn\n")
    assert guess_framework(tmp_path / "ms.py") == "mindspore"
    assert guess_framework(tmp_path / "broken.py") in ("pytorch", "torch_npu", "mindspore")


def test_mindspore_options_keep_user_settings():
    opts = json.loads(mindspore_options("/x/trace", '{"profiler_level": "Level1", "start": false}'))
    assert opts["start"] is True and opts["output_path"] == "/x/trace"
    assert opts["profiler_level"] == "Level1" and opts["activities"] == ["CPU", "NPU"]
    assert json.loads(mindspore_options("/t", "not json"))["output_path"] == "/t"


def test_resolve_command(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    launch = resolve_command([str(script), "--lr", "0.1"], python="/py")
    assert launch.argv == ["/py", str(script), "--lr", "0.1"] and launch.script == script
    assert resolve_command(["-m", "pkg.train", "-x"], python="/py").argv == ["/py", "-m", "pkg.train", "-x"]
    launch = resolve_command(["sh", str(script), "--lr", "0.1"])
    assert launch.argv == ["sh", str(script), "--lr", "0.1"] and launch.script == script
    with pytest.raises(InputError, match="no such training script"):
        resolve_command([str(tmp_path / "missing.py")])
    with pytest.raises(InputError, match="command not found"):
        resolve_command(["no-such-launcher-xyz", "train.py"])
    with pytest.raises(InputError):
        resolve_command([])
    if shutil.which("torchrun") is None:
        assert resolve_command(["torchrun", str(script)], python="/py").argv[:3] == [
            "/py", "-m", "torch.distributed.run"]


ENV_DUMP = textwrap.dedent("""
    import json, os, sys
    {load}
    with open(sys.argv[1], "w") as fh:
        json.dump({{"ms": os.environ.get("MS_PROFILER_OPTIONS"), "ok": ok}}, fh)
""")


def test_mindspore_script_gets_profiler_env(tmp_path):
    """Statically detected MindSpore script: the parent sets MS_PROFILER_OPTIONS."""
    script = tmp_path / "ms_train.py"
    script.write_text(ENV_DUMP.format(load=(
        "try:\n    import mindspore\n    ok = True\nexcept ImportError:\n    ok = False")))
    dump = tmp_path / "env.json"
    result = run_profiled([str(script), str(dump)], tmp_path / "out")
    assert result.framework == "mindspore"
    seen = json.loads(dump.read_text())
    opts = json.loads(seen["ms"])
    assert opts["start"] is True and opts["output_path"] == str(result.trace_dir)
    assert any("MS_PROFILER_OPTIONS" in n for n in result.notes)


@pytest.mark.skipif(importable("mindspore") and not importable("torch"),
                    reason="with only MindSpore importable the parent already guesses MindSpore "
                           "up front; this test needs a parent that guessed otherwise")
def test_import_hook_switches_mindspore_profiler_on_at_import(tmp_path):
    """Not visible statically: the bootstrap's import hook sets the variable
    before MindSpore's own code runs (even when the import then fails)."""
    script = tmp_path / "dyn.py"
    script.write_text(ENV_DUMP.format(load=(
        "import importlib\nname = 'mind' + 'spore'\n"
        "assert 'MS_PROFILER_OPTIONS' not in os.environ\n"
        "try:\n    importlib.import_module(name)\n    ok = True\nexcept ImportError:\n    ok = False")))
    dump = tmp_path / "env.json"
    result = run_profiled([str(script), str(dump)], tmp_path / "out")
    assert result.exit_code == 0, result.notes
    opts = json.loads(json.loads(dump.read_text())["ms"])
    assert opts["output_path"] == str(result.trace_dir)
    assert result.framework == "mindspore"


@pytest.mark.skipif(not importable("mindspore"),
                    reason="mindspore is not installed (2.8 GB; pip install mindspore to run this)")
def test_mindspore_run_writes_ascend_ms(tmp_path):
    script = tmp_path / "ms_loop.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import mindspore as ms
        from mindspore import nn
        net = nn.Dense(8, 1)
        opt = nn.SGD(net.trainable_params(), learning_rate=0.1)
        step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
        for _ in range(8):
            step(ms.Tensor(np.random.randn(16, 8).astype(np.float32)),
                 ms.Tensor(np.random.randn(16, 1).astype(np.float32)))
    """))
    result = run_profiled([str(script)], tmp_path / "out", timeout=600)
    assert result.framework == "mindspore"
    assert result.exit_code == 0, result.notes
    assert any(p.name.endswith("_ascend_ms") for p in result.trace_files)
    # and `advisor run` reads what the MindSpore Profiler wrote
    from advisor.pipeline import analyze

    report = analyze(result.trace_dir)
    assert report.run.framework == "mindspore"
    assert report.run.source_format.startswith("ascend")
