"""Ascend kernel metrics: AI CPU operators, dynamic-shape operators,
matrix and attention operators with unaligned shapes, operators bound
by memory transfer rather than compute (the AI Core pipe busy times), and
block dims that leave cores idle (against the device's core count).

They read the ``ops`` table's Ascend columns (``core``, ``op_state``,
``input_shapes`` and the ``aic_*_us`` / ``aiv_*_us`` pipe times of
``kernel_details.csv``); a profile without a column leaves the metric not
evaluated, never zero. Communication operators are left out as in
:mod:`advisor.metrics.ops`. Time per step is an operator class's total over
the profiled window divided by the rank's number of steps, mean over ranks.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from advisor.metrics.ops import TOP_NAMES, _compute_ops
from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import US_PER_MS, per_step_ms, rank_evidence
from advisor.profile import Profile

#: Accelerator core of AI CPU operators, as ``kernel_details.csv`` writes it.
AI_CPU = "AI_CPU"
#: Input dtypes AI Core kernels rarely implement, so an operator given them
#: falls back to AI CPU: 64-bit floats and complex numbers (msprof-analyze's
#: aicpu_rules.yaml lists the dtypes each AI Core operator supports; float64
#: is its "double" suggestion, "convert double type operator to float").
AICPU_PRONE_DTYPES = re.compile(r"\b(?:DOUBLE|FLOAT64|COMPLEX64|COMPLEX128)\b")
#: OP State value of a dynamic-shape operator (kernel_details.csv).
DYNAMIC = "dynamic"

#: Matrix-multiply operator types whose inner axes the alignment check reads
#: (convolutions have 5-D NC1HWC0 shapes and are left out).
MATMUL_TYPE = re.compile(r"matmul|gemm|gemv", re.IGNORECASE)
#: Attention operator types whose head dimension the alignment check reads.
ATTENTION_TYPE = re.compile(r"flashattention|fusionattention|fusedinferattention", re.IGNORECASE)
#: A matrix operator runs at full cube efficiency when the inner (last) axis
#: of both inputs is a multiple of this: msprof-analyze's AI Core performance
#: check (aicore_performance.yaml ``cube_affinity_desc``, "inner axis is not
#: divisible by 256"). The cube unit's fractal is 16 x 16 (float16) elements;
#: 256-element rows also fill whole 512-byte bursts of the MTE2 transfer.
MATMUL_INNER_ALIGN = 256
#: An attention operator is affine when its head dimension is a multiple of
#: this (aicore_performance.yaml ``fa_affinity_desc_head_dim_128``).
ATTENTION_HEAD_ALIGN = 128
#: The last two axes of a FRACTAL_NZ shape (already tiled, aligned by construction).
NZ_FRACTAL = (16, 16)
#: An unaligned axis counts only when padding it to the next multiple grows
#: it by at most this share: aligning is assumed to save about a tenth of the
#: operator's time (``unaligned-matmul``'s ``expected_saving``), and padding
#: that adds more work than that loses more than it gains. A vocabulary of
#: 50257 (+0.3% to 50432) or an inner axis of 15365 (+1.6%) count; a head
#: dimension of 64 (+300% to 256 in a BatchMatMul, +100% to 128 in an
#: attention operator) does not: only another model layout changes it.
MAX_PAD_SHARE = 0.125

#: A pipe part (cube or vector) is bound by memory transfer when an MTE pipe
#: (MTE2 in, MTE3 / FIXPIPE out) is busy at least this share of the part's
#: time: msprof-analyze's aicore_performance.yaml bound thresholds for vector
#: operators (aiv_mte2_ratio, aiv_mte3_ratio: 0.7).
TRANSFER_BOUND = 0.7
#: ... while its compute pipe (MAC for cube, vector for vector) is busy less
#: than this share: the vector-bound threshold of the same file (aiv_vec_ratio
#: 0.7). A part busy on both is well used, not starved by memory.
COMPUTE_BUSY = 0.7


def _ascend(p: Profile) -> None:
    """NotEvaluated on a profile of another device: AI CPU and the cube's
    tile alignment are Ascend's (a GPU trace has neither, and its shapes are
    written differently)."""
    if p.meta.device not in ("ascend", "unknown"):
        raise NotEvaluated(f"an Ascend check; this profile is of a {p.meta.device} device")


def _per_step(p: Profile, ops: pd.DataFrame, mask: pd.Series) -> float:
    """Time per step of the ``mask`` operators among ``ops``, mean over ranks."""
    per_rank = ops[mask].groupby("rank")["total_us"].sum().reindex(ops["rank"].unique(), fill_value=0.0)
    return per_step_ms(p, per_rank)


def _share(ops: pd.DataFrame, mask: pd.Series) -> float:
    """Share of compute-operator time in ``mask``, per rank, mean over ranks."""
    total = ops.groupby("rank")["total_us"].sum()
    part = ops[mask].groupby("rank")["total_us"].sum().reindex(total.index, fill_value=0.0)
    return float((part / total)[total > 0].mean())


def _top(ops: pd.DataFrame, mask: pd.Series, keys: list[str], extra=None) -> list[dict]:
    """The heaviest ``mask`` operators grouped by ``keys``: key values and ms
    over the window (summed over ranks), plus ``extra(group rows)``."""
    keys = [k for k in keys if k in ops.columns]
    rows = []
    chosen = ops[mask]
    totals = chosen.groupby(keys, dropna=False)["total_us"].sum().nlargest(TOP_NAMES)
    for key, total in totals.items():
        key = key if isinstance(key, tuple) else (key,)
        row = {k: (None if pd.isna(v) else str(v)) for k, v in zip(keys, key)}
        row["total_ms"] = round(float(total) / US_PER_MS, 3)
        if extra is not None:
            sel = np.logical_and.reduce([chosen[k].astype(str) == str(v) for k, v in zip(keys, key)
                                         if not pd.isna(v)] or [np.ones(len(chosen), bool)])
            row.update(extra(chosen[sel]))
        rows.append(row)
    return rows


# ---------------------------------------------------------------- AI CPU


def _aicpu(p: Profile) -> tuple[pd.DataFrame, pd.Series]:
    _ascend(p)
    ops = _compute_ops(p)
    return ops, ops["core"].astype(str).str.upper().str.replace(" ", "_") == AI_CPU


@metric("kernels.aicpu_ms", unit="ms", needs=["ops.total_us", "ops.core"])
def aicpu_ms(p: Profile) -> Value:
    """AI CPU operator time per step: the total time of operators whose
    accelerator core is AI_CPU over the profiled window / the rank's number
    of steps, mean over ranks. The evidence lists the heaviest by type with
    their input dtypes, and ``float64_types``: AI CPU operator types given
    64-bit float or complex inputs (``AICPU_PRONE_DTYPES``), which AI Core
    kernels rarely implement."""
    ops, mask = _aicpu(p)
    evidence: dict = {"ops": _top(ops, mask, ["type", "input_dtypes"])}
    if "input_dtypes" in ops.columns:
        prone = mask & ops["input_dtypes"].fillna("").astype(str).str.contains(AICPU_PRONE_DTYPES)
        evidence["float64_types"] = sorted({str(t) for t in ops.loc[prone, "type"]})
    return Value(_per_step(p, ops, mask), evidence)


@metric("kernels.aicpu_max_us", unit="us", needs=["ops.max_us", "ops.core"])
def aicpu_max_us(p: Profile) -> Value:
    """The longest single AI CPU operator launch in the profile (us; 0 when
    no operator ran on AI CPU)."""
    ops, mask = _aicpu(p)
    longest = ops.loc[mask, "max_us"].max() if mask.any() else 0.0
    if pd.isna(longest):
        raise NotEvaluated("AI CPU operators without a longest launch")
    return Value(float(longest))


# ---------------------------------------------------------------- dynamic shape


def _states(p: Profile) -> tuple[pd.DataFrame, pd.Series]:
    ops = _compute_ops(p)
    state = ops["op_state"] if "op_state" in ops.columns else pd.Series(np.nan, index=ops.index)
    known = state.notna() & (state.astype(str).str.strip() != "")
    if not known.any():
        raise NotEvaluated("no operator records its OP State")
    return ops[known], state[known].astype(str).str.strip().str.lower() == DYNAMIC


@metric("kernels.dynamic_ratio", unit="ratio", needs=["ops.op_state", "ops.total_us"])
def dynamic_ratio(p: Profile) -> Value:
    """Share of compute-operator time in operators that ran as dynamic-shape
    kernels (``OP State`` dynamic in ``kernel_details.csv``), among the
    operators that record their state, per rank, mean over ranks; 1.0 when
    no operator ran as a static kernel. Not evaluated when the profile does
    not record OP State (CANN before 8.0, or an older kernel_details.csv):
    no value is guessed. The evidence counts dynamic and static operator
    types and lists the heaviest dynamic ones."""
    ops, dynamic = _states(p)
    kinds = "type" if "type" in ops.columns else "name"
    return Value(_share(ops, dynamic), {
        "dynamic_types": int(ops.loc[dynamic, kinds].nunique()),
        "static_types": int(ops.loc[~dynamic, kinds].nunique()),
        "ops": [r["type"] for r in _top(ops, dynamic, [kinds]) if r.get(kinds)] if kinds == "type" else [],
    })


@metric("kernels.dynamic_ms", unit="ms", needs=["ops.op_state", "ops.total_us"])
def dynamic_ms(p: Profile) -> Value:
    """Device time per step of dynamic-shape operators (see
    ``kernels.dynamic_ratio``). It is where their kernels ran, not the
    compilation or tiling the host spent on them, which the kernel record
    does not hold."""
    ops, dynamic = _states(p)
    return Value(_per_step(p, ops, dynamic))


#: Steps a rank's kernels must cover before shapes can be said to vary
#: between steps: with two, a start-up step's one-time operators would look
#: like shapes that changed.
VARYING_MIN_STEPS = 3


def _varying(p: Profile) -> tuple[pd.DataFrame, pd.Series]:
    """Compute operators of ranks with enough steps, and the mask of those
    whose (name, type, dtypes, shapes) ran in fewer steps than the rank's
    most regular operator."""
    ops = _compute_ops(p)
    ops = ops[ops["steps"].notna()]
    ref = ops.groupby("rank")["steps"].transform("max")
    ops = ops[ref >= VARYING_MIN_STEPS]
    if ops.empty:
        raise NotEvaluated(f"fewer than {VARYING_MIN_STEPS} steps of kernels: shapes cannot be compared "
                           "between steps")
    return ops, ops["steps"] < ref[ops.index]


@metric("kernels.varying_shape_ratio", unit="ratio", needs=["ops.steps", "ops.total_us"])
def varying_shape_ratio(p: Profile) -> Value:
    """Share of compute-operator time in operators whose input shapes change
    between steps: an operator group (name, type, dtypes, input shapes) that
    ran in fewer steps than the rank's most regular operator group (the
    weight update runs every step with the same shapes). Per rank, mean
    over ranks; needs kernels with step ids over at least 3 steps. A
    training loop with fixed shapes gives 0; variable sequence lengths or a
    changing batch give each step its own shapes. The evidence names the
    heaviest such operator types and how many distinct shape sets each had."""
    ops, varying = _varying(p)
    kinds = "type" if "type" in ops.columns else "name"
    shapes = ops[varying].groupby(kinds)["input_shapes"].nunique() if "input_shapes" in ops.columns else None
    top = [r[kinds] for r in _top(ops, varying, [kinds]) if r.get(kinds)]
    return Value(_share(ops, varying), {
        "ops": top,
        "shape_sets": {t: int(shapes[t]) for t in top} if shapes is not None else {},
        "steps": int(ops["steps"].max()),
    })


# ---------------------------------------------------------------- unaligned shapes


def _dims(shape: str) -> list[int] | None:
    """``"8192,15365"`` -> [8192, 15365]; None when empty or not all integers."""
    parts = [s.strip() for s in shape.strip().strip('"').split(",")]
    if not parts or not all(s.lstrip("-").isdigit() for s in parts):
        return None
    return [int(s) for s in parts]


def _paddable(axis: int, align: int) -> bool:
    """``axis`` is not a multiple of ``align`` and padding it to the next
    one grows it by at most ``MAX_PAD_SHARE``."""
    pad = -axis % align
    return 0 < pad <= MAX_PAD_SHARE * axis


def unaligned_reason(op_type: str, shapes: str | None) -> str | None:
    """Why an operator's shapes are unaligned, or None: a matrix multiply
    whose inputs' inner axis is not a multiple of ``MATMUL_INNER_ALIGN``
    (FRACTAL_NZ shapes skipped), an attention operator whose query's last
    axis (its head dimension, or heads x head dimension: either way not a
    multiple when the head dimension is not) is not a multiple of
    ``ATTENTION_HEAD_ALIGN``; in either, only an axis a short pad from the
    next multiple (``MAX_PAD_SHARE``)."""
    if not isinstance(shapes, str) or not shapes:
        return None
    inputs = [_dims(s) for s in shapes.split(";")]
    if ATTENTION_TYPE.search(op_type):
        query = inputs[0] if inputs else None
        if query and len(query) >= 3 and _paddable(query[-1], ATTENTION_HEAD_ALIGN):
            return f"query last axis {query[-1]} not a multiple of {ATTENTION_HEAD_ALIGN}"
        return None
    if not MATMUL_TYPE.search(op_type):
        return None
    axes = [d for d in inputs[:2] if d and len(d) >= 2 and tuple(d[-2:]) != NZ_FRACTAL]
    bad = sorted({d[-1] for d in axes if _paddable(d[-1], MATMUL_INNER_ALIGN)})
    if bad:
        return f"inner axis {', '.join(map(str, bad))} not a multiple of {MATMUL_INNER_ALIGN}"
    return None


def _unaligned(p: Profile) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """(compute operators, unaligned mask, reason per operator); memoized."""
    _ascend(p)
    ops = _compute_ops(p)
    return p.memo("kernels.unaligned", lambda: _unaligned_ops(ops))


def _unaligned_ops(ops: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    kind = (ops["type"] if "type" in ops.columns else ops["name"]).astype(str)
    shapes = ops["input_shapes"].astype(object).where(ops["input_shapes"].notna(), "")
    codes, pairs = pd.MultiIndex.from_arrays([kind, shapes]).factorize()  # each distinct pair judged once
    reasons = np.array([unaligned_reason(k, s) for k, s in pairs], dtype=object)
    reason = pd.Series(reasons[codes], index=ops.index)
    return ops, reason.notna(), reason


def _mac_share(rows: pd.DataFrame) -> dict:
    if "aic_mac_us" not in rows.columns or not (rows["aicore_us"].fillna(0) > 0).any():
        return {}
    return {"mac_ratio": round(float(rows["aic_mac_us"].sum() / rows["aicore_us"].sum()), 3)}


@metric("kernels.unaligned_matrix_ratio", unit="ratio", needs=["ops.input_shapes", "ops.total_us"])
def unaligned_matrix_ratio(p: Profile) -> Value:
    """Share of compute-operator time in matrix-multiply and attention
    operators with unaligned shapes (``unaligned_reason``: a MatMul inner
    axis not a multiple of 256, an attention head dimension not a multiple
    of 128, either a short pad from the next multiple), per rank, mean over
    ranks. The evidence lists the heaviest with
    their shapes, the reason and, where the profile records pipe times, the
    share of their cube time the MAC pipe was busy."""
    ops, mask, reason = _unaligned(p)
    ops = ops.assign(_reason=reason)
    top = _top(ops, mask, ["type", "input_shapes", "input_dtypes", "_reason"],
               extra=_mac_share if "aicore_us" in ops.columns else None)
    for row in top:
        row["reason"] = row.pop("_reason")
    return Value(_share(ops, mask), {"ops": top})


@metric("kernels.unaligned_matrix_ms", unit="ms", needs=["ops.input_shapes", "ops.total_us"])
def unaligned_matrix_ms(p: Profile) -> Value:
    """Time per step in matrix-multiply and attention operators with
    unaligned shapes (see ``kernels.unaligned_matrix_ratio``)."""
    ops, mask, _ = _unaligned(p)
    return Value(_per_step(p, ops, mask))


# ---------------------------------------------------------------- memory-bound operators


def _part_bound(busy: pd.Series, compute: pd.Series, transfers: list[pd.Series]) -> pd.Series:
    """Per operator: the pipe part ran (busy > 0) and was transfer bound
    (``TRANSFER_BOUND``, ``COMPUTE_BUSY``)."""
    busy = busy.fillna(0.0)
    safe = busy.where(busy > 0, np.nan)
    transfer = pd.concat([t.fillna(0.0) for t in transfers], axis=1).max(axis=1) / safe
    return (busy > 0) & (transfer >= TRANSFER_BOUND) & (compute.fillna(0.0) / safe < COMPUTE_BUSY)


def _part_used(busy: pd.Series) -> pd.Series:
    return busy.fillna(0.0) > 0


def _memory_bound(p: Profile) -> tuple[pd.DataFrame, pd.Series]:
    ops = _compute_ops(p)
    cube_cols = ("aicore_us", "aic_mac_us", "aic_mte2_us")
    vec_cols = ("aiv_us", "aiv_vec_us", "aiv_mte2_us")
    has_cube = all(c in ops.columns for c in cube_cols)
    has_vec = all(c in ops.columns for c in vec_cols)
    if not (has_cube or has_vec):
        raise NotEvaluated("no AI Core pipe times (aic_*/aiv_* time columns) in this profile")
    measured = pd.Series(False, index=ops.index)
    bound = pd.Series(True, index=ops.index)
    if has_cube:
        out = [ops[c] for c in ("aic_mte2_us", "aic_fixpipe_us") if c in ops.columns]
        used = _part_used(ops["aicore_us"])
        bound &= ~used | _part_bound(ops["aicore_us"], ops["aic_mac_us"], out)
        measured |= used
    if has_vec:
        out = [ops[c] for c in ("aiv_mte2_us", "aiv_mte3_us") if c in ops.columns]
        used = _part_used(ops["aiv_us"])
        bound &= ~used | _part_bound(ops["aiv_us"], ops["aiv_vec_us"], out)
        measured |= used
    if not measured.any():
        raise NotEvaluated("no operator with AI Core pipe times")
    return ops[measured], (bound & measured)[measured]


def _pipe_shares(rows: pd.DataFrame) -> dict:
    out = {}
    for part, base, pipes in (("cube", "aicore_us", ("aic_mac_us", "aic_mte2_us")),
                              ("vector", "aiv_us", ("aiv_vec_us", "aiv_mte2_us", "aiv_mte3_us"))):
        if base in rows.columns and rows[base].fillna(0).sum() > 0:
            total = rows[base].sum()
            out[part] = {c.split("_", 1)[1][:-3]: round(float(rows[c].sum() / total), 3)
                         for c in pipes if c in rows.columns}
    return out


@metric("kernels.memory_bound_ratio", unit="ratio", needs=["ops.total_us", "ops.core"])
def memory_bound_ratio(p: Profile) -> Value:
    """Share of the time of operators with AI Core pipe times spent in
    operators bound by memory transfer: in every pipe part the operator uses
    (cube: aicore time, vector: aiv time), an MTE pipe moving data between
    global memory and the core (MTE2 in; MTE3 or FIXPIPE out) is busy at
    least ``TRANSFER_BOUND`` (0.7) of the part's time while its compute pipe
    (MAC, vector) is busy less than ``COMPUTE_BUSY`` (0.7). Per rank, mean
    over ranks; operator times are summed over launches (Ascend
    PipeUtilization times, ``kernel_details.csv``). The evidence lists the
    heaviest by type with their pipe shares."""
    ops, mask = _memory_bound(p)
    return Value(_share(ops, mask), {"ops": _top(ops, mask, ["type"], extra=_pipe_shares)})


@metric("kernels.memory_bound_ms", unit="ms", needs=["ops.total_us", "ops.core"])
def memory_bound_ms(p: Profile) -> Value:
    """Time per step in operators bound by memory transfer (see
    ``kernels.memory_bound_ratio``)."""
    ops, mask = _memory_bound(p)
    return Value(_per_step(p, ops, mask))


# ---------------------------------------------------------------- block dim


#: Accelerator cores whose kernels spread their blocks over the device's
#: cores: the task types msprof-analyze's block-dim check judges
#: (block_dim_checker.py).
CUBE_CORE = "AI_CORE"
VECTOR_CORE = "AI_VECTOR_CORE"
MIX_CORE = "MIX_AIC"


def idle_share(blocks: pd.Series, cores: pd.Series) -> pd.Series:
    """Share of the cores idle in a kernel's last wave, over its waves: a
    kernel of ``b`` blocks on ``n`` cores runs ``ceil(b / n)`` waves of
    ``n`` core slots, ``b`` of them busy: ``1 - b / (n * ceil(b / n))``; 0
    when ``b`` is a multiple of ``n``."""
    return 1.0 - blocks / (cores * np.ceil(blocks / cores))


def _block_dims(p: Profile) -> pd.DataFrame:
    """Compute operators on AI Core, AI Vector or MIX_AIC with a block dim on
    ranks whose device core count is known, with ``_blocks``, ``_cores`` (the
    count their blocks spread over) and ``_idle`` (``idle_share``). Blocks
    and cores as msprof-analyze pairs them: AI_CORE block dim on the AI
    Cores; AI_VECTOR_CORE on the vector cores (the AI Cores where the device
    gives no vector count); MIX_AIC its Mix Block Dim on the vector cores
    where both are recorded, else its block dim (the cube blocks) on the AI
    Cores."""
    _ascend(p)
    if not p.meta.ai_core_num:
        raise NotEvaluated("the device's core count is not recorded (no PROF_*/device_*/info.json.* with "
                           "DeviceInfo ai_core_num); it is not guessed from the chip name")
    ops = _compute_ops(p)
    if "block_dim" not in ops.columns:
        raise NotEvaluated("no operator records its Block Dim")
    core = ops["core"].astype(str).str.upper().str.replace(" ", "_")
    aic = ops["rank"].map(p.meta.ai_core_num).astype(float)
    aiv = ops["rank"].map(p.meta.aiv_num).astype(float)
    mix = ops["mix_block_dim"].astype(float) if "mix_block_dim" in ops.columns else pd.Series(np.nan, ops.index)
    blocks = ops["block_dim"].astype(float)
    cores = aic.where(core == CUBE_CORE, aiv.fillna(aic).where(core == VECTOR_CORE))
    use_mix = (core == MIX_CORE) & mix.gt(0) & aiv.gt(0)
    blocks = blocks.where(~use_mix, mix)
    cores = cores.where(core != MIX_CORE, aiv.where(use_mix, aic))
    ok = blocks.gt(0) & cores.gt(0)
    if not ok.any():
        raise NotEvaluated("no AI Core, AI Vector or MIX_AIC operator with a block dim on a rank whose core "
                           "count is recorded")
    ops = ops[ok].assign(_blocks=blocks[ok], _cores=cores[ok])
    return ops.assign(_idle=idle_share(ops["_blocks"], ops["_cores"]))


def _block_top(ops: pd.DataFrame) -> list[dict]:
    """The operator types (with block dim and cores) whose idle cores cost most."""
    ops = ops.assign(_idle_us=ops["total_us"] * ops["_idle"])
    kinds = "type" if "type" in ops.columns else "name"
    groups = ops[ops["_idle"] > 0].groupby([kinds, "core", "_blocks", "_cores"], dropna=False)
    sums = groups[["_idle_us", "total_us"]].sum().nlargest(TOP_NAMES, "_idle_us")
    return [{"type": str(kind), "core": str(core), "block_dim": int(b), "cores": int(n),
             "idle_share": round(1.0 - b / (n * np.ceil(b / n)), 3),
             "total_ms": round(float(row["total_us"]) / US_PER_MS, 3),
             "idle_ms": round(float(row["_idle_us"]) / US_PER_MS, 3)}
            for (kind, core, b, n), row in sums.iterrows()]


def _ranks_per_step(p: Profile, ops: pd.DataFrame, values: pd.Series) -> float:
    per_rank = values.groupby(ops["rank"]).sum().reindex(ops["rank"].unique(), fill_value=0.0)
    return per_step_ms(p, per_rank)


@metric("kernels.block_dim_idle_ms", unit="ms", needs=["ops.block_dim", "ops.total_us", "ops.core"])
def block_dim_idle_ms(p: Profile) -> Value:
    """Core time left idle by block dims that are not a multiple of the
    core count, per step: over AI Core, AI Vector and MIX_AIC operators
    (``_block_dims`` pairs blocks with cores), the sum of operator time x
    ``idle_share`` (the idle share of the last wave, spread over the
    waves) / the rank's steps, mean over ranks with a recorded core count.
    A bound on what spreading the same work over every core could save.
    Not evaluated without the device's core count (info.json) or block
    dims. The evidence lists the heaviest operator types with their block
    dim, cores, idle share and time."""
    ops = _block_dims(p)
    return Value(_ranks_per_step(p, ops, ops["total_us"] * ops["_idle"]),
                 {"ops": _block_top(ops), "ai_core_num": sorted(set(p.meta.ai_core_num.values())),
                  "aiv_num": sorted(set(p.meta.aiv_num.values()))})


@metric("kernels.block_dim_underfilled_ms", unit="ms", needs=["ops.block_dim", "ops.total_us", "ops.core"])
def block_dim_underfilled_ms(p: Profile) -> Value:
    """Time per step of the operators whose block dim is not a multiple of
    their core count (see ``kernels.block_dim_idle_ms``): the time the idle
    cores sit in."""
    ops = _block_dims(p)
    return Value(_ranks_per_step(p, ops, ops["total_us"].where(ops["_idle"] > 0, 0.0)))


# ---------------------------------------------------------------- the operators, named


def _named(rows: list[dict], fmt) -> list[str]:
    return [fmt(r) for r in rows]


@metric("kernels.aicpu_ops", unit="list", scope="op", needs=["ops.total_us", "ops.core"])
def aicpu_ops(p: Profile) -> Value:
    """The heaviest AI CPU operator types with their input dtypes, as
    ``Type(DTYPES)``, heaviest first (``kernels.aicpu_ms`` evidence)."""
    ops, mask = _aicpu(p)
    rows = _top(ops, mask, ["type", "input_dtypes"])
    return Value(_named(rows, lambda r: f"{r.get('type')}({r.get('input_dtypes') or '?'})"))


@metric("kernels.unaligned_ops", unit="list", scope="op", needs=["ops.input_shapes", "ops.total_us"])
def unaligned_ops(p: Profile) -> Value:
    """The heaviest matrix and attention operators with unaligned shapes, as
    ``Type [shapes]: reason`` (``kernels.unaligned_matrix_ratio`` evidence)."""
    ops, mask, reason = _unaligned(p)
    rows = _top(ops.assign(_reason=reason), mask, ["type", "input_shapes", "_reason"])
    return Value(_named(rows, lambda r: f"{r.get('type')} [{r.get('input_shapes')}]: {r.get('_reason')}"))


@metric("kernels.memory_bound_ops", unit="list", scope="op", needs=["ops.total_us", "ops.core"])
def memory_bound_ops(p: Profile) -> Value:
    """The heaviest operator types bound by memory transfer
    (``kernels.memory_bound_ratio``), heaviest first."""
    ops, mask = _memory_bound(p)
    return Value([r["type"] for r in _top(ops, mask, ["type"]) if r.get("type")])


# ---------------------------------------------------------------- AI Core clock


@metric("kernels.aicore_freq_drop", unit="ratio", needs=["device_freq.mhz", "device_freq.time_us"])
def aicore_freq_drop(p: Profile) -> Value:
    """How far the AI Core clock ran below its highest recorded frequency:
    the time-weighted mean of (highest - f) / highest over the recorded
    samples, each holding until the next (the clock is recorded when it
    changes: trace_view.json "AI Core Freq" counter, the AICORE_FREQ table),
    per rank, mean over ranks. The highest sample stands for the nominal
    clock: a run throttled over its whole window shows no drop. The evidence
    gives the lowest and highest MHz and the share of the sampled time below
    the highest."""
    freq = p.table("device_freq").dropna(subset=["time_us", "mhz"]).sort_values(["rank", "time_us"])
    drops, below, lows, highs = {}, {}, [], []
    for rank, f in freq.groupby("rank"):
        top = float(f["mhz"].max())
        if top <= 0:
            continue
        gaps = f["time_us"].diff().shift(-1).fillna(0.0).clip(lower=0.0)
        weights = gaps if gaps.sum() > 0 else pd.Series(1.0, index=f.index)
        drop = (top - f["mhz"]) / top
        drops[rank] = float((drop * weights).sum() / weights.sum())
        below[rank] = float(weights[f["mhz"] < top].sum() / weights.sum())
        lows.append(float(f["mhz"].min()))
        highs.append(top)
    if not drops:
        raise NotEvaluated("no AI Core frequency samples")
    series = pd.Series(drops)
    evidence = {"min_mhz": min(lows), "max_mhz": max(highs),
                "below_max_share": round(float(pd.Series(below).mean()), 4)}
    evidence.update(rank_evidence(series, scale=1.0))
    return Value(float(series.mean()), evidence)


@metric("kernels.block_dim_ops", unit="list", scope="op", needs=["ops.block_dim", "ops.total_us", "ops.core"])
def block_dim_ops(p: Profile) -> Value:
    """The operator types whose block dims leave the most core time idle, as
    ``Type (block dim b on n cores, x% idle)`` (``kernels.block_dim_idle_ms``
    evidence)."""
    rows = _block_top(_block_dims(p))
    return Value(_named(rows, lambda r: f"{r['type']} (block dim {r['block_dim']} on {r['cores']} cores, "
                                        f"{r['idle_share']:.0%} idle)"))
