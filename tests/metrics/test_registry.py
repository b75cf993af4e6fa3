"""The metric registry's layout: one module per namespace, in a stable order."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import advisor.metrics
from advisor.metrics import REGISTRY, metric_namespaces

METRICS_DIR = Path(advisor.metrics.__file__).parent


def test_each_metric_lives_in_the_module_of_its_namespace():
    for spec in REGISTRY.values():
        if not spec.func.__module__.startswith("advisor.metrics."):
            continue  # a metric a test registers for itself
        module = spec.func.__module__.rsplit(".", 1)[-1]
        assert spec.id.split(".")[0] == module, f"{spec.id} is defined in metrics/{module}.py"


def test_every_namespace_has_its_module():
    for namespace in metric_namespaces():
        assert (METRICS_DIR / f"{namespace}.py").is_file()


def test_registration_order_is_the_same_in_every_process():
    code = "import advisor.metrics as m; print(' '.join(m.REGISTRY))"
    runs = {tuple(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True).stdout.split()) for _ in range(2)}
    (order,) = runs
    assert list(order) == [mid for mid in REGISTRY if mid in order]

