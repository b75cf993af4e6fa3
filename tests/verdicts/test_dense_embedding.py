"""dense-embedding-grad on real CPU training loops (``advisor run``,
PyTorch's profiler, OMP_NUM_THREADS=1).

A 400 000 x 64 ``nn.Embedding`` looked up 2048 times a step under Adam
builds its gradient dense: measured here, the backward zero-filled the whole
table (~45 ms) and the fused optimizer updated every row (~18 ms) of a 74 ms
step, while the same loop with ``sparse=True`` and ``SparseAdam`` took
12.5 ms; the run used to be called clean. A table the batch covers whole, a
sparse one and one tied to the output layer have nothing to save.
"""

from __future__ import annotations

import pytest

from tests._profiled import needs_torch, profiled, value
from advisor.collectors.kineto.dense_embedding import _pairs

SCRIPT = """
import sys, torch
from torch import nn

torch.manual_seed(0)
kind, steps = sys.argv[1], int(sys.argv[2])
rows = {"small-table": 2000, "tied": 50000}.get(kind, 400000)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(rows, 64, sparse=kind == "sparse")
        self.mlp = nn.Sequential(nn.Linear(64 * 8, 256), nn.ReLU(), nn.Linear(256, 64))

    def forward(self, ids):
        h = self.mlp(self.emb(ids).flatten(1))
        if kind == "tied":  # scores over the vocabulary with the embedding's own weight
            return nn.functional.linear(h, self.emb.weight)
        return h


model = Model()
if kind == "sparse":
    opts = [torch.optim.SparseAdam(list(model.emb.parameters())), torch.optim.Adam(model.mlp.parameters())]
else:
    opts = [torch.optim.Adam(model.parameters(), fused=True)]
lossf = nn.CrossEntropyLoss()
for step in range(steps):
    ids, y = torch.randint(0, rows, (256, 8)), torch.randint(0, 64, (256,))
    for opt in opts:
        opt.zero_grad()
    lossf(model(ids), y).backward()
    for opt in opts:
        opt.step()
"""
RULE = "dense-embedding-grad"


def _run(tmp_path, kind: str) -> dict:
    report, _ = profiled(tmp_path, SCRIPT, kind, 9, steps=6, warmup=2)
    return report


@needs_torch
def test_a_large_table_looked_up_sparsely_is_named_with_its_dense_work(tmp_path):
    report = _run(tmp_path, "dense")
    found = {f["rule"]: f for f in report["findings"]}
    assert RULE in found, [(k, v["value"]) for k, v in report["metrics"].items() if k.startswith("embed.")]
    f = found[RULE]
    assert f["severity"] in {"high", "critical"} and report["verdict"]["status"] == "problems"
    assert value(report, "embedding.dense_tables") == 1 and value(report, "embedding.dense_rows") == 400000
    assert value(report, "embedding.lookup_share") == pytest.approx(2048 / 400000)
    backward, optimizer = value(report, "embedding.dense_backward_ms"), value(report, "embedding.dense_optimizer_ms")
    assert backward > 0 and optimizer > 0
    assert value(report, "embedding.dense_grad_ms") == pytest.approx(backward + optimizer, rel=1e-3)
    # the gain is the dense work less the rows looked up, within the step
    assert f["estimated_gain_ms"] <= value(report, "embedding.dense_grad_ms") <= value(report, "step.time_ms")
    assert "sparse=True" in f["fix"]["code"] and "SparseAdam" in f["fix"]["code"]
    assert "400000 rows" in f["message"] and "2048 rows" in f["message"]


@needs_torch
@pytest.mark.parametrize("kind", ["sparse", "small-table", "tied"])
def test_tables_with_nothing_to_save_stay_quiet(tmp_path, kind):
    report = _run(tmp_path, kind)
    assert RULE not in {f["rule"] for f in report["findings"]}
    metrics = report["metrics"]
    if kind == "sparse":  # no dense backward at all
        assert "embedding.dense_grad_ms" not in metrics or metrics["embedding.dense_grad_ms"]["value"] is None
    elif kind == "small-table":  # the batch asks for more rows than the table has
        assert value(report, "embedding.lookup_share") == 1.0 and value(report, "embedding.dense_rows") == 2000
    else:  # the table is the output layer's weight: its gradient is dense whatever the lookup does
        assert value(report, "embedding.dense_tables") == 0 and value(report, "embedding.dense_grad_ms") == 0


def test_backward_calls_pair_with_their_lookups_in_reverse_order():
    # two tables of the same width looked up with the same indices shape: the
    # first backward undoes the last lookup
    shapes = [((1000, 16), (32, 4)), ((500, 16), (32, 4)), ((32, 4, 16), (32, 4)), ((32, 4, 16), (32, 4))]
    assert [(w, n) for w, n, _ in _pairs([0, 1], [2, 3], shapes)] == [((500, 16), 128), ((1000, 16), 128)]
    # a backward with no lookup of its shape is left unpaired
    assert _pairs([0], [2], [((1000, 16), (32, 4)), (), ((8, 16), (8,))]) == []
