"""Metrics: Profile -> named, unit-bearing values with evidence.

Importing this package registers every metric (one function each, its
docstring the definition) in ``REGISTRY``, one module per namespace; the
anomaly model comes last, as it reads the steps the others describe.
"""

# Registration, in evaluation order.
from advisor.metrics import cluster, comm, data, memory, ops, step, window  # noqa: F401  isort: skip
from advisor.metrics import host  # noqa: F401  isort: skip
from advisor.metrics import pipeline  # noqa: F401  isort: skip
from advisor.metrics import kernels  # noqa: F401  isort: skip
from advisor.metrics import transfer  # noqa: F401  isort: skip
from advisor.metrics import sequences  # noqa: F401  isort: skip
from advisor.metrics import annotations  # noqa: F401  isort: skip
from advisor.metrics import critical_path  # noqa: F401  isort: skip
from advisor.metrics import counters  # noqa: F401  isort: skip
from advisor.metrics import balance  # noqa: F401  isort: skip
from advisor.metrics import trend  # noqa: F401  isort: skip
from advisor.metrics import embedding  # noqa: F401  isort: skip
from advisor.metrics import anomaly  # noqa: F401  isort: skip
from advisor.metrics.registry import (
    REGISTRY,
    MetricSpec,
    NotEvaluated,
    Value,
    evaluate,
    metric,
    metric_namespaces,
)

__all__ = ["REGISTRY", "MetricSpec", "NotEvaluated", "Value", "evaluate", "metric", "metric_namespaces"]
