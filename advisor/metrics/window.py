"""The measured window: how much of it is one-time start-up, whether its
steps were cut by the recording, and whether its device record can
support device-utilisation figures.

Start-up (``warmup_us`` and the ``warmup`` table; Kineto) is work a process
does once: context creation, torch.compile compiling, slow first calls,
first-use allocator growth. Warm-up steps are left out of the steady steps
when a rank has others (``steps_view``); when every step is warm-up, the
per-step figures would turn start-up into a per-step cost.

The guards here are the one place that decides whether device-utilisation
figures (free, idle, host-wait and launch-gap shares, their causes) can be
evaluated: :func:`device_record_gap` returns the one-line reason they
cannot (start-up, a sparse device record, device events without their
launches), :func:`startup_gap` the start-up part alone (for figures that
are not the device's but would still turn start-up into a per-step cost).
A guard whose evidence is absent (a source without these columns) does not
object: missing evidence is not evidence of a problem.
"""

from __future__ import annotations

import pandas as pd

from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import (
    US_PER_MS,
    WARMUP_STEP_SHARE,
    rank_evidence,
    steady_steps,
)
from advisor.profile import Profile, compile_id_parts, is_recompilation

#: A window without step markers holding at least this share of start-up
#: cannot be told from a steady state: start-up cannot be separated from the
#: steps in it, and a tenth of the window is enough to decide rules whose
#: thresholds are 10-20% shares of the step.
UNMARKED_WARMUP_SHARE = 0.1
#: Fewer device operations per step than this cannot describe a training
#: step: forward, backward and the optimizer update each launch at least a
#: few kernels per layer, so a real step has dozens to thousands. Below it
#: the trace is a toy, a micro-benchmark or cut by hand, and its idle time is
#: the gaps between a handful of kernels, not a utilisation figure.
MIN_DEVICE_OPS_PER_STEP = 20
#: Below this share of device operations whose launching runtime call is in
#: the trace, the trace was cut or sampled: the host side of its device work
#: is missing, so its device idle gaps are not the device's.
MIN_LAUNCH_MATCH_RATIO = 0.5
#: One-time items named in evidence and reasons.
TOP_ITEMS = 5
#: How to leave start-up out of a profile.
PROFILE_LATER = ("profile later steps: torch.profiler.schedule(wait=..., warmup=...), "
                 "advisor run --warmup N, or start profiling after compilation")


def _time(us: float) -> str:
    """A duration for a reason string: 24.6 s, 179 ms, 0.25 ms."""
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    return f"{us / US_PER_MS:.3g} ms"


def _kind(kind: str) -> str:
    return {"init": "start-up call", "compile": "torch.compile", "first_call": "slow first call",
            "alloc": "allocator growth"}.get(kind, kind)


def _items(p: Profile, limit: int = TOP_ITEMS) -> list[dict]:
    """The longest one-time items of the ``warmup`` table."""
    table = p.table("warmup")
    if table is None:
        return []
    top = table.nlargest(limit, "duration_us")
    many = table["rank"].nunique() > 1
    out = []
    for _, row in top.iterrows():
        item = {"name": str(row["name"]), "kind": str(row["kind"]),
                "ms": round(float(row["duration_us"]) / US_PER_MS, 3),
                "step": None if pd.isna(row["step"]) else int(row["step"])}
        if many:
            item["rank"] = int(row["rank"])
        out.append(item)
    return out


def _named_items(p: Profile) -> str:
    """': cudaDeviceGetStreamPriorityRange 24.6 s (start-up call), ...', or ''."""
    named = ", ".join(f"{i['name']} {_time(i['ms'] * US_PER_MS)} ({_kind(i['kind'])})" for i in _items(p, 3))
    return f": {named}" if named else ""


def _share(steps: pd.DataFrame) -> float | None:
    """Start-up share of ``steps``: per rank, summed warm-up over summed
    duration; mean over ranks."""
    if "warmup_us" not in steps.columns or steps.empty:
        return None
    per_rank = steps.groupby("rank")[["warmup_us", "duration_us"]].sum()
    per_rank = per_rank[per_rank["duration_us"] > 0]
    if per_rank.empty:
        return None
    return float((per_rank["warmup_us"] / per_rank["duration_us"]).mean())


def steady_warmup_share(p: Profile) -> float | None:
    """Start-up share of the steady steps (those the per-step metrics use);
    None without ``warmup_us``."""
    return p.memo("steady_warmup_share", lambda: _share(steady_steps(p)))


def _unmarked(p: Profile) -> bool:
    steps = p.table("steps")
    return steps is not None and ("step" not in steps.columns or steps["step"].isna().all())


def startup_gap(p: Profile) -> str | None:
    """Why per-step figures of ``p`` would be start-up, or None: the steps
    they average over are mostly start-up, or a window without step markers
    holds ``UNMARKED_WARMUP_SHARE`` of it."""
    share = steady_warmup_share(p)
    if share is None:
        return None
    if share >= WARMUP_STEP_SHARE:
        return f"the window is mostly start-up ({share:.0%}{_named_items(p)}); {PROFILE_LATER}"
    if share >= UNMARKED_WARMUP_SHARE and _unmarked(p):
        return (f"the window has no step markers and {share:.0%} of it is start-up{_named_items(p)}: no "
                f"steady state can be told apart; {PROFILE_LATER}, calling prof.step() every step")
    return None


def _per_rank_device_ops(p: Profile) -> pd.Series | None:
    steps = steady_steps(p)
    if "device_ops" not in steps.columns or steps["device_ops"].isna().all():
        return None
    return steps.groupby("rank")["device_ops"].median().dropna()


def _per_rank_launch_match(p: Profile) -> pd.Series | None:
    steps = steady_steps(p)
    cols = ["device_ops", "device_ops_launched"]
    if any(c not in steps.columns for c in cols) or steps[cols].isna().all().any():
        return None
    sums = steps.groupby("rank")[cols].sum()
    sums = sums[sums["device_ops"] > 0]
    return sums["device_ops_launched"] / sums["device_ops"]


def device_record_gap(p: Profile) -> str | None:
    """Why device-utilisation figures (free, idle, host-wait and launch-gap
    shares and their causes) cannot be evaluated on ``p``, or None: the
    window is start-up (:func:`startup_gap`), its device record is too
    sparse for a training step (fewer than ``MIN_DEVICE_OPS_PER_STEP``
    device operations per steady step), or most device operations lack
    their launch (under ``MIN_LAUNCH_MATCH_RATIO``)."""
    return p.memo("device_record_gap", lambda: _device_record_gap(p))


def _device_record_gap(p: Profile) -> str | None:
    reason = startup_gap(p)
    if reason:
        return reason
    ops = _per_rank_device_ops(p)
    if ops is not None and not ops.empty and float(ops.mean()) < MIN_DEVICE_OPS_PER_STEP:
        return (f"device activity is too sparse to describe a training step: {float(ops.mean()):g} device "
                f"operations per step (a training step launches at least {MIN_DEVICE_OPS_PER_STEP}): a toy, "
                "a micro-benchmark or a cut trace")
    match = _per_rank_launch_match(p)
    if match is not None and not match.empty and float(match.mean()) < MIN_LAUNCH_MATCH_RATIO:
        return (f"only {float(match.mean()):.0%} of the device operations have the runtime call that launched "
                "them in the trace: a cut or sampled trace, whose device idle time is not the device's")
    return None


def require_device_record(p: Profile) -> None:
    """NotEvaluated with :func:`device_record_gap`'s reason, if any."""
    reason = device_record_gap(p)
    if reason:
        raise NotEvaluated(reason)


def require_steady_window(p: Profile) -> None:
    """NotEvaluated with :func:`startup_gap`'s reason, if any."""
    reason = startup_gap(p)
    if reason:
        raise NotEvaluated(reason)


# ---------------------------------------------------------------- metrics


@metric("window.warmup_ms", unit="ms", needs=["steps.warmup_us"])
def warmup_ms(p: Profile) -> Value:
    """One-time start-up recorded in the profiled window: context creation
    and other start-up calls, torch.compile compiling, slow first calls
    (an op's first call far slower than its repeats: autotuning, lazy
    loading) and allocator growth the later steps do not repeat. Per rank
    the total over every profiled step (not per step: it happens once),
    mean over ranks. The evidence names the longest items (``items``: call
    or op, kind, ms, step), the time by kind and the warm-up steps the
    per-step metrics left out."""
    steps = p.table("steps")
    total = steps.groupby("rank")["warmup_us"].sum()
    evidence = {"items": _items(p), "warmup_steps": _warmup_steps(p)}
    table = p.table("warmup")
    if table is not None:
        by_kind = table.groupby("kind")["duration_us"].sum() / US_PER_MS
        evidence["by_kind_ms"] = {str(k): round(float(v), 3) for k, v in by_kind.items()}
    evidence.update(rank_evidence(total))
    return Value(float(total.mean()) / US_PER_MS, evidence)


def _warmup_steps(p: Profile) -> list[int]:
    """Ids of the warm-up steps left out of the steady steps."""
    steps = p.table("steps")
    warm = steps[(steps["warmup_us"].fillna(0) >= WARMUP_STEP_SHARE * steps["duration_us"]) & steps["step"].notna()]
    kept = steady_steps(p).index
    return sorted({int(s) for s in warm.loc[~warm.index.isin(kept), "step"]})


@metric("window.warmup_ratio", unit="ratio", needs=["steps.warmup_us", "steps.duration_us"])
def warmup_ratio(p: Profile) -> Value:
    """Share of the profiled window that is one-time start-up (see
    ``window.warmup_ms``): per rank, start-up time over the summed duration
    of every profiled step, mean over ranks. ``steady_ratio`` in the
    evidence is the same share over the steady steps only (those the
    per-step metrics average over): at ``WARMUP_STEP_SHARE`` (0.5) or more,
    no steady step was profiled."""
    value = _share(p.table("steps"))
    if value is None:
        raise NotEvaluated("no steps with a positive duration")
    return Value(value, {"steady_ratio": steady_warmup_share(p), "items": _items(p, 3)})


@metric("window.steady_warmup_ratio", unit="ratio", needs=["steps.warmup_us", "steps.duration_us"])
def steady_warmup_ratio(p: Profile) -> Value:
    """Share of the steady steps (those the per-step metrics average over)
    that is one-time start-up. Warm-up steps are left out when a rank has
    other steps, so this is at least ``WARMUP_STEP_SHARE`` (0.5) only when
    every profiled step is mostly start-up: then per-step device and idle
    figures are not evaluated."""
    value = steady_warmup_share(p)
    if value is None:
        raise NotEvaluated("no steps with a positive duration")
    return Value(value)


#: torch._dynamo's default ``recompile_limit`` (``cache_size_limit`` before
#: torch 2.6): a frame compiled this many times is not compiled again, and
#: its later calls with guards no compilation passes run uncompiled.
DEFAULT_RECOMPILE_LIMIT = 8


def _recompile_rows(p: Profile) -> pd.DataFrame:
    """The ``warmup`` rows of recompilations (compile id ``F/C`` with C of 1
    or more), with integer ``frame`` and ``count``: none when the window
    has no start-up at all (the reader that wrote ``steps.recompile_us``
    looked for it); NotEvaluated when it compiled but no compilation names
    its id (torch before 2.4 writes none)."""
    table = p.table("warmup")
    if table is None or "compile_id" not in table.columns:
        table = pd.DataFrame({"rank": [], "step": [], "kind": [], "compile_id": [], "duration_us": []})
    rows = table[table["compile_id"].notna()]
    if rows.empty and (table["kind"] == "compile").any():
        raise NotEvaluated("torch.compile compiled in the window, but its records name no compile id "
                           "(torch 2.4 or later writes them): recompilations cannot be told from first ones")
    rows = rows[rows["compile_id"].map(is_recompilation).astype(bool)]
    parts = pd.DataFrame([compile_id_parts(c) for c in rows["compile_id"]], index=rows.index,
                         columns=["frame", "count"], dtype=int)
    return rows.assign(frame=parts["frame"], count=parts["count"])


@metric("window.recompiles", unit="count", needs=["steps.recompile_us"])
def recompiles(p: Profile) -> Value:
    """torch.compile recompilations in the profiled window: compilations of
    a frame it had compiled before (compile id ``F/C`` with C of 1 or more:
    a guard failed -- a new input shape, dtype, device or Python value),
    counted once each (forward and backward of one compilation are one);
    the most on any rank. Evidence: that rank's compile ids and the steps
    they ran in."""
    rows = _recompile_rows(p)
    if rows.empty:
        return Value(0, {"compile_ids": [], "steps": []})
    per_rank = rows.groupby("rank")["compile_id"].nunique()
    rank = int(per_rank.idxmax())
    mine = rows[rows["rank"] == rank]
    ids = sorted(set(mine["compile_id"]), key=compile_id_parts)
    return Value(int(per_rank.max()), {
        "rank": rank, "compile_ids": ids, "steps": sorted({int(s) for s in mine["step"].dropna()})})


@metric("window.recompile_steps", unit="count", needs=["steps.recompile_us"])
def recompile_steps(p: Profile) -> float:
    """Profiled steps in which torch.compile recompiled one frame
    (``window.recompiles``), the most for any frame on any rank:
    recompilations of a frame in step after step are a guard that keeps
    failing (shapes that change every step); two frames recompiled once
    each are the one-time recompilations that mark a dimension dynamic."""
    rows = _recompile_rows(p).dropna(subset=["step"])
    return float(rows.groupby(["rank", "frame"])["step"].nunique().max()) if not rows.empty else 0.0


@metric("window.recompile_limit_reached", unit="bool", needs=["steps.recompile_us"])
def recompile_limit_reached(p: Profile) -> Value:
    """Whether a frame was compiled ``DEFAULT_RECOMPILE_LIMIT`` (8) times
    or more (compile id ``F/8``): torch._dynamo then stops compiling it, and
    its calls whose guards no compilation passes run uncompiled (unless the
    limit was raised). Evidence: the frames."""
    rows = _recompile_rows(p)
    frames = sorted({int(f) for f in rows.loc[rows["count"] >= DEFAULT_RECOMPILE_LIMIT, "frame"]})
    return Value(bool(frames), {"frames": frames})


@metric("window.recompile_ms", unit="ms", needs=["steps.recompile_us", "steps.duration_us"])
def recompile_ms(p: Profile) -> Value:
    """Time per profiled step torch.compile spends recompiling
    (``window.recompiles``): per rank the recompilations' time over every
    profiled step divided by their number, mean over ranks. The steady
    steps leave compile time out as start-up; recompilations that recur
    cost this much a step for as long as their guards keep failing."""
    steps = p.table("steps")
    per_rank = steps.groupby("rank").agg(us=("recompile_us", "sum"), n=("duration_us", "size"))
    value = per_rank["us"] / per_rank["n"]
    return Value(float(value.mean()) / US_PER_MS, rank_evidence(value))


#: A frame recompiled in at least this many profiled steps recompiles
#: again and again (a guard that keeps failing); once, it is the one-time
#: recompilation that marks a dimension dynamic (automatic dynamic shapes).
RECURRING_STEPS = 2


@metric("window.recompile_ratio", unit="ratio", needs=["steps.recompile_us", "steps.duration_us"])
def recompile_ratio(p: Profile) -> float:
    """Share of the profiled window torch.compile spends recompiling frames
    it recompiles in ``RECURRING_STEPS`` (2) or more profiled steps: per
    rank, their compile time over the summed duration of every profiled
    step, mean over ranks. It is part of ``window.warmup_ratio``, yet not
    start-up: profiling later steps does not leave it out."""
    steps = p.table("steps")
    total = steps.groupby("rank")["duration_us"].sum()
    total = total[total > 0]
    if total.empty:
        raise NotEvaluated("no steps with a positive duration")
    rows = _recompile_rows(p).dropna(subset=["step"])
    spread = rows.groupby(["rank", "frame"])["step"].transform("nunique") if len(rows) else rows["step"]
    recurring = rows[spread >= RECURRING_STEPS].groupby("rank")["duration_us"].sum()
    return float((recurring.reindex(total.index, fill_value=0.0) / total).mean())


@metric("window.truncated_steps", unit="count", needs=["steps.truncated"])
def truncated_steps(p: Profile) -> Value:
    """Step rows whose ``ProfilerStep#N`` annotation lies mostly outside what
    the profiler recorded (a last step running past the end of the
    recording, a trace cut by hand): their duration is clipped to the
    recorded span and the steady-state metrics leave them out when another
    step is whole. The evidence lists them per rank."""
    steps = p.table("steps")
    cut = steps[steps["truncated"].fillna(False).astype(bool)]
    per_rank = {int(r): sorted(int(s) for s in g["step"].dropna()) for r, g in cut.groupby("rank")}
    left_out = cut.index.difference(steady_steps(p).index)
    return Value(len(cut), {"steps": per_rank, "left_out": len(left_out)})


@metric("window.device_ops_per_step", unit="count", needs=["steps.device_ops"])
def device_ops_per_step(p: Profile) -> Value:
    """Device operations (kernels, copies, sets) per step: per rank, the
    median over its steady steps of the device events starting in the step;
    mean over ranks. A training step launches dozens to thousands; fewer
    than ``MIN_DEVICE_OPS_PER_STEP`` (20) is a toy, a micro-benchmark or a
    cut trace, and device-utilisation figures are then not evaluated."""
    per_rank = _per_rank_device_ops(p)
    if per_rank is None or per_rank.empty:
        raise NotEvaluated("no steady steps with a device-operation count")
    return Value(float(per_rank.mean()), rank_evidence(per_rank, scale=1.0))


@metric("window.launch_match_ratio", unit="ratio", needs=["steps.device_ops", "steps.device_ops_launched"])
def launch_match_ratio(p: Profile) -> Value:
    """Share of the device operations of the steady steps whose launching
    runtime call (same correlation id) is in the trace; per rank, mean over
    ranks. A whole trace has nearly all; below ``MIN_LAUNCH_MATCH_RATIO``
    (0.5) it was cut or sampled and device-utilisation figures are not
    evaluated."""
    per_rank = _per_rank_launch_match(p)
    if per_rank is None or per_rank.empty:
        raise NotEvaluated("no device operations in the steady steps")
    return Value(float(per_rank.mean()), rank_evidence(per_rank, scale=1.0))


@metric("window.warmup_items", unit="list", needs=["warmup.duration_us"])
def warmup_items(p: Profile) -> Value:
    """The longest one-time start-up items of the profiled window (at most
    5): each its call or op (``name``), ``kind`` (init: context creation and
    other start-up calls; compile: torch.compile; first_call: an op's first
    call far slower than its repeats; alloc: allocator growth later steps do
    not repeat), ``ms`` and the ``step`` it starts in."""
    return Value(_items(p))


@metric("window.warmup_steps", unit="list", needs=["steps.warmup_us", "steps.step"])
def warmup_steps(p: Profile) -> Value:
    """Ids of the warm-up steps (at least half one-time start-up) that the
    per-step metrics left out because the rank has other steps."""
    return Value(_warmup_steps(p))
