"""Host-side habits of the training loop (the ``host_calls`` table).

What the host does besides issuing work: Python garbage collection, waits
for the device, allocator calls and ``empty_cache()``, the optimizer step
and how its kernels are issued, SyncBatchNorm. Figures are per steady step
(``steps_view``): per rank, the events in that rank's steady steps divided
by their number, then the mean over ranks; ratios divide by the mean step
time the same way.

A class the profile never records is not evaluated: a trace without any
Python GC event says nothing about collections unless it was recorded to
show them, so the GC metrics need at least one GC event (the collector
does not invent zeros). The sync, allocation and optimizer classes are
recorded by every PyTorch trace; their metrics count what is there.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from advisor.collectors.kineto.calls import BACKWARD_NODE_PREFIX, OPTIMIZER_STEP_RE
from advisor.metrics.data import epoch_end_keys
from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.sequences import AFFINITY_API, api_family
from advisor.metrics.steps_view import US_PER_MS, steady_steps
from advisor.profile import Profile

#: The names listed in a metric's value (the ones with the most time).
TOP_NAMES = 5
_NEEDS = ["host_calls.cls", "host_calls.count", "host_calls.total_us", "steps.duration_us"]
#: Optimizer classes that have a fused implementation, by where the run
#: trains: torch.optim's ``fused=True`` (Adam, AdamW, SGD, Adagrad; torch.optim
#: docs) and torch_npu's ``torch_npu.optim.NpuFused<class>`` (Adam, AdamW, SGD,
#: Adadelta, RMSprop; no Adagrad). Others (SparseAdam, LBFGS, ...) have
#: nothing to fuse into.
FUSABLE_OPTIMIZERS = frozenset({"Adam", "AdamW", "SGD", "Adagrad"})
NPU_FUSABLE_OPTIMIZERS = frozenset({"Adam", "AdamW", "SGD", "Adadelta", "RMSprop"})


def _steady(p: Profile) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(steady steps, host_calls rows in them); NotEvaluated without steps.
    Built once per profile: the host metrics all start from it."""
    return p.memo("host.steady", lambda: _steady_of(p))


def _steady_of(p: Profile) -> tuple[pd.DataFrame, pd.DataFrame]:
    steady = steady_steps(p)
    if steady.empty or "step" not in steady.columns or steady["step"].isna().all():
        raise NotEvaluated("no step markers: per-step host figures need steps")
    rows = p.table("host_calls").dropna(subset=["step"]).astype({"step": "int64"})
    keys = steady[["rank", "step"]].dropna().astype({"step": "int64"})
    return steady, rows.merge(keys, on=["rank", "step"])


def _per_step(p: Profile, cls: str | tuple[str, ...], column: str = "total_us") -> float:
    """Mean over ranks of the per-step sum of ``column`` over rows of ``cls``."""
    steady, rows = _steady(p)
    classes = (cls,) if isinstance(cls, str) else cls
    return _mean_per_step(steady, rows[rows["cls"].isin(classes)], column)


def _step_us(p: Profile) -> float:
    steady = steady_steps(p)
    return float(steady.groupby("rank")["duration_us"].mean().mean())


def _recorded(p: Profile, cls: str, why: str) -> None:
    """NotEvaluated(why) unless the profile holds at least one ``cls`` event."""
    table = p.table("host_calls")
    if table is None or not (table["cls"] == cls).any():
        raise NotEvaluated(why)


def _top(p: Profile, cls: str, time: str = "total_us") -> list[dict]:
    """The ``TOP_NAMES`` names of ``cls`` with the most time (column
    ``time``) per steady step: ``{"name", "per_step", "ms"}`` and
    ``"frame"`` where the trace has stacks."""
    steady, rows = _steady(p)
    rows = rows[rows["cls"] == cls]
    if rows.empty:
        return []
    steps = len(steady)
    key = ["name", "frame"] if "frame" in rows.columns else ["name"]
    agg = (rows.groupby(key, dropna=False)[["count", time]].sum().rename(columns={time: "total_us"})
           .sort_values("total_us", ascending=False))
    out = []
    for k, r in agg.head(TOP_NAMES).iterrows():
        name, frame = k if len(key) == 2 else (k, None)
        entry = {"name": str(name), "per_step": round(float(r["count"]) / steps, 2),
                 "ms": round(float(r["total_us"]) / steps / US_PER_MS, 3)}
        if frame is not None and not pd.isna(frame):
            entry["frame"] = str(frame)
        out.append(entry)
    return out


def _longest(p: Profile, cls: str, what: str) -> Value:
    """The longest ``cls`` event in the steady steps (ms; 0 without any),
    with its rank and step and ``<what>_per_step``."""
    _, rows = _steady(p)
    rows = rows[rows["cls"] == cls]
    if rows.empty:
        return Value(0.0, {what: 0})
    top = rows.loc[rows["max_us"].idxmax()]
    return Value(float(top["max_us"]) / US_PER_MS, {"rank": int(top["rank"]), "step": int(top["step"]),
                                                      f"{what}_per_step": round(_per_step(p, cls, "count"), 2)})


_NO_GC = ("the profile records no Python garbage collections (PyTorch writes them with with_stack=True and "
          "experimental_config=_ExperimentalConfig(record_python_gc_info=True); torch_npu with "
          "_ExperimentalConfig(gc_detect_threshold=...))")


@metric("host.gc_ms", unit="ms", needs=_NEEDS)
def gc_ms(p: Profile) -> float:
    """Time per step the process spends in Python garbage collection (the
    ``Python GC`` events of PyTorch's Python tracer, torch_npu's GC
    records). A collection stops every Python thread, the one issuing
    device work included."""
    _recorded(p, "gc", _NO_GC)
    return _per_step(p, "gc") / US_PER_MS


@metric("host.gc_ratio", unit="ratio", needs=_NEEDS)
def gc_ratio(p: Profile) -> float:
    """Share of the step spent in Python garbage collection
    (``host.gc_ms`` over the mean step time)."""
    _recorded(p, "gc", _NO_GC)
    return _per_step(p, "gc") / _step_us(p)


@metric("host.gc_max_ms", unit="ms", needs=[*_NEEDS, "host_calls.max_us"])
def gc_max_ms(p: Profile) -> Value:
    """The longest single garbage-collection pause in the steady steps, with
    the step it fell in."""
    _recorded(p, "gc", _NO_GC)
    return _longest(p, "gc", "pauses")


_NO_GC_CALL = "no gc.collect() call of the program is recorded (it needs Python stacks: with_stack=True)"


@metric("host.gc_call_ms", unit="ms", needs=_NEEDS)
def gc_call_ms(p: Profile) -> Value:
    """Time per step in the program's own ``gc.collect()`` calls (traces
    with Python stacks; the ``gc_call`` rows), the collections they run
    included: the part of ``host.gc_ms`` that no collection threshold
    changes (``host.gc_call_sites``: where the program makes them)."""
    _recorded(p, "gc_call", _NO_GC_CALL)
    return Value(_per_step(p, "gc_call") / US_PER_MS)


@metric("host.gc_call_sites", unit="list", needs=_NEEDS)
def gc_call_sites(p: Profile) -> list[dict]:
    """The program's frames that call ``gc.collect()`` in the steady steps,
    most time first (``host.gc_call_ms``)."""
    _recorded(p, "gc_call", _NO_GC_CALL)
    return _top(p, "gc_call")


#: Steady steps a rank needs before its median step without gaps is a
#: baseline a slow step can be told from (the median of three is the
#: middle one: one slow step cannot move it).
MIN_STEPS_FOR_STALL = 3
#: Collectors that write the ``silent_gap`` rows (a profile of another
#: format without them has not been searched for gaps, rather than having none).
SILENT_GAP_SOURCES = frozenset({"kineto", "ascend_pt"})
_GAP_NEEDS = ["steps.duration_us"]
_NO_GAPS = ("silent gaps (no host op on any thread) are read from PyTorch (Kineto) traces and torch_npu's "
            "trace_view.json only; this profile's format is not searched for them")


def _gap_steps(p: Profile) -> pd.DataFrame:
    """Per steady step: ``rank``, ``step``, ``duration_us``, ``gap_us`` (its
    silent gaps' time, 0 without any) and ``stall_us``: the part of the gaps
    that lengthened the step -- min(gap, step minus the rank's median step
    without its gaps), 0 when the step is no longer than that median."""
    return p.memo("host.gap_steps", lambda: _gap_steps_of(p))


def _gap_steps_of(p: Profile) -> pd.DataFrame:
    if p.meta.source_format not in SILENT_GAP_SOURCES:
        raise NotEvaluated(_NO_GAPS)
    steady, rows = _steady_gaps(p)
    if steady.groupby("rank").size().max() < MIN_STEPS_FOR_STALL:
        raise NotEvaluated(f"fewer than {MIN_STEPS_FOR_STALL} steady steps: whether a gap made its step slow "
                           "needs other steps to compare with")
    gaps = rows[rows["cls"] == "silent_gap"].groupby(["rank", "step"])["total_us"].sum().rename("gap_us")
    steps = steady.dropna(subset=["step"]).astype({"step": "int64"})[["rank", "step", "duration_us"]]
    df = steps.join(gaps, on=["rank", "step"]).fillna({"gap_us": 0.0}).astype({"gap_us": "float64"})
    base = (df["duration_us"] - df["gap_us"]).groupby(df["rank"]).transform("median")
    df["stall_us"] = np.minimum(df["gap_us"], (df["duration_us"] - base).clip(lower=0.0))
    return df


def _steady_gaps(p: Profile) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(steady steps, silent_gap rows in them). A Kineto trace without a
    host_calls table has no silent gaps; a torch_npu profile without one
    has no host record read (trace_view.json)."""
    if p.table("host_calls") is not None:
        steady, rows = _steady(p)
        return steady, rows[rows["cls"] == "silent_gap"]
    if p.meta.source_format != "kineto":
        raise NotEvaluated("no host record was read (torch_npu writes it to trace_view.json)")
    steady = steady_steps(p)
    if steady.empty or "step" not in steady.columns or steady["step"].isna().all():
        raise NotEvaluated("no step markers: per-step host figures need steps")
    return steady, pd.DataFrame({"rank": pd.Series(dtype="int64"), "step": pd.Series(dtype="int64"),
                                 "total_us": pd.Series(dtype="float64")})


def _gap_mean(df: pd.DataFrame, column: str) -> float:
    return float(df.groupby("rank")[column].mean().mean())


@metric("host.silent_gap_ms", unit="ms", needs=_GAP_NEEDS)
def silent_gap_ms(p: Profile) -> float:
    """Time per steady step in silent gaps: stretches of at least 1 ms
    within the step in which no thread records a host op or runtime call
    (``collectors/kineto/host_gaps.py``). The Python the training thread
    runs then is invisible to the profiler: a garbage collection,
    pure-Python work or a sleep. PyTorch (Kineto) traces and torch_npu's
    trace_view.json only."""
    return _gap_mean(_gap_steps(p), "gap_us") / US_PER_MS


@metric("host.silent_gap_max_ms", unit="ms", needs=_GAP_NEEDS)
def silent_gap_max_ms(p: Profile) -> Value:
    """The longest silent gap in the steady steps
    (``host.silent_gap_ms``), with its rank and step; 0 without any."""
    _gap_steps(p)
    if p.table("host_calls") is None:
        return Value(0.0, {"gaps": 0})
    return _longest(p, "silent_gap", "gaps")


@metric("host.silent_gap_stall_ms", unit="ms", needs=_GAP_NEEDS)
def silent_gap_stall_ms(p: Profile) -> Value:
    """Per steady step, the part of the silent gaps (``host.silent_gap_ms``)
    that lengthened their step: in each step the smaller of its gaps' time
    and how much longer the step ran than the rank's median step without
    its gaps. A gap while the device still works through queued work, or in
    a step no slower than usual, counts nothing: what remains is gap time
    that lines up with slow steps. Evidence: the slowed steps."""
    df = _gap_steps(p)
    slowed = df[df["stall_us"] > 0]
    return Value(_gap_mean(df, "stall_us") / US_PER_MS,
                 {"steps": [{"rank": int(r.rank), "step": int(r.step), "gap_ms": round(r.gap_us / US_PER_MS, 3),
                             "stall_ms": round(r.stall_us / US_PER_MS, 3)}
                            for r in slowed.nlargest(TOP_NAMES, "stall_us").itertuples()]})


@metric("host.silent_gap_epoch_end_ms", unit="ms", needs=_GAP_NEEDS)
def silent_gap_epoch_end_ms(p: Profile) -> Value:
    """The part of ``host.silent_gap_stall_ms`` in the steps where a PyTorch
    DataLoader epoch ends (``data.epoch_end_steps``): pauses that the
    loader's end and restart, and whatever the loop runs between epochs,
    account for; 0 where no epoch end is told apart."""
    df = _gap_steps(p)
    ends = epoch_end_keys(p)
    at_end = np.array([(int(r), int(s)) in ends for r, s in zip(df["rank"], df["step"])], dtype=bool)
    return Value(_gap_mean(df.assign(stall_us=np.where(at_end, df["stall_us"], 0.0)), "stall_us") / US_PER_MS,
                 {"epoch_end_steps": int(at_end.sum())})


@metric("host.silent_gap_stall_ratio", unit="ratio", needs=_GAP_NEEDS)
def silent_gap_stall_ratio(p: Profile) -> float:
    """``host.silent_gap_stall_ms`` over the mean step time."""
    df = _gap_steps(p)
    return _gap_mean(df, "stall_us") / _gap_mean(df, "duration_us")


@metric("host.sync_calls", unit="list", needs=_NEEDS)
def sync_calls(p: Profile) -> Value:
    """The host's waits for the device per step, the ``TOP_NAMES`` names
    with the most time: ``{"name", "per_step", "ms"}`` (``aten::item``,
    ``cudaStreamSynchronize``, ``AscendCL@aclrtSynchronizeStream`` ...), and
    the program's Python ``"frame"`` that made them where the trace has
    stacks. Host time blocked, whether or not the device was idle then."""
    return Value(_top(p, "sync"))


@metric("host.sync_ms", unit="ms", needs=_NEEDS)
def sync_ms(p: Profile) -> float:
    """Host time per step blocked in synchronizations with the device
    (``host.sync_calls``): the larger of the time in ops that read a device
    value (``aten::item`` ...) and the time in runtime sync calls, as a
    call made inside such an op is part of its time."""
    return _outermost_sync_us(p) / US_PER_MS


@metric("host.sync_ratio", unit="ratio", needs=_NEEDS)
def sync_ratio(p: Profile) -> float:
    """Share of the step the host is blocked in synchronizations
    (``host.sync_ms`` over the mean step time)."""
    return _outermost_sync_us(p) / _step_us(p)


def _outermost_sync_us(p: Profile) -> float:
    """Per-step sync time without double counting: ``aten::item`` holds
    ``aten::_local_scalar_dense`` and the runtime sync it makes, so the
    larger of the ops' time (item, is_nonzero, tolist) and the runtime
    calls' time (synchronizations outside any op, such as
    ``torch.cuda.synchronize()``, are among the calls) -- a lower bound of
    the blocked time when both kinds occur apart."""
    steady, rows = _steady(p)
    syncs = rows[rows["cls"] == "sync"]
    ops = syncs["name"].isin(["aten::item", "aten::is_nonzero", "aten::tolist"])
    calls = ~ops & (syncs["name"] != "aten::_local_scalar_dense")
    return max(_mean_per_step(steady, syncs[ops]), _mean_per_step(steady, syncs[calls]))


def _sync_stall_us(p: Profile) -> float:
    """Mean over ranks of the per-step mean of min(sync time, device free
    time): the steps' own pairs, so a step whose sync falls in a busy step
    does not borrow another step's free time."""
    steady, rows = _steady(p)
    syncs = rows[rows["cls"] == "sync"]
    ops = syncs["name"].isin(["aten::item", "aten::is_nonzero", "aten::tolist"])
    calls = ~ops & (syncs["name"] != "aten::_local_scalar_dense")
    key = ["rank", "step"]
    per_step = pd.concat([syncs[ops].groupby(key)["total_us"].sum().rename("ops"),
                          syncs[calls].groupby(key)["total_us"].sum().rename("calls")], axis=1)
    blocked = per_step.max(axis=1).rename("sync")
    steps = steady.dropna(subset=["step"]).astype({"step": "int64"}).set_index(key)
    both = steps[["free_us"]].join(blocked, how="left").fillna({"sync": 0.0})
    stall = both[["free_us", "sync"]].min(axis=1)
    return float(stall.groupby(level="rank").mean().mean())


@metric("host.sync_stall_ms", unit="ms", needs=[*_NEEDS, "steps.free_us"])
def sync_stall_ms(p: Profile) -> float:
    """Per step, the host's time blocked in synchronizations
    (``host.sync_ms``) bounded by the device's free time in the same step:
    what the synchronizations can have cost the device where the trace does
    not attribute its idle time to host calls (Ascend). Needs the device's
    free time (``steps.free_us``)."""
    return _sync_stall_us(p) / US_PER_MS


@metric("host.sync_stall_ratio", unit="ratio", needs=[*_NEEDS, "steps.free_us"])
def sync_stall_ratio(p: Profile) -> float:
    """``host.sync_stall_ms`` over the mean step time."""
    return _sync_stall_us(p) / _step_us(p)


def _mean_per_step(steady: pd.DataFrame, rows: pd.DataFrame, column: str = "total_us") -> float:
    """Mean over the ranks of ``steady`` of the per-step sum of ``column``
    over ``rows`` (a rank without rows counts 0)."""
    steps = steady.groupby("rank").size()
    return float((rows.groupby("rank")[column].sum().reindex(steps.index, fill_value=0.0) / steps).mean())


@metric("host.alloc_calls", unit="count", needs=_NEEDS)
def alloc_calls(p: Profile) -> Value:
    """Device-memory allocation and release calls to the driver per steady
    step (``cudaMalloc``/``cudaFree``, ``AscendCL@aclrtMalloc``/``aclrtFree``
    ...): a caching allocator that has warmed up makes none; with names."""
    return Value(_per_step(p, "alloc", "count"), {"calls": _top(p, "alloc")})


@metric("host.alloc_ms", unit="ms", needs=_NEEDS)
def alloc_ms(p: Profile) -> float:
    """Host time per steady step in device-memory allocation and release
    calls (``host.alloc_calls``)."""
    return _per_step(p, "alloc") / US_PER_MS


@metric("host.empty_cache_calls", unit="count", needs=_NEEDS)
def empty_cache_calls(p: Profile) -> float:
    """``empty_cache()`` calls of the CUDA or NPU caching allocator per
    steady step, with the program's frame that made them. Only traces with
    Python stacks show the call; without them this is not evaluated."""
    table = p.table("host_calls")
    if "frame" not in table.columns or table["frame"].isna().all():
        if not (table["cls"] == "empty_cache").any():
            raise NotEvaluated("the trace has no Python stacks (with_stack=True): empty_cache() calls "
                               "are not visible")
    return _per_step(p, "empty_cache", "count")


@metric("host.cpu_only", unit="bool", needs=["steps"])
def cpu_only(p: Profile) -> bool:
    """True on a CPU-only run (a PyTorch trace that recorded no device and
    shows no GPU job): the operators compute on the host, so host time
    inside them is the computation itself, not the cost of launching work
    on a device; False on a run with a device."""
    return p.meta.device == "cpu"


@metric("host.cpu_bf16", unit="bool", needs=[])
def cpu_bf16(p: Profile) -> bool:
    """True when the host CPU has bfloat16 arithmetic instructions (x86
    AVX512-BF16 or AMX, Arm bf16), as ``advisor run`` records them
    (``meta.cpu.bf16``); not evaluated where the profile does not say."""
    known = p.meta.cpu.bf16 if p.meta.cpu is not None else None
    if known is None:
        raise NotEvaluated("the profile does not record the CPU's bfloat16 instructions (advisor run records them)")
    return bool(known)


@metric("host.optimizer_ms", unit="ms", needs=_NEEDS)
def optimizer_ms(p: Profile) -> float:
    """Host time per step inside the optimizer's ``step()`` (the
    ``Optimizer.step#<class>.step`` annotation)."""
    _recorded(p, "optimizer", "the profile records no optimizer step (Optimizer.step#... annotation)")
    return _per_step(p, "optimizer") / US_PER_MS


def _fusable(p: Profile) -> frozenset[str]:
    """The optimizer classes with a fused implementation where ``p`` ran:
    torch_npu's on an NPU, torch.optim's elsewhere."""
    npu = p.meta.framework == "torch_npu" or p.meta.device == "ascend"
    return NPU_FUSABLE_OPTIMIZERS if npu else FUSABLE_OPTIMIZERS


def _optimizer_steps(p: Profile) -> pd.DataFrame:
    """The steady steps' optimizer ``step()`` rows, with their ``class``; memoized."""
    return p.memo("host.optimizer_steps", lambda: _optimizer_steps_of(p))


def _optimizer_steps_of(p: Profile) -> pd.DataFrame:
    _recorded(p, "optimizer", "the profile records no optimizer step (Optimizer.step#... annotation)")
    _, rows = _steady(p)
    rows = rows[rows["cls"] == "optimizer"]
    return rows.assign(**{"class": rows["name"].str.extract(OPTIMIZER_STEP_RE)["cls"]})


@metric("host.fusable_optimizer_ms", unit="ms", needs=_NEEDS)
def fusable_optimizer_ms(p: Profile) -> float:
    """Host time per step inside the ``step()`` of optimizer classes that
    have a fused implementation where the run trains (``FUSABLE_OPTIMIZERS``,
    on an NPU ``NPU_FUSABLE_OPTIMIZERS``): the part of ``host.optimizer_ms``
    a fused optimizer can take over."""
    rows = _optimizer_steps(p)
    return _mean_per_step(_steady(p)[0], rows[rows["class"].isin(_fusable(p))], "total_us") / US_PER_MS


@metric("host.fusable_optimizer_classes", unit="list", needs=_NEEDS)
def fusable_optimizer_classes(p: Profile) -> list[str]:
    """The classes of ``host.fusable_optimizer_ms``' optimizers, the one with
    the most time first: those a fix names."""
    rows = _optimizer_steps(p)
    mine = rows[rows["class"].isin(_fusable(p))]
    return [str(c) for c in mine.groupby("class")["total_us"].sum().sort_values(ascending=False, kind="stable").index]


@metric("host.optimizer_ratio", unit="ratio", needs=_NEEDS)
def optimizer_ratio(p: Profile) -> float:
    """Share of the step spent in the optimizer's ``step()``
    (``host.optimizer_ms`` over the mean step time)."""
    _recorded(p, "optimizer", "the profile records no optimizer step (Optimizer.step#... annotation)")
    return _per_step(p, "optimizer") / _step_us(p)


@metric("host.optimizer_ops", unit="count", needs=_NEEDS)
def optimizer_ops(p: Profile) -> float:
    """Elementwise, foreach and fused ops the optimizer issues per steady
    step (those of ``calls.OPTIMIZER_OP_RE``, ``FOREACH_RE`` and
    ``FUSED_OPTIMIZER_RE`` inside its ``step()``): several per parameter
    tensor in the single-tensor loop, a few per parameter group otherwise
    (the per-tensor ops a CPU runs under a foreach op are that op's work,
    not counted again)."""
    _recorded(p, "optimizer", "the profile records no optimizer step (Optimizer.step#... annotation)")
    return _per_step(p, ("optimizer_op", "optimizer_foreach", "optimizer_fused"), "count")


@metric("host.optimizer_passes", unit="count", needs=[*_NEEDS, "steps.param_tensors"])
def optimizer_passes(p: Profile) -> Value:
    """Passes the optimizer's ``step()`` makes over the parameters per
    steady step, each reading and writing them (and their state) in memory:
    its elementwise ops per parameter tensor in the single-tensor loop
    (``host.optimizer_ops`` over ``steps.param_tensors``, the step's
    gradient accumulations: SGD without momentum 1, with momentum 3-4,
    Adam about 10); its multi-tensor ops with foreach, each a pass over a
    parameter group (more than one group counts each group's); 1 fused.
    Not evaluated where the trace does not count the parameter tensors."""
    impl = optimizer_impl(p).value
    if impl == "fused":
        return Value(1.0, {"impl": impl})
    ops = optimizer_ops(p)
    if impl == "foreach":
        return Value(float(_per_step(p, "optimizer_foreach", "count")), {"impl": impl, "ops": ops})
    tensors = steady_steps(p)["param_tensors"].dropna()
    tensors = tensors[tensors > 0]
    if tensors.empty:
        raise NotEvaluated("the trace does not count the parameter tensors a step updates (gradient accumulations)")
    count = float(tensors.median())
    return Value(round(ops / count, 3), {"impl": impl, "ops": ops, "parameter_tensors": count})


@metric("host.optimizer_classes", unit="list", needs=_NEEDS)
def optimizer_classes(p: Profile) -> list[str]:
    """The optimizer classes whose ``step()`` the profile records
    (``AdamW`` of ``Optimizer.step#AdamW.step``), sorted."""
    _recorded(p, "optimizer", "the profile records no optimizer step (Optimizer.step#... annotation)")
    table = p.table("host_calls")
    names = table.loc[table["cls"] == "optimizer", "name"].unique()
    return sorted({m.group("cls") for m in map(OPTIMIZER_STEP_RE.match, names) if m})


#: Optimizers that keep a shard of the state on each rank and, after their
#: step, send each rank's updated parameters to the others (a broadcast per
#: parameter, or per bucket): PyTorch's ``ZeroRedundancyOptimizer`` and
#: DeepSpeed's ZeRO stage 1/2 optimizer.
SHARDED_OPTIMIZERS = frozenset({"ZeroRedundancyOptimizer", "DeepSpeedZeroOptimizer"})


@metric("host.sharded_optimizer", unit="text", needs=_NEEDS)
def sharded_optimizer(p: Profile) -> Value:
    """The optimizer class among ``host.optimizer_classes`` that shards its
    state across ranks (``SHARDED_OPTIMIZERS``); not evaluated when none
    does."""
    found = sorted(SHARDED_OPTIMIZERS.intersection(optimizer_classes(p)))
    if not found:
        raise NotEvaluated("no optimizer that shards its state across ranks")
    return Value(found[0])


@metric("host.optimizer_impl", unit="text", needs=_NEEDS)
def optimizer_impl(p: Profile) -> Value:
    """How the optimizer issues its kernels: ``fused`` (one kernel for all
    parameters: ``aten::_fused_adamw_``, a torch_npu ``NpuFused*``
    optimizer), ``foreach`` (multi-tensor ``aten::_foreach_*`` kernels, a
    few per parameter group) or ``per-parameter`` (neither inside its step:
    the single-tensor loop, several kernels per parameter). Evidence: the
    optimizer classes seen."""
    names = optimizer_classes(p)
    classes = set(p.table("host_calls")["cls"])
    if "optimizer_fused" in classes or (names and all("Fused" in n for n in names)):
        impl = "fused"
    elif "optimizer_foreach" in classes:
        impl = "foreach"
    else:
        impl = "per-parameter"
    return Value(impl, {"optimizers": names})


@metric("host.syncbn_calls", unit="count", needs=_NEEDS)
def syncbn_calls(p: Profile) -> Value:
    """SyncBatchNorm layers run per steady step (torch_npu's
    ``SyncBatchNorm`` op, PyTorch's ``batch_norm_gather_stats_with_counts``),
    each a cross-rank gather of the batch statistics."""
    return Value(_per_step(p, "syncbn", "count"), {"names": _top(p, "syncbn")})


@metric("host.syncbn_ms", unit="ms", needs=_NEEDS)
def syncbn_ms(p: Profile) -> float:
    """Host time per steady step in SyncBatchNorm's statistics gathering
    (``host.syncbn_calls``), its wait for the other ranks included."""
    return _per_step(p, "syncbn") / US_PER_MS


@metric("host.empty_cache_sites", unit="list", needs=_NEEDS)
def empty_cache_sites(p: Profile) -> list[dict]:
    """Where the ``empty_cache()`` calls come from: ``{"name", "per_step",
    "ms"}`` with the program's Python ``"frame"`` that made them."""
    empty_cache_calls(p)
    return _top(p, "empty_cache")


@metric("host.empty_cache_ms", unit="ms", needs=_NEEDS)
def empty_cache_ms(p: Profile) -> float:
    """Host time per steady step in ``empty_cache()`` calls
    (``host.empty_cache_calls``; not evaluated without Python stacks)."""
    empty_cache_calls(p)
    return _per_step(p, "empty_cache") / US_PER_MS


def _is(*values: str):
    return lambda v: v.strip().lower() in values


def _below(limit: int):
    def check(v: str) -> bool:
        try:
            return v.strip() != "" and int(v) < limit
        except ValueError:
            return False
    return check


#: Environment settings that cost speed: name -> (is it slow?, what it
#: should be, why). After msprof-analyze's environment checker
#: (advisor/analyzer/overall/environment_variable_checker.py,
#: ENV_SUGGEST_CONDITION, and rules/en/environment_variable_info.yaml),
#: keeping only the settings that slow a run down when set (it also lists
#: unset cache sizes and network-priority settings as information).
SLOW_ENV = {
    "ASCEND_LAUNCH_BLOCKING": (_is("1"), "unset (or 0)",
                               "every operator runs synchronously: the host waits for each one"),
    "CUDA_LAUNCH_BLOCKING": (_is("1"), "unset (or 0)",
                             "every kernel launch waits for the kernel: the host cannot run ahead"),
    "ASCEND_GLOBAL_LOG_LEVEL": (_is("0", "1"), "3 (error)",
                                "debug or info logging writes log records for every operator on the host"),
    "ASCEND_SLOG_PRINT_TO_STDOUT": (_is("1"), "0", "CANN logs are printed to the screen as they are written"),
    "TASK_QUEUE_ENABLE": (_is("0"), "1 or 2",
                          "the task queue is off: operators are launched on the Python thread, not a second one"),
    "HCCL_ALGO": (lambda v: v.strip() != "", "unset",
                  "a fixed collective algorithm overrides HCCL's choice by chip, node count and data size"),
    "ACLNN_CACHE_LIMIT": (_below(10000), "10000 or more (e.g. 100000)",
                          "a small operator cache makes aclnn rebuild operator state on the host"),
}


@metric("host.slow_env", unit="list")
def slow_env(p: Profile) -> Value:
    """Environment variables the profile records that cost speed
    (``SLOW_ENV``): ``{"name", "value", "should", "why"}`` per setting, over
    every rank (evidence: the ranks that set each). Empty when the recorded
    environment sets none of them."""
    if not p.meta.env:
        raise NotEvaluated("the profile records no environment variables (torch_npu writes them to "
                           "profiler_metadata.json)")
    found: dict[tuple[str, str], list[int]] = {}
    for rank, env in sorted(p.meta.env.items()):
        for name, (slow, _, _) in SLOW_ENV.items():
            value = env.get(name)
            if value is not None and slow(str(value)):
                found.setdefault((name, str(value)), []).append(int(rank))
    out = [{"name": n, "value": v, "should": SLOW_ENV[n][1], "why": SLOW_ENV[n][2]} for (n, v) in found]
    return Value(out, {"ranks": {f"{n}={v}": r for (n, v), r in found.items()}})


#: torch_npu's task queue (``TASK_QUEUE_ENABLE``): 0 launches every operator
#: on the Python thread, 1 hands the launch to a second thread, 2 (the
#: default from torch_npu 2.x on recent CANN) also moves part of the
#: operator's preparation there. An unset variable is the default.
TASK_QUEUE_VAR = "TASK_QUEUE_ENABLE"


@metric("host.task_queue_enable", unit="text")
def task_queue_enable(p: Profile) -> Value:
    """torch_npu's ``TASK_QUEUE_ENABLE`` as the profile's recorded
    environment sets it (``profiler_metadata.json``), ``unset`` where the
    environment is recorded without it; the lowest level over the ranks
    (evidence: the ranks per value)."""
    if not p.meta.env:
        raise NotEvaluated("the profile records no environment variables (torch_npu writes them to "
                           "profiler_metadata.json)")
    values: dict[str, list[int]] = {}
    for rank, env in sorted(p.meta.env.items()):
        value = str(env.get(TASK_QUEUE_VAR, "")).strip() or "unset"
        values.setdefault(value, []).append(int(rank))
    lowest = min(values, key=lambda v: (v == "unset", v))
    return Value(lowest, {"ranks": values})


_NO_BACKWARD = "the steady steps record no backward node (autograd::engine::evaluate_function: ...)"


@metric("host.backward_nodes", unit="count", needs=_NEEDS)
def backward_nodes(p: Profile) -> float:
    """Backward nodes the autograd engine runs per steady step
    (``autograd::engine::evaluate_function: <Node>`` events)."""
    _recorded(p, "backward", _NO_BACKWARD)
    return _per_step(p, "backward", "count")


@metric("host.nan_checks", unit="count", needs=_NEEDS)
def nan_checks(p: Profile) -> float:
    """NaN checks run inside backward nodes per steady step (``aten::isnan``
    inside ``host.backward_nodes``, ``collectors/kineto/host_calls.py``).
    Autograd's anomaly mode checks every output of every node (a node
    without outputs, such as ``AccumulateGrad``, none): about one per node;
    without it, none."""
    _recorded(p, "backward", _NO_BACKWARD)
    steady, rows = _steady(p)
    return _mean_per_step(steady, rows[(rows["cls"] == "nan_check") & (rows["name"] == "aten::isnan")], "count")


@metric("host.nan_check_ms", unit="ms", needs=_NEEDS)
def nan_check_ms(p: Profile) -> Value:
    """Host time per steady step in the NaN checks inside backward nodes
    (``host.nan_checks``): the checks and the ``.item()`` reading
    each answer, its wait for the device included. Evidence: the calls."""
    _recorded(p, "backward", _NO_BACKWARD)
    return Value(_per_step(p, "nan_check") / US_PER_MS, {"calls": _top(p, "nan_check")})


_NO_RECOMPUTE_TIME = ("the recomputed forward ops' device time is not in the profile (their host spans are only "
                      "the launching; the Kineto reader measures it from the kernels they launch)")


def _recompute_us(p: Profile) -> float:
    """Time per steady step of the forward ops run again inside backward
    nodes (``host.recompute_ms``), in us."""
    column = _recompute_column(p)
    return _per_step(p, "recompute", column) if column else 0.0


def _recompute_column(p: Profile) -> str | None:
    """The ``host_calls`` column holding the recomputed ops' time
    (``_time_column``); None when no backward node ran one."""
    _recorded(p, "backward", _NO_BACKWARD)
    return _time_column(p, "recompute", _NO_RECOMPUTE_TIME)


def _time_column(p: Profile, cls: str, unmeasured: str) -> str | None:
    """The ``host_calls`` column holding the time of the ops of ``cls``: the
    device time they launched where measured, their own time on a CPU-only
    trace (NotEvaluated(``unmeasured``) on a device trace without it); None
    when the steps ran none."""
    rows = p.table("host_calls")
    rows = rows[rows["cls"] == cls]
    if rows.empty:
        return None
    if "device_us" in rows.columns and rows["device_us"].notna().any():
        return "device_us"
    if p.meta.device != "cpu":
        raise NotEvaluated(unmeasured)
    return "total_us"


@metric("host.recompute_ms", unit="ms", needs=_NEEDS)
def recompute_ms(p: Profile) -> Value:
    """Time per steady step of forward ops run again inside backward nodes:
    activation checkpointing (``torch.utils.checkpoint``, reentrant or not)
    recomputing the blocks it wraps. Counted by the forward ops no backward
    formula calls (``collectors/kineto/calls.py`` ``RECOMPUTE_OPS``: linear
    layers, convolutions, normalizations, attention, activations), the
    outermost only: the device time they launch on a device trace, their
    own time on a CPU-only one. The recomputed blocks' other ops (residual
    adds, reshapes) are not counted, so it is a lower bound of the
    recomputation. 0 when backward nodes ran none. Evidence: the ops."""
    return Value(_recompute_us(p) / US_PER_MS, {"ops": recompute_ops(p)})


@metric("host.recompute_ops", unit="list", needs=_NEEDS)
def recompute_ops(p: Profile) -> list[dict]:
    """The forward ops run again inside backward nodes (``host.recompute_ms``),
    the most time first: ``{"name", "per_step", "ms"}``."""
    column = _recompute_column(p)
    return _top(p, "recompute", column) if column else []


@metric("host.recompute_ratio", unit="ratio", needs=_NEEDS)
def recompute_ratio(p: Profile) -> float:
    """Share of the step spent recomputing forward ops in the backward pass
    (``host.recompute_ms`` over the mean step time)."""
    return _recompute_us(p) / _step_us(p)


def _rnn_cell_column(p: Profile) -> str:
    """The ``host_calls`` column holding the recurrent cells' time
    (``_time_column``; the ops' own time when no cell ran: 0 either way)."""
    return _time_column(p, "rnn_cell", "the recurrent cells' device time is not in the profile (their host spans are "
                        "only the launching; the Kineto reader measures it from the kernels they launch)") or "total_us"


@metric("host.rnn_cell_calls", unit="count", needs=_NEEDS)
def rnn_cell_calls(p: Profile) -> float:
    """Recurrent cell ops run in forward per steady step
    (``collectors/kineto/calls.py`` ``RNN_CELL_OPS``: ``aten::lstm_cell``,
    ``aten::gru_cell``, ``aten::rnn_tanh_cell``, ``aten::rnn_relu_cell``,
    one per call of ``nn.LSTMCell``, ``nn.GRUCell`` or ``nn.RNNCell``). More
    than one is a loop over time steps in Python; ``nn.LSTM`` and the other
    sequence modules run none (their op is ``aten::lstm`` ...)."""
    return _per_step(p, "rnn_cell", "count")


@metric("host.rnn_cell_ms", unit="ms", needs=_NEEDS)
def rnn_cell_ms(p: Profile) -> float:
    """Forward time per steady step of the recurrent cell ops
    (``host.rnn_cell_calls``): the device time they launch on a device
    trace, their own time on a CPU-only one. Their backward is not counted."""
    return _per_step(p, "rnn_cell", _rnn_cell_column(p)) / US_PER_MS


@metric("host.rnn_cell_ops", unit="list", needs=_NEEDS)
def rnn_cell_ops(p: Profile) -> list[dict]:
    """The recurrent cell ops (``host.rnn_cell_ms``), the most time first:
    ``{"name", "per_step", "ms"}``."""
    return _top(p, "rnn_cell", _rnn_cell_column(p))


@metric("host.rnn_cell_ratio", unit="ratio", needs=_NEEDS)
def rnn_cell_ratio(p: Profile) -> float:
    """Share of the step in the recurrent cells' forward (``host.rnn_cell_ms``
    over the mean step time)."""
    return _per_step(p, "rnn_cell", _rnn_cell_column(p)) / _step_us(p)


#: The chains' time is the device time they launch: a device trace without
#: device operators (no ``ops`` table) cannot size them.
_CHAIN_NEEDS = [*_NEEDS, "ops.total_us"]


def _chain_column(p: Profile) -> str:
    """The ``host_calls`` column holding the fusable chains' time
    (``_time_column``; their own time when no chain ran: 0 either way)."""
    return _time_column(p, "op_chain", "the operator chains' device time is not in the profile (their host spans are "
                        "only the launching; the readers measure it from the kernels they launch, or on torch_npu "
                        "from the tasks their async_npu flows start)") or "total_us"


@metric("host.op_chain_calls", unit="count", needs=_CHAIN_NEEDS)
def op_chain_calls(p: Profile) -> float:
    """Operator chains per steady step that a fused kernel replaces
    (``collectors/kineto/op_chains.py`` ``PATTERNS``: attention written as
    matmul, scale, mask, softmax, dropout, matmul; RMSNorm as pow, mean,
    add, rsqrt, mul; SwiGLU as silu and mul; rotary embedding as neg, cat,
    mul, add), found in the order the forward calls its top-level ops."""
    return _per_step(p, "op_chain", "count")


@metric("host.op_chain_ms", unit="ms", needs=_CHAIN_NEEDS)
def op_chain_ms(p: Profile) -> float:
    """Forward time per steady step of those chains' memory passes (every
    op of a chain but the matrix products at the ends of attention): the
    device time they launch on a device trace, their own time on a CPU-only
    one. Their backward is not counted."""
    return _per_step(p, "op_chain", _chain_column(p)) / US_PER_MS


@metric("host.op_chain_saving_ms", unit="ms", needs=_CHAIN_NEEDS)
def op_chain_saving_ms(p: Profile) -> float:
    """What fusing the chains saves in forward per steady step:
    ``host.op_chain_ms`` less each chain's longest pass (a fused kernel
    still reads the chain's inputs and writes its output, at least what its
    longest pass moves)."""
    column = _chain_column(p)
    return max(_per_step(p, "op_chain", column) - _per_step(p, "op_chain_floor", column), 0.0) / US_PER_MS


@metric("host.op_chain_ratio", unit="ratio", needs=_CHAIN_NEEDS)
def op_chain_ratio(p: Profile) -> float:
    """Share of the step in the chains' forward passes (``host.op_chain_ms``
    over the mean step time)."""
    return _per_step(p, "op_chain", _chain_column(p)) / _step_us(p)


@metric("host.op_chains", unit="list", needs=_CHAIN_NEEDS)
def op_chains(p: Profile) -> list[dict]:
    """The chains by pattern, the most time first: ``{"name", "per_step",
    "ms", "api"}``, ``api`` the fused operator that replaces the pattern on
    the run's framework (``sequences.AFFINITY_API``)."""
    family = api_family(p)
    return [{**entry, "api": AFFINITY_API[entry["name"]][family]} for entry in _top(p, "op_chain", _chain_column(p))]


#: Fewer parameter tensors than this and a node type run as many times per
#: step may be a coincidence (an unrolled recurrent cell over a few weights).
MIN_PER_PARAM_TENSORS = 8
#: A node type runs once per parameter tensor when its count per step is
#: within this share of the tensors' (``AccumulateGrad``'s count).
PER_PARAM_TOLERANCE = 0.02
ACCUMULATE_NODE = "torch::autograd::AccumulateGrad"
#: Backward node types of elementwise math and reductions (autograd's
#: generated names, ``PowBackward0``): what an expression over each tensor
#: builds. A layer's own nodes (matrix products, convolutions, transposes,
#: views and splits, activations, normalizations) are none of them, and
#: also run once per parameter tensor where each layer has one (bias-free
#: linear layers, FSDP's one flat parameter per wrapped layer).
EXPRESSION_NODE = re.compile(r"(?:Pow|Mul|Add|Sub|Div|Abs|Neg|Sqrt|Rsqrt|Exp|Log|Clamp|Maximum|Minimum|Sum|Mean|Norm"
                             r"|LinalgVectorNorm|Amax|Max|Prod|Std|Var)Backward\d*")
#: The reductions among them: an expression added to a loss reduces each
#: tensor to a number, so one of its node types is a reduction.
REDUCTION_NODE = re.compile(r"(?:Sum|Mean|Norm|LinalgVectorNorm|Amax|Max|Prod|Std|Var)Backward\d*")


def _per_param_nodes(p: Profile) -> tuple[pd.DataFrame, float]:
    """(backward node types other than ``AccumulateGrad`` that run once per
    parameter tensor in the steady steps, with their ``per_step`` count and
    ``ms``; the parameter tensors per step)."""
    return p.memo("host.per_param_nodes", lambda: _once_per_tensor(p))


def _once_per_tensor(p: Profile) -> tuple[pd.DataFrame, float]:
    _recorded(p, "backward", _NO_BACKWARD)
    steady, rows = _steady(p)
    nodes = rows[rows["cls"] == "backward"]
    if nodes.empty:
        raise NotEvaluated(_NO_BACKWARD)
    steps = len(steady)
    per = nodes.groupby("name")[["count", "total_us"]].sum() / steps
    accumulate = per.index.str.endswith(ACCUMULATE_NODE)
    tensors = float(per.loc[accumulate, "count"].sum())
    if tensors < MIN_PER_PARAM_TENSORS:
        raise NotEvaluated(f"{tensors:g} gradient accumulations per step (parameter tensors); telling a "
                           f"per-parameter expression needs {MIN_PER_PARAM_TENSORS}")
    per = per[~accumulate]
    once = per[(per["count"] - tensors).abs() <= PER_PARAM_TOLERANCE * tensors]
    kinds = [str(n).removeprefix(BACKWARD_NODE_PREFIX) for n in once.index]
    expression = np.array([EXPRESSION_NODE.fullmatch(k) is not None for k in kinds], dtype=bool)
    reduced = any(REDUCTION_NODE.fullmatch(k) for k, e in zip(kinds, expression) if e)
    # elementwise nodes alone, once per tensor, are layers' (a residual add per layer)
    once = once.loc[expression] if reduced else once.iloc[0:0]
    return once.assign(per_step=once["count"], ms=once["total_us"] / US_PER_MS), tensors


@metric("host.parameter_tensors", unit="count", needs=_NEEDS)
def parameter_tensors(p: Profile) -> float:
    """Gradient accumulations per steady step (``AccumulateGrad`` backward
    nodes): the parameter tensors backward computes gradients for, times
    the backward passes per step."""
    return _per_param_nodes(p)[1]


@metric("host.per_param_nodes", unit="list", needs=_NEEDS)
def per_param_nodes(p: Profile) -> Value:
    """The backward node types of ``host.per_param_backward_ms``, most time
    first. Evidence: per step count and ms of each."""
    once, _ = _per_param_nodes(p)
    once = once.sort_values("ms", ascending=False)
    names = [str(n).removeprefix(BACKWARD_NODE_PREFIX) for n in once.index]
    return Value(names, {"nodes": [{"name": n, "per_step": round(float(r["per_step"]), 1), "ms": round(float(r["ms"]), 3)}
                                   for n, (_, r) in zip(names, once.iterrows())]})


@metric("host.per_param_backward_ms", unit="ms", needs=_NEEDS)
def per_param_backward_ms(p: Profile) -> float:
    """Backward time per steady step in node types that run once per
    parameter tensor (as many times per step as ``AccumulateGrad``, give or
    take ``PER_PARAM_TOLERANCE``; not evaluated under
    ``MIN_PER_PARAM_TENSORS`` tensors) and are elementwise math or
    reductions (``EXPRESSION_NODE``), one of them a reduction
    (``REDUCTION_NODE``): the backward of an expression computed over every
    parameter one tensor at a time, such as a weight penalty added to the
    loss (``sum(p.pow(2).sum() for p in model.parameters())``). A layer's
    own nodes are matrix products, activations and the like, and run once
    per layer. The forward of the expression is not counted."""
    return float(_per_param_nodes(p)[0]["ms"].sum())


@metric("host.per_param_backward_ratio", unit="ratio", needs=_NEEDS)
def per_param_backward_ratio(p: Profile) -> float:
    """``host.per_param_backward_ms`` as a share of the mean step time."""
    once, _ = _per_param_nodes(p)
    return float(once["total_us"].sum()) / _step_us(p)
