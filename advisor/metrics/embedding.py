"""Embedding tables whose gradient is built dense (CPU-only PyTorch
traces; ``collectors/kineto/dense_embedding.py`` has the per-step
columns).

An embedding without ``sparse=True`` gets a dense gradient: every step
zero-fills and the optimizer updates all of its rows, however few the batch
looked up. Figures are per steady step: per rank the mean over its steady
steps, then the mean over ranks.
"""

from __future__ import annotations

from advisor.metrics.registry import NotEvaluated, Value, metric
from advisor.metrics.steps_view import per_rank_mean, rank_evidence, step_ms_value, step_ratio_value
from advisor.profile import Profile

_TIME = ["steps.dense_embed_us", "steps.dense_embed_backward_us", "steps.dense_embed_optimizer_us", "steps.duration_us"]
_ROWS = ["steps.dense_embed_rows", "steps.dense_embed_lookups", "steps.dense_embed_tables"]


def _per_rank(p: Profile, name: str):
    """Each rank's steady-step mean of ``name``; NotEvaluated without values."""
    ranks = per_rank_mean(p, name)
    if ranks.empty:
        raise NotEvaluated("no embedding lookup with a dense backward in the steady steps "
                           "(CPU-only traces recorded with shapes)")
    return ranks


def _column_value(p: Profile, name: str) -> float:
    """Mean over ranks of each rank's steady-step mean of ``name``."""
    return float(_per_rank(p, name).mean())


@metric("embedding.dense_tables", unit="count", needs=_ROWS)
def dense_tables(p: Profile) -> Value:
    """Embedding tables per steady step whose gradient is built dense (a
    lookup paired with ``aten::embedding_dense_backward`` or
    ``aten::_embedding_bag_dense_backward``; tables tied to an output
    layer's weight left out). Evidence: per rank."""
    ranks = _per_rank(p, "dense_embed_tables")
    return Value(float(ranks.mean()), rank_evidence(ranks, scale=1))


@metric("embedding.dense_rows", unit="count", needs=_ROWS)
def dense_rows(p: Profile) -> float:
    """Rows of those tables, summed: what each step's dense gradient and
    optimizer update go over."""
    return _column_value(p, "dense_embed_rows")


@metric("embedding.lookup_share", unit="ratio", needs=_ROWS)
def lookup_share(p: Profile) -> float:
    """Rows the steady steps' lookups asked for (the indices' elements, an
    upper bound of the distinct rows touched) over the tables' rows: the
    share of the dense gradient a sparse one would keep. Not evaluated
    where no table has a dense backward."""
    rows = _column_value(p, "dense_embed_rows")
    if rows <= 0:
        raise NotEvaluated("no embedding table with a dense backward in the steady steps")
    return min(1.0, _column_value(p, "dense_embed_lookups") / rows)


@metric("embedding.dense_grad_ms", unit="ms", needs=_TIME)
def dense_grad_ms(p: Profile) -> Value:
    """Time per steady step in the dense gradients of embedding tables:
    ``embedding.dense_backward_ms`` plus ``embedding.dense_optimizer_ms``. Mean
    over ranks, with its standard error over steps."""
    return step_ms_value(p, "dense_embed_us")


@metric("embedding.dense_backward_ms", unit="ms", needs=_TIME)
def dense_backward_ms(p: Profile) -> Value:
    """Time per steady step in those tables' dense backward ops: zero-filling
    the whole table, then adding in the rows looked up."""
    return step_ms_value(p, "dense_embed_backward_us")


@metric("embedding.dense_optimizer_ms", unit="ms", needs=_TIME)
def dense_optimizer_ms(p: Profile) -> Value:
    """The optimizer's time per steady step apportioned to those tables:
    the optimizer ranges' time times the tables' share of the elements of
    the step's accumulated gradients (an update is a pass over every element
    it updates)."""
    return step_ms_value(p, "dense_embed_optimizer_us")


@metric("embedding.dense_grad_ratio", unit="ratio", needs=_TIME)
def dense_grad_ratio(p: Profile) -> Value:
    """``embedding.dense_grad_ms`` as a share of the mean steady step."""
    return step_ratio_value(p, "dense_embed_us")
