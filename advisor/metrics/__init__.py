"""Metrics: Profile -> named, unit-bearing values with evidence.

Importing this package registers every metric (one function each, its
docstring the definition) in ``REGISTRY``.
"""

from advisor.metrics import cluster, comm, data, ops, step  # noqa: F401  (registration)
from advisor.metrics import pipeline  # noqa: F401  (pipeline-parallel stages)
from advisor.metrics import device  # noqa: F401  (device idle split, copies, short kernels, tensor cores)
from advisor import anomaly  # noqa: F401,E402  (the anomaly model registers anomaly.* metrics)
from advisor.metrics.registry import REGISTRY, MetricSpec, NotEvaluated, Value, evaluate, metric

__all__ = ["REGISTRY", "MetricSpec", "NotEvaluated", "Value", "evaluate", "metric"]
