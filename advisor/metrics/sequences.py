"""Repeated kernel sequences worth fusing (the ``kernel_sequences`` table).

Per rank, the *top* sequence is the repeated contiguous kernel sequence
whose gaps -- the device-idle time between its kernels, which fusing it
into one kernel removes -- exceed its kernels' own time by the most per
step: the chain whose launches cost most beyond its work. A window that
also takes in a long kernel (a matmul beside a chain of small ones) has
more gap time but less excess, so the chain itself is named; a kernel
joins the top sequence only when the gap beside it outlasts it. Figures are that
sequence's, per step (its totals over the profiled steps / their number),
then the mean over ranks. The evidence names the sequence of the rank
where it costs most, and the known operator pattern it matches, if any,
with the fused (affinity) API that replaces it.
"""

from __future__ import annotations

import re

import pandas as pd

from advisor.collectors.kernel_sequences import JOIN
from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import US_PER_MS, per_rank_mean, rank_evidence
from advisor.profile import Profile

_NEEDS = ["kernel_sequences.kernels", "kernel_sequences.gap_us", "kernel_sequences.device_us"]

#: Known operator chains with a fused API, as (name, kernel-name patterns
#: that must all occur in the sequence). The patterns match both CUDA
#: kernel names (``pow_tensor_scalar_kernel``, ``rsqrt_kernel``,
#: ``silu_kernel``, ``softmax_warp_forward``) and Ascend operator types
#: (``Pow``, ``ReduceMean``, ``Rsqrt``, ``Swish``, ``SoftmaxV2``).
PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("RMSNorm", (r"mean", r"rsqrt", r"mul")),
    ("rotary embedding", (r"neg", r"\bcat|concat", r"mul")),
    ("SwiGLU", (r"silu|swish", r"mul")),
    ("softmax attention", (r"softmax", r"matmul|bmm|gemm")),
)
#: The fused API of each pattern, per framework family (msprof-analyze's
#: timeline_fusion_ops.yaml affinity APIs for torch_npu; the PyTorch and
#: MindSpore built-ins on the others; MindSpore has no GeGLU operator, its
#: graph-kernel fusion fuses the chain).
AFFINITY_API: dict[str, dict[str, str]] = {
    "RMSNorm": {"torch_npu": "torch_npu.npu_rms_norm", "pytorch": "torch.nn.functional.rms_norm under torch.compile",
                "mindspore": "mindspore.ops.rms_norm"},
    "rotary embedding": {"torch_npu": "torch_npu.npu_rotary_mul",
                         "pytorch": "a fused rotary kernel (flash_attn.layers.rotary) or torch.compile",
                         "mindspore": "mindspore.ops.rotary_position_embedding"},
    "SwiGLU": {"torch_npu": "torch_npu.npu_swiglu", "pytorch": "torch.compile of silu(x) * y",
               "mindspore": "mindspore.ops.swiglu"},
    "GeGLU": {"torch_npu": "torch_npu.npu_geglu", "pytorch": "torch.compile of x * gelu(gate)",
              "mindspore": "graph-kernel fusion (jit_config jit_level O1)"},
    "softmax attention": {"torch_npu": "torch_npu.npu_fusion_attention",
                          "pytorch": "torch.nn.functional.scaled_dot_product_attention",
                          "mindspore": "mindspore.ops.flash_attention_score"},
}


#: A kernel name shown in a message is cut to this many characters.
SHORT_NAME = 60
#: Generic ATen CUDA kernel templates: their functor argument names the operation.
_GENERIC = re.compile(r"(?:vectorized_|unrolled_)?elementwise_kernel(?:_with_index)?|reduce_kernel")
#: The functor or implementation inside a generic kernel's template arguments.
_FUNCTOR = re.compile(r"\b(\w*(?:Functor\w*|Ops|Impl|_impl|_kernel_cuda|_kernel))\b")
#: Functor wrappers around the one that names the operation.
_WRAPPERS = frozenset({"BinaryFunctor", "AUnaryFunctor", "BUnaryFunctor"})


def short_name(kernel: str) -> str:
    """A kernel name fit for a message: a generic ATen kernel as its
    functor (``vectorized_elementwise_kernel<MulFunctor>``), any other cut
    to ``SHORT_NAME`` characters."""
    generic = _GENERIC.search(kernel)
    if generic:
        for m in _FUNCTOR.finditer(kernel, generic.end()):
            if not _GENERIC.fullmatch(m.group(1)) and m.group(1) not in _WRAPPERS:
                return f"{generic.group(0)}<{m.group(1)}>"
    return kernel if len(kernel) <= SHORT_NAME else kernel[:SHORT_NAME - 3] + "..."


def pattern_of(kernels: str) -> str | None:
    """The known pattern (``PATTERNS``) each of whose parts some kernel of
    the sequence (``JOIN``-joined names) matches, or None. Names are
    matched in their short form (``short_name``: a long CUDA name's
    template arguments mention unrelated words), and a kernel already
    fused (``fused`` in its name, as Inductor's and the fused operators'
    are) is not part of an unfused chain."""
    names = [short_name(k).lower() for k in kernels.split(JOIN)]
    names = [n for n in names if "fused" not in n]
    for name, parts in PATTERNS:
        if all(any(re.search(part, n) for n in names) for part in parts):
            return name
    return None


def api_family(p: Profile) -> str:
    """The ``AFFINITY_API`` column of a run: torch_npu, mindspore or pytorch."""
    if p.meta.framework == "mindspore":
        return "mindspore"
    return "torch_npu" if p.meta.device == "ascend" else "pytorch"


def _top(p: Profile) -> pd.DataFrame:
    """Per rank, its top sequence's row (index: rank) with per-step figures:
    the one whose gaps exceed its kernel time by the most."""
    return p.memo("sequences_top", lambda: _compute_top(p))


def _compute_top(p: Profile) -> pd.DataFrame:
    seq = p.table("kernel_sequences")
    if "by_gap" in seq.columns:  # kept for their memory-transfer time alone: see mte_top_* below
        seq = seq[seq["by_gap"].fillna(True).astype(bool)]
    steps = seq["steps"].clip(lower=1)
    seq = seq.assign(gap_step_us=seq["gap_us"] / steps, device_step_us=seq["device_us"] / steps,
                     repeats=seq["count"] / steps, excess=(seq["gap_us"] - seq["device_us"]) / steps)
    seq = seq.sort_values(["excess", "length"], ascending=False, kind="stable")
    top = seq.drop_duplicates("rank").set_index("rank")
    if top.empty:
        raise NotEvaluated("no repeated kernel sequence")
    return top


def _evidence(p: Profile, column: str, scale: float = 1 / US_PER_MS) -> dict:
    top = _top(p)
    worst = top["gap_step_us"].idxmax()
    row = top.loc[worst]
    pattern = pattern_of(row["kernels"])
    ev = {"kernels": row["kernels"], "length": int(row["length"]), "rank": int(worst),
          "repeats_per_step": round(float(row["repeats"]), 1)}
    if pattern:
        ev["pattern"] = pattern
        ev["affinity_api"] = AFFINITY_API[pattern][api_family(p)]
    ev.update(rank_evidence(top[column], scale))
    return ev


@metric("sequences.top_gap_ms", unit="ms", needs=_NEEDS)
def top_gap_ms(p: Profile) -> Value:
    """Device-idle time per step in the gaps between the kernels of the
    top repeated kernel sequence (each gap once, over all its occurrences):
    the launch and host cost that fusing the sequence into one kernel
    removes, never more than the time its occurrences span. Mean over
    ranks; the evidence names the sequence of the rank where it is largest."""
    top = _top(p)
    return Value(float(top["gap_step_us"].mean()) / US_PER_MS, _evidence(p, "gap_step_us"))


@metric("sequences.top_device_ms", unit="ms", needs=_NEEDS)
def top_device_ms(p: Profile) -> Value:
    """Kernel time per step of the top repeated kernel sequence (each
    kernel once over its occurrences), mean over ranks."""
    top = _top(p)
    return Value(float(top["device_step_us"].mean()) / US_PER_MS, rank_evidence(top["device_step_us"]))


@metric("sequences.top_repeats", unit="count", needs=_NEEDS)
def top_repeats(p: Profile) -> Value:
    """Occurrences per step of the top repeated kernel sequence
    (overlapping ones included, as HTA and msprof-analyze count), mean over
    ranks."""
    top = _top(p)
    return Value(float(top["repeats"].mean()), rank_evidence(top["repeats"], 1.0))


@metric("sequences.top_busy_ratio", unit="ratio", needs=_NEEDS)
def top_busy_ratio(p: Profile) -> Value:
    """Share of the top repeated sequence's span its kernels run: kernel
    time / (kernel time + the gaps between them), mean over ranks. Low
    means the sequence is bound by its launches (the host), not by its
    kernels (msprof-analyze's fusible-operator ``host bound`` test)."""
    top = _top(p)
    span = top["device_step_us"] + top["gap_step_us"]
    ratio = (top["device_step_us"] / span)[span > 0]
    if ratio.empty:
        raise NotEvaluated("the top sequence spans no time")
    return Value(float(ratio.mean()), rank_evidence(ratio, 1.0))


@metric("sequences.top_gap_ratio", unit="ratio", needs=[*_NEEDS, "steps.duration_us"])
def top_gap_ratio(p: Profile) -> Value:
    """Share of the step the top repeated sequence's gaps take: per rank,
    its gap time per step / the rank's mean steady step time, mean over
    ranks."""
    top = _top(p)
    step = per_rank_mean(p, "duration_us").reindex(top.index)
    ratio = (top["gap_step_us"] / step)[step > 0].dropna()
    if ratio.empty:
        raise NotEvaluated("no step time for the ranks with kernel sequences")
    return Value(float(ratio.mean()), rank_evidence(ratio, 1.0))


def shown(kernels: str) -> str:
    """A sequence (``JOIN``-ed kernel names) as a message shows it: each
    name shortened (``short_name``), a run of one kernel as ``name xN``."""
    names = [short_name(k) for k in kernels.split(JOIN)]
    runs: list[list] = []
    for name in names:
        if runs and runs[-1][0] == name:
            runs[-1][1] += 1
        else:
            runs.append([name, 1])
    return JOIN.join(name if n == 1 else f"{name} x{n}" for name, n in runs)


@metric("sequences.top_sequence", unit="text", needs=_NEEDS)
def top_sequence(p: Profile) -> Value:
    """The kernels of the top repeated sequence of the rank where its gaps
    take the most time per step, in device order (``shown``)."""
    ev = _evidence(p, "gap_step_us")
    return Value(shown(ev["kernels"]), ev)


@metric("sequences.affinity_api", unit="text", needs=_NEEDS)
def affinity_api(p: Profile) -> Value:
    """The fused API that replaces the top repeated sequence when it is a
    known operator chain (``PATTERNS``: RMSNorm, rotary embedding, SwiGLU,
    softmax attention), for the profile's framework; empty otherwise."""
    ev = _evidence(p, "gap_step_us")
    return Value(ev.get("affinity_api", ""), {"pattern": ev.get("pattern", "")})


@metric("sequences.top_distinct", unit="count", needs=_NEEDS)
def top_distinct(p: Profile) -> Value:
    """Distinct kernels in the top repeated sequence (the rank where its
    gaps take the most time per step): 1 is one kernel launched again and
    again, the mark of a per-tensor loop (``zero_grad`` filling each
    gradient, an optimizer without foreach) rather than a chain of
    different operators."""
    ev = _evidence(p, "gap_step_us")
    return Value(len(set(ev["kernels"].split(JOIN))), {"rank": ev["rank"]})


# ---------------------------------------------------------------- sequences bound by memory transfer

#: A sequence is bound by memory transfer when its kernels' MTE time (the
#: ``kernel_sequences`` ``mte_us``) exceeds this share of their busy time
#: (``pipe_us``): msprof-analyze's fusible_operator.yaml ``mte_threshold``.
MTE_BOUND_SHARE = 0.8
_MTE_NEEDS = ["kernel_sequences.kernels", "kernel_sequences.mte_us", "kernel_sequences.pipe_us"]


def _mte_top(p: Profile) -> pd.DataFrame:
    """Per rank (index) the MTE top sequence's row with per-step figures."""
    return p.memo("sequences_mte_top", lambda: _compute_mte_top(p))


def _compute_mte_top(p: Profile) -> pd.DataFrame:
    seq = p.table("kernel_sequences")
    seq = seq[seq["pipe_us"].fillna(0) > 0]
    if seq.empty:
        raise NotEvaluated("no repeated kernel sequence with AI Core pipe times (PipeUtilization)")
    steps = seq["steps"].clip(lower=1)
    seq = seq.assign(mte_share=seq["mte_us"] / seq["pipe_us"], mte_step_us=seq["mte_us"] / steps,
                     device_step_us=seq["device_us"] / steps, repeats=seq["count"] / steps)
    seq = seq.assign(bound=seq["mte_share"] > MTE_BOUND_SHARE)
    seq = seq.sort_values(["bound", "mte_step_us", "length"], ascending=False, kind="stable")
    return seq.drop_duplicates("rank").set_index("rank")


@metric("sequences.mte_top_ratio", unit="ratio", needs=_MTE_NEEDS)
def mte_top_ratio(p: Profile) -> Value:
    """Memory-transfer share of the MTE top sequence: per rank, among its
    repeated kernel sequences (``kernel_sequences``, Ascend kernels with pipe
    times) those bound by memory transfer (MTE time above
    ``MTE_BOUND_SHARE`` of their cores' busy time, msprof-analyze's
    fusible-operator MTE test), the one with the most MTE time per step, or
    when none is, the one with the most MTE time; its MTE time over its busy
    time, mean over ranks. The load (MTE2) and store (MTE3 / FIXPIPE) pipes
    run at once, so the figure can exceed 1 (as msprof-analyze's does). The
    evidence names the sequence of the rank where its MTE time is largest."""
    top = _mte_top(p)
    worst = top["mte_step_us"].idxmax()
    evidence = {"kernels": top.loc[worst, "kernels"], "rank": int(worst),
                "repeats_per_step": round(float(top.loc[worst, "repeats"]), 1)}
    evidence.update(rank_evidence(top["mte_share"], scale=1.0))
    return Value(float(top["mte_share"].mean()), evidence)


@metric("sequences.mte_top_ms", unit="ms", needs=_MTE_NEEDS)
def mte_top_ms(p: Profile) -> Value:
    """Memory-transfer time per step of the MTE top sequence
    (``sequences.mte_top_ratio``; its kernels' MTE2 loads and MTE3 / FIXPIPE
    stores, each kernel once), mean over ranks: what fusing the sequence
    works on, as its intermediates stay on the chip."""
    return Value(float(_mte_top(p)["mte_step_us"].mean()) / US_PER_MS)


@metric("sequences.mte_top_device_ms", unit="ms", needs=_MTE_NEEDS)
def mte_top_device_ms(p: Profile) -> Value:
    """Kernel time per step of the MTE top sequence (``sequences.mte_top_ratio``),
    mean over ranks."""
    return Value(float(_mte_top(p)["device_step_us"].mean()) / US_PER_MS)


@metric("sequences.mte_top_repeats", unit="count", needs=_MTE_NEEDS)
def mte_top_repeats(p: Profile) -> Value:
    """Occurrences per step of the MTE top sequence (``sequences.mte_top_ratio``),
    mean over ranks."""
    return Value(float(_mte_top(p)["repeats"].mean()))


@metric("sequences.mte_top_sequence", unit="text", needs=_MTE_NEEDS)
def mte_top_sequence(p: Profile) -> Value:
    """The MTE top sequence (``sequences.mte_top_ratio``) of the rank where
    its MTE time is largest (``shown``)."""
    top = _mte_top(p)
    return Value(shown(str(top.loc[top["mte_step_us"].idxmax(), "kernels"])))
