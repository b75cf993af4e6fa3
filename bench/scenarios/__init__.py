"""The scenario generator: labelled synthetic cluster profiles.

``build(Spec)`` draws a training run with at most one injected fault
(``model``: the timing and fault model); ``write(scenario, out, fmt)``
writes it in a real profiler layout, placing kernels with ``layout``:
``ascend`` (text and database layouts; also small hand-described rank
folders for tests, ``RankSpec``), ``kineto`` (PyTorch profiler traces),
with ``labels.json`` beside the data. ``generate`` does both.

    python -m bench.scenarios --ranks 128 --steps 20 --fault slow-rank \\
        --seed 3 --format ascend-text -o /tmp/x
"""

from bench.scenarios.model import FAULTS, Link, Scenario, Spec, build
from bench.scenarios.output import FORMATS, generate, write

__all__ = ["FAULTS", "FORMATS", "Link", "Scenario", "Spec", "build", "generate", "write"]
