"""The metric registry's layout: one module per namespace, in a stable order."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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



def _dumped(result) -> tuple[list, list]:
    metrics, skipped = result
    return [m.model_dump() for m in metrics.values()], [s.model_dump() for s in skipped]


def test_operator_metrics_computed_in_a_forked_process_are_the_same(examples, monkeypatch):
    """``evaluate(jobs=2)`` computes the ``APART`` metrics in a forked
    process (forced here on an 8-rank example below ``APART_MIN_OPS``): the
    same metrics and skips in the same order as one process gives, and the
    same again when that process dies before sending them."""
    import os

    from advisor.collectors import load_profile
    from advisor.metrics import registry
    from advisor.runtime import forking

    def profile():
        return load_profile(examples / "resnet50_8p_overlapped", jobs=1)

    alone = _dumped(registry.evaluate(profile()))
    started = []
    beside = forking.beside
    monkeypatch.setattr(registry, "APART_MIN_OPS", 1)
    monkeypatch.setattr(forking, "beside", lambda func, p, specs: started.append(len(specs)) or beside(func, p, specs))
    assert _dumped(registry.evaluate(profile(), jobs=2)) == alone
    assert started and started[0] > 0
    monkeypatch.setattr(forking, "_run_and_send", lambda *args: os._exit(1))
    assert _dumped(registry.evaluate(profile(), jobs=2)) == alone
    assert started[-1] == started[0] and len(started) == 2


def test_a_function_run_beside_returns_its_result_or_raises_its_error():
    """``forking.beside``: the value computed in a forked process where
    forking is safe (in this process where another thread runs, as one a
    test before may leave), its exception raised again here."""
    import os

    from advisor.runtime import forking

    assert (forking.beside(os.getpid)() != os.getpid()) == forking.can_fork()
    with pytest.raises(ZeroDivisionError):
        forking.beside(divmod, 1, 0)()
