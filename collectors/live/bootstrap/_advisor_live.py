"""Runtime half of ``advisor run``, loaded by the bootstrap ``sitecustomize``.

This module runs *inside the user's training process*. It is stdlib-only and
never imports ``advisor`` (the training job may run under another interpreter
than the one advisor is installed in, e.g. a ``torchrun`` from another venv).
Nothing here may break the training job: every hook swallows its own errors,
reports them once on stderr and in the status file, and switches profiling
off for the process.

How it works
------------

``install()`` puts an import watcher first on ``sys.meta_path``:

* ``torch`` -- after the module has finished executing, a global optimizer
  step post-hook (``torch.optim.optimizer.register_optimizer_step_post_hook``)
  is registered. The first optimizer whose ``step()`` completes becomes the
  *driver*; each of its steps is one profiler step. The profiler is created
  at the end of the driver's first step (so the first, cold iteration is
  never measured) with ``schedule(wait=0, warmup=W, active=S, repeat=1)``
  and its ``step_num`` set to the number of steps already done, so
  ``ProfilerStep#N`` is the 0-based index of the training iteration.
* ``mindspore`` -- *before* the module executes, ``MS_PROFILER_OPTIONS`` is
  set (when the parent has not already set it), which switches MindSpore's
  own profiler on for the whole run.

Step boundaries. Torch calls optimizer post-hooks *inside* the
``Optimizer.step#...`` record_function. Calling ``prof.step()`` there would
close ``ProfilerStep#N`` while ``Optimizer.step`` is still open (broken
nesting, and the last active step would lose its optimizer op). So
``Optimizer.profile_hook_step`` (the wrapper torch applies to every
optimizer class's ``step`` when the first instance is built) is wrapped once
more: the post-hook only marks the step done, and the outer wrapper calls
``prof.step()`` after the record_function has closed. A step therefore runs
from the end of one ``optimizer.step()`` to the end of the next, so it holds
``zero_grad``, the DataLoader fetch of its batch (torch's own
``enumerate(DataLoader)#...__next__`` range), forward, backward and the
optimizer update. Where that wrapper cannot be installed the post-hook
steps the profiler directly (still correct step counts, looser nesting).

After the window. The driver's next ``S + 1`` step ends are timed with the
profiler off (``time.perf_counter``, nothing else): the ``S`` step times
go to the status file as ``unprofiled_step_ms`` (fewer when the script
ends sooner), so the report can say how much the profiler's own cost adds
to the steps it recorded.

Exit. An ``atexit`` hook (and, while a window is open, a SIGTERM handler when
the process had none) stops the profiler; a window that reached its active
steps is exported, so a crash or a timeout after some steps still leaves a
trace. Every profiling process writes ``status-<pid>.json`` to
``ADVISOR_STATUS_DIR`` so the parent knows what happened.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import importlib.abc
import importlib.util
import json
import os
import signal
import sys
import threading
import time
import weakref

ENV_TRACE_DIR = "ADVISOR_TRACE_DIR"
ENV_STEPS = "ADVISOR_STEPS"
ENV_WARMUP = "ADVISOR_WARMUP"
ENV_STATUS_DIR = "ADVISOR_STATUS_DIR"
ENV_FRAMEWORK = "ADVISOR_FRAMEWORK"
ENV_PROFILE_MEMORY = "ADVISOR_PROFILE_MEMORY"
ENV_WITH_STACK = "ADVISOR_WITH_STACK"
MS_ENV = "MS_PROFILER_OPTIONS"

FRAMEWORKS = ("pytorch", "torch_npu", "mindspore")


# --------------------------------------------------------------------------
# Pure helpers (also used by the parent through advisor.collectors.live.backend)


def select_backend(imported, importable, forced=None):
    """Which profiler backend a process should use.

    ``imported``: top-level module names the script imports (or that the
    process has imported); ``importable(name) -> bool`` tells whether a
    module can be imported; ``forced``: an explicit choice
    (``ADVISOR_FRAMEWORK``), one of ``FRAMEWORKS``, which wins.

    Order: an explicit choice; MindSpore when the script uses it and not
    torch; torch_npu when the script imports it, or imports torch and
    torch_npu is importable (on Ascend ``torch_npu`` must drive the
    profiler, the plain torch profiler sees no NPU activity); plain PyTorch
    when the script imports torch. With no known import: whatever is
    importable, in the order torch_npu, torch, mindspore; "pytorch" if none.
    """
    if forced:
        forced = forced.strip().lower().replace("-", "_")
        if forced in ("torch", "pt"):
            forced = "pytorch"
        if forced in ("ms",):
            forced = "mindspore"
        if forced not in FRAMEWORKS:
            raise ValueError(
                f"unknown framework {forced!r} (expected one of {', '.join(FRAMEWORKS)})"
            )
        return forced
    imported = set(imported)
    uses_torch = bool(imported & {"torch", "torch_npu"})
    if "mindspore" in imported and not uses_torch:
        return "mindspore"
    if "torch_npu" in imported:
        return "torch_npu"
    if "torch" in imported:
        return "torch_npu" if importable("torch_npu") else "pytorch"
    for name, framework in (("torch_npu", "torch_npu"), ("torch", "pytorch"),
                            ("mindspore", "mindspore")):
        if importable(name):
            return framework
    return "pytorch"


def mindspore_options(trace_dir, existing=None):
    """The ``MS_PROFILER_OPTIONS`` JSON that makes MindSpore profile into
    ``trace_dir``. A user's own options (``existing``) are kept except
    ``start`` and ``output_path``, which advisor needs."""
    opts = {}
    if existing:
        try:
            parsed = json.loads(existing)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            opts.update(parsed)
    opts["start"] = True
    opts["output_path"] = str(trace_dir)
    opts.setdefault("activities", ["CPU", "NPU"])
    opts.setdefault("profiler_level", "Level0")
    opts.setdefault("aicore_metrics", "AicoreNone")
    opts.setdefault("with_stack", False)
    return json.dumps(opts)


#: Top-level key of a Kineto trace under which ``advisor run`` records the
#: host CPU's low-precision instructions (:func:`cpu_properties`).
CPU_PROPERTIES_KEY = "cpuProperties"


def _cpuinfo_words():
    """The words of the first ``flags`` (x86) or ``Features`` (Arm) line of
    /proc/cpuinfo; None where the file or the line is missing."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return set(value.split())
    except OSError:
        return None
    return None


def _torch_check(torch_module, name):
    """``torch.cpu.<name>()`` (private instruction-set probes), None where absent."""
    probe = getattr(getattr(torch_module, "cpu", None), name, None)
    try:
        return bool(probe()) if callable(probe) else None
    except Exception:
        return None


def cpu_properties(torch_module, words=None, machine=None):
    """What the host CPU computes bfloat16 and float16 matrix products with:
    ``arch`` (``platform.machine()``), ``capability`` (the vector ISA
    PyTorch dispatches to, ``torch.backends.cpu.get_cpu_capability()``), and
    ``bf16`` / ``fp16``: True when the CPU has instructions for that type's
    arithmetic, False when it has not, None when unknown. x86: bfloat16 with
    AVX512-BF16 or AMX-BF16, float16 with AVX512-FP16 or AMX-FP16; Arm: the
    ``bf16`` and ``fphp`` features. Without them PyTorch converts element
    by element and a product takes tens of times its float32 time.
    ``usable_cpus``: the CPUs this process may run on (its affinity mask):
    what the training process and its data-loader workers share."""
    import os
    import platform

    words = _cpuinfo_words() if words is None else words
    machine = (machine or platform.machine()).lower()
    try:
        capability = str(torch_module.backends.cpu.get_cpu_capability())
    except Exception:
        capability = None
    bf16 = fp16 = None
    if machine in ("x86_64", "amd64", "i686", "i386"):
        if words is not None:
            bf16 = bool({"avx512_bf16", "amx_bf16"} & words)
            fp16 = bool({"avx512_fp16", "amx_fp16"} & words)
        else:
            bf16 = (_torch_check(torch_module, "_is_avx512_bf16_supported")
                    or _torch_check(torch_module, "_is_amx_tile_supported"))
            fp16 = _torch_check(torch_module, "_is_amx_fp16_supported") or None
    elif machine in ("aarch64", "arm64") and words is not None:
        bf16, fp16 = "bf16" in words, "fphp" in words
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    return {"arch": machine, "capability": capability, "bf16": bf16, "fp16": fp16, "usable_cpus": usable}


def importable(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


# --------------------------------------------------------------------------
# Configuration and state


class _Config:
    def __init__(self, env):
        self.trace_dir = env[ENV_TRACE_DIR]
        self.steps = max(1, int(env.get(ENV_STEPS) or 5))
        self.warmup = max(0, int(env.get(ENV_WARMUP) or 3))
        self.status_dir = env.get(ENV_STATUS_DIR) or None
        self.forced = env.get(ENV_FRAMEWORK) or None
        self.profile_memory = (env.get(ENV_PROFILE_MEMORY) or "0") not in ("0", "false", "no")
        self.with_stack = (env.get(ENV_WITH_STACK) or "0") not in ("0", "false", "no")


class _State:
    def __init__(self):
        self.cfg = None
        self.pid = os.getpid()
        self.framework = None
        self.prof = None
        self.driver = None          # weakref to the optimizer whose steps count
        self.seen = set()           # ids of optimizers seen stepping
        self.restart = False        # driver changed during the first step
        self.opt_steps = 0          # driver steps seen (whole run)
        self.first_step = None      # ProfilerStep id of the first profiled step
        self.steps_done = 0         # prof.step() calls made
        self.phase = "idle"         # idle|warmup|recording|complete|flushed|ended_in_warmup|failed|skipped
        self.busy = False
        self.pending = False
        self.term_pending = None
        self.post_handle = None
        self.worker = None
        self.rank = None
        self.world_size = None
        self.trace_files = []
        self.error = None
        self.exit_reason = None
        self.step_ids = True        # ProfilerStep#N == iteration index
        self.announced = False
        self.after = None           # perf_counter at the driver's step ends after the window, while timing


_state = _State()
_tls = threading.local()
_DONE = ("complete", "flushed", "ended_in_warmup", "failed", "skipped")


def _say(msg):
    try:
        who = _state.worker or f"pid{os.getpid()}"
        sys.stderr.write(f"advisor[{who}]: {msg}\n")
        sys.stderr.flush()
    except Exception:
        pass


def _write_status(**extra):
    st = _state
    cfg = st.cfg
    if cfg is None or not cfg.status_dir:
        return
    w = cfg.warmup
    data = {
        "pid": os.getpid(),
        "framework": st.framework,
        "rank": st.rank,
        "world_size": st.world_size,
        "worker": st.worker,
        "phase": st.phase,
        "warmup": w,
        "steps": cfg.steps,
        "first_step": st.first_step,
        "steps_done": st.steps_done,
        "active_completed": max(0, min(cfg.steps, st.steps_done - w)),
        "partial_step": (st.first_step + st.steps_done)
        if st.phase == "flushed" and st.first_step is not None else None,
        "step_ids_are_iterations": st.step_ids,
        "trace_files": st.trace_files,
        "error": st.error,
        "exit_reason": st.exit_reason,
        "time": time.time(),
    }
    data.update(extra)
    try:
        os.makedirs(cfg.status_dir, exist_ok=True)
        path = os.path.join(cfg.status_dir, f"status-{os.getpid()}.json")
        # the atomic write of advisor.runtime.files, spelled out: this module never imports advisor
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except Exception:
        pass


def _fail(where, exc):
    st = _state
    st.error = f"{where}: {type(exc).__name__}: {exc}"
    st.phase = "failed"
    prof, st.prof = st.prof, None
    if prof is not None:
        try:
            prof.__exit__(None, None, None)
        except Exception:
            pass
    _say(f"profiling switched off ({st.error})")
    _write_status()


# --------------------------------------------------------------------------
# Import watching


class _ImportWatcher(importlib.abc.MetaPathFinder):
    """Runs callbacks when named top-level modules are imported.

    ``pre[name]`` runs when the import starts (before the module's code);
    ``post[name](module)`` after the module has executed successfully. The
    real spec comes from the other finders; only its loader's
    ``exec_module`` is wrapped, for that one module, and then restored.
    """

    def __init__(self):
        self.pre = {}
        self.post = {}
        self._busy = set()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.pre and fullname not in self.post:
            return None
        if fullname in self._busy:
            return None
        self._busy.add(fullname)
        spec = None
        try:
            pre = self.pre.pop(fullname, None)
            if pre is not None:
                _safe(pre)
            if fullname not in self.post:
                return None
            for finder in sys.meta_path:
                if finder is self:
                    continue
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.discard(fullname)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return None
        callback = self.post.pop(fullname)
        original = loader.exec_module

        def exec_module(module):
            try:
                original(module)
            finally:
                try:
                    del loader.exec_module
                except AttributeError:
                    pass
            _safe(callback, module)

        try:
            loader.exec_module = exec_module
        except Exception:
            self.post[fullname] = callback
            return None
        return spec


def _safe(fn, *args):
    try:
        fn(*args)
    except Exception as exc:  # never break the user's import
        _fail(getattr(fn, "__name__", "hook"), exc)


# --------------------------------------------------------------------------
# MindSpore


def _on_mindspore_import():
    st = _state
    if st.cfg.forced and st.cfg.forced != "mindspore":
        return
    if MS_ENV not in os.environ:
        os.environ[MS_ENV] = mindspore_options(st.cfg.trace_dir)
    st.framework = "mindspore"
    st.phase = "recording"
    st.step_ids = False
    _write_status(note="MindSpore profiler enabled through MS_PROFILER_OPTIONS")


# --------------------------------------------------------------------------
# PyTorch / torch_npu


def _on_torch_import(torch_module=None):
    st = _state
    if st.cfg.forced == "mindspore":
        return
    optimizer_mod = importlib.import_module("torch.optim.optimizer")
    Optimizer = optimizer_mod.Optimizer
    original = getattr(Optimizer, "profile_hook_step", None)
    if original is not None and not getattr(original, "_advisor", False):

        def profile_hook_step(func):
            inner = original(func)

            @functools.wraps(inner)
            def step_wrapper(*args, **kwargs):
                _tls.depth = getattr(_tls, "depth", 0) + 1
                try:
                    return inner(*args, **kwargs)
                finally:
                    _tls.depth -= 1
                    if _tls.depth == 0 and st.pending:
                        st.pending = False
                        _advance()

            return step_wrapper

        profile_hook_step._advisor = True
        Optimizer.profile_hook_step = staticmethod(profile_hook_step)
    st.post_handle = optimizer_mod.register_optimizer_step_post_hook(_post_hook)


def _post_hook(optimizer, args, kwargs):
    st = _state
    if st.after is not None and os.getpid() == st.pid:
        if st.driver is not None and st.driver() is optimizer:
            _time_step()
        return
    if st.phase in _DONE or os.getpid() != st.pid:
        return
    key = id(optimizer)
    if st.driver is None:
        _set_driver(optimizer)
    elif st.driver() is None:           # the driver was re-created (e.g. per epoch)
        steps = st.opt_steps
        _set_driver(optimizer)
        st.opt_steps = steps
    elif st.driver() is not optimizer:
        # Several optimizers (GANs, actor-critic): the step boundary belongs
        # after the *last* one of an iteration. A new optimizer that steps
        # between the driver's first and second step is later in the same
        # iteration, so it takes over (the warm-up just begun is restarted).
        if key in st.seen or st.opt_steps != 1 or st.steps_done:
            st.seen.add(key)
            return
        _set_driver(optimizer)
        st.restart = True
    st.seen.add(key)
    st.opt_steps += 1
    if getattr(_tls, "depth", 0) > 0:
        st.pending = True          # step after Optimizer.step's range closes
    else:
        _advance()


def _set_driver(optimizer):
    st = _state
    try:
        st.driver = weakref.ref(optimizer)
    except TypeError:
        st.driver = lambda o=optimizer: o
    st.opt_steps = 0


def _advance():
    st = _state
    if st.busy or st.phase in _DONE:
        return
    st.busy = True
    try:
        if st.restart:
            st.restart = False
            prof, st.prof = st.prof, None
            if prof is not None:
                prof.on_trace_ready = None      # discard, never export
                prof.__exit__(None, None, None)
        if st.prof is None:
            _start()
        else:
            _step()
    except Exception as exc:
        _fail("profiler", exc)
    finally:
        st.busy = False
    if st.term_pending is not None:
        _on_sigterm(st.term_pending, None)


def _rank_info():
    rank = world = None
    try:
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank, world = dist.get_rank(), dist.get_world_size()
    except Exception:
        pass
    if rank is None and os.environ.get("RANK", "").isdigit():
        rank = int(os.environ["RANK"])
        if os.environ.get("WORLD_SIZE", "").isdigit():
            world = int(os.environ["WORLD_SIZE"])
    return rank, world


def _worker_name(rank):
    if rank is not None:
        return f"rank{rank}"
    try:
        import multiprocessing

        if multiprocessing.parent_process() is not None:
            return f"pid{os.getpid()}"   # a spawned child that is not a rank
    except Exception:
        pass
    return "rank0"


def _start():
    st, cfg = _state, _state.cfg
    import torch

    try:
        if torch.autograd.profiler._is_profiler_enabled:
            st.phase = "skipped"
            st.error = "the script runs its own torch profiler"
            _say("the script already runs a torch profiler; advisor does not profile it")
            _write_status()
            return
    except Exception:
        pass
    imported = {"torch"} | ({"torch_npu"} & set(sys.modules))
    st.framework = select_backend(imported, importable, cfg.forced)
    if st.framework == "mindspore":
        st.phase = "skipped"
        return
    st.rank, st.world_size = _rank_info()
    if st.rank is None and st.world_size is None:
        st.world_size = 1
    st.worker = _worker_name(st.rank)
    if st.rank is None and st.worker == "rank0":
        st.rank = 0
    os.makedirs(cfg.trace_dir, exist_ok=True)
    offset = st.opt_steps            # driver steps already done (>= 1)
    if st.framework == "torch_npu":
        prof = _build_npu_profiler(cfg, st.worker)
        offset = 0
        st.step_ids = False
    else:
        prof = _build_torch_profiler(cfg, st.worker, offset)
    st.first_step = offset
    st.prof = prof
    prof.start()
    if st.framework == "pytorch":
        try:
            prof.add_metadata_json(CPU_PROPERTIES_KEY, json.dumps(cpu_properties(torch)))
        except Exception:  # the trace then says nothing of the CPU
            pass
    st.phase = "warmup" if cfg.warmup else "recording"
    _install_exit_handlers()
    first = offset + cfg.warmup
    if not st.announced:
        st.announced = True
        _say(f"{st.framework} profiler on: warm-up {cfg.warmup} step(s), recording "
             f"ProfilerStep#{first}-#{first + cfg.steps - 1}")
    _write_status()


def _on_ready_wrapper(handler, trace_dir, worker):
    def on_trace_ready(prof):
        try:
            before = set(os.listdir(trace_dir))
        except OSError:
            before = set()
        handler(prof)
        try:
            after = set(os.listdir(trace_dir))
        except OSError:
            after = set()
        new = sorted(n for n in after - before
                     if n.startswith(worker + ".") or n.startswith(worker + "_"))
        _state.trace_files.extend(os.path.join(trace_dir, n) for n in new)
        _say(f"trace written: {', '.join(new) or '(none)'}")

    return on_trace_ready


def _build_torch_profiler(cfg, worker, offset):
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    activities = [ProfilerActivity.CPU]
    try:
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
    except Exception:
        pass
    base = schedule(wait=0, warmup=cfg.warmup, active=cfg.steps, repeat=1)

    def shifted(step):               # ProfilerStep ids continue the iteration count
        return base(max(0, step - offset))

    prof = profile(
        activities=activities,
        schedule=shifted,
        on_trace_ready=_on_ready_wrapper(
            tensorboard_trace_handler(cfg.trace_dir, worker_name=worker), cfg.trace_dir, worker),
        record_shapes=True,
        profile_memory=cfg.profile_memory,
        **_stack_options(cfg),
    )
    prof.step_num = offset
    return prof


def _stack_options(cfg):
    """With ``ADVISOR_WITH_STACK``: Python stacks, and Python GC events
    where this torch's profiler can record them (``record_python_gc_info``)."""
    if not cfg.with_stack:
        return {}
    opts = {"with_stack": True}
    try:
        from torch.profiler import _ExperimentalConfig
        opts["experimental_config"] = _ExperimentalConfig(record_python_gc_info=True)
    except (ImportError, TypeError):
        pass
    return opts


def _build_npu_profiler(cfg, worker):
    import torch_npu  # noqa: F401  (registers the NPU device)
    from torch_npu import profiler as npu

    # torch_npu's handler is an object the profiler inspects for the output
    # path: pass it as is (its *_ascend_pt folders are found afterwards).
    return npu.profile(
        activities=[npu.ProfilerActivity.CPU, npu.ProfilerActivity.NPU],
        schedule=npu.schedule(wait=0, warmup=cfg.warmup, active=cfg.steps, repeat=1),
        on_trace_ready=npu.tensorboard_trace_handler(cfg.trace_dir, worker_name=worker),
        record_shapes=True,
        profile_memory=cfg.profile_memory,
    )


def _find_npu_outputs():
    st = _state
    if st.framework != "torch_npu" or st.worker is None:
        return
    try:
        names = os.listdir(st.cfg.trace_dir)
    except OSError:
        return
    for name in sorted(names):
        path = os.path.join(st.cfg.trace_dir, name)
        if (name.startswith(st.worker + "_") and name.endswith("_ascend_pt")
                and path not in st.trace_files):
            st.trace_files.append(path)


def _step():
    st, cfg = _state, _state.cfg
    st.prof.step()
    st.steps_done += 1
    if st.steps_done == cfg.warmup:
        st.phase = "recording"
        _write_status()
    if st.steps_done >= cfg.warmup + cfg.steps:
        prof, st.prof = st.prof, None
        prof.__exit__(None, None, None)   # window already exported by step()
        st.phase = "complete"
        _find_npu_outputs()
        st.after = []                     # time the next steps without the profiler
        _write_status()


def _time_step():
    """One driver step end after the window (module doc): timed until
    ``steps + 1`` ends are in, then the hook is removed."""
    st = _state
    st.after.append(time.perf_counter())
    if len(st.after) > st.cfg.steps:
        _end_timing()


def _end_timing():
    """Stop timing the steps after the window: remove the hook, and write
    the step times (two step ends or more) to the status file."""
    st = _state
    stamps, st.after = st.after, None
    if st.post_handle is not None:
        try:
            st.post_handle.remove()
        except Exception:
            pass
        st.post_handle = None
    if stamps and len(stamps) > 1:
        _write_status(unprofiled_step_ms=[round((b - a) * 1e3, 4) for a, b in zip(stamps, stamps[1:])])


# --------------------------------------------------------------------------
# Exit: flush a partly captured window


_exit_handlers_installed = False


def _install_exit_handlers():
    global _exit_handlers_installed
    if _exit_handlers_installed:
        return
    _exit_handlers_installed = True
    atexit.register(_flush, "process exit")
    try:
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL):
            signal.signal(signal.SIGTERM, _on_sigterm)
    except Exception:
        pass


def _flush(reason):
    st = _state
    if os.getpid() == st.pid and st.after is not None:
        _end_timing()                     # the script ended before all the steps after the window
    if os.getpid() != st.pid or st.prof is None:
        return
    prof, st.prof = st.prof, None
    was = st.phase
    st.exit_reason = reason
    try:
        prof.__exit__(None, None, None)   # RECORD -> stop + export; WARMUP -> nothing
    except Exception as exc:
        st.error = f"flush: {type(exc).__name__}: {exc}"
    st.phase = "flushed" if was == "recording" else "ended_in_warmup"
    _find_npu_outputs()
    if st.phase == "ended_in_warmup":
        _say(f"process ended ({reason}) during warm-up: no trace written")
    _write_status()


def _on_sigterm(signum, frame):
    st = _state
    if st.busy:                       # inside a profiler call: finish it first
        st.term_pending = signum
        return
    st.term_pending = None
    try:
        _flush("SIGTERM")
    finally:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


# --------------------------------------------------------------------------


_installed = False


def install(env=None):
    """Start watching imports in this process (idempotent)."""
    global _installed
    env = os.environ if env is None else env
    if _installed or not env.get(ENV_TRACE_DIR):
        return
    _installed = True
    _state.cfg = _Config(env)
    _state.pid = os.getpid()
    watcher = _ImportWatcher()
    if _state.cfg.forced != "mindspore":
        watcher.post["torch"] = _on_torch_import
    if _state.cfg.forced in (None, "", "mindspore"):
        watcher.pre["mindspore"] = _on_mindspore_import
    if "torch" in sys.modules and "torch" in watcher.post:
        watcher.post.pop("torch")
        _safe(_on_torch_import, sys.modules["torch"])
    if "mindspore" in sys.modules:
        watcher.pre.pop("mindspore", None)
    sys.meta_path.insert(0, watcher)
