"""Operator chains a fused kernel replaces (``collectors/kineto/op_chains.py``,
the ``host.op_chain_*`` metrics, unfused-op-chain) on real CPU training
loops (``advisor run``, PyTorch's profiler, OMP_NUM_THREADS=1).

A LLaMA-style model written out of elementwise operators (attention as
matmul, scale, mask, softmax, matmul; RMSNorm; SwiGLU; rotary embedding)
runs each as a chain of kernels on a GPU where a fused kernel runs one. With
a GeGLU MLP (diffusers' GEGLU: the projection's halves, one through GELU,
multiplied) its MLP is a GeGLU chain. The same model with
scaled_dot_product_attention, F.rms_norm and a GELU MLP with a layer scale
has none; under activation checkpointing the chains run again inside backward
nodes and are counted once. The rule is for GPU and NPU traces: on a CPU the
chains are metrics only (its ``min_ratio`` description has the measurements).
"""

from __future__ import annotations

import importlib.util
import json

import pytest

import advisor

from tests._profiled import needs_torch, profiled, value
from advisor.collectors.kineto.op_chains import find

SCRIPT = """
import sys, torch
from torch import nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

kind = sys.argv[1]
torch.manual_seed(0)
D, H, T, B, L, V = 64, 4, 64, 4, 2, 256


class RMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(D))

    def forward(self, x):
        if kind == "fused":
            return F.rms_norm(x, (D,), self.weight, 1e-6)
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = RMSNorm(), RMSNorm()
        self.qkv, self.o = nn.Linear(D, 3 * D, bias=False), nn.Linear(D, D, bias=False)
        self.gate, self.up, self.down = (nn.Linear(D, 4 * D, bias=False), nn.Linear(D, 4 * D, bias=False),
                                         nn.Linear(4 * D, D, bias=False))
        self.proj = nn.Linear(D, 8 * D, bias=False)  # GeGLU's value and gate halves
        self.scale = nn.Parameter(torch.full((D,), 0.1))  # a layer scale (ConvNeXt, CaiT)
        pos = torch.arange(T)[:, None] / 10000 ** (torch.arange(0, D // H, 2) / (D // H))
        self.register_buffer("cos", torch.cat((pos.cos(), pos.cos()), -1))
        self.register_buffer("sin", torch.cat((pos.sin(), pos.sin()), -1))
        self.register_buffer("mask", torch.full((T, T), float("-inf")).triu(1))

    def attend(self, x):
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in self.qkv(x).split(D, dim=-1))
        if kind == "fused":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            q = q * self.cos + rotate_half(q) * self.sin
            k = k * self.cos + rotate_half(k) * self.sin
            scores = torch.matmul(q, k.transpose(-2, -1)) * (D // H) ** -0.5
            y = torch.matmul(torch.softmax(scores + self.mask, dim=-1), v)
        return self.o(y.transpose(1, 2).reshape(B, T, D))

    def mlp(self, x):
        if kind == "fused":  # a GELU MLP with a layer scale: linear, gelu, linear, mul, and no GeGLU
            return self.scale * self.down(F.gelu(self.gate(x)))
        if kind == "geglu":  # diffusers' GEGLU
            h, gate = self.proj(x).chunk(2, dim=-1)
            return self.down(h * F.gelu(gate))
        return self.down(F.silu(self.gate(x)) * self.up(x))

    def forward(self, x):
        x = x + self.attend(self.n1(x))
        return x + self.mlp(self.n2(x))


emb, blocks, head = nn.Embedding(V, D), nn.ModuleList(Block() for _ in range(L)), nn.Linear(D, V)
params = [*emb.parameters(), *blocks.parameters(), *head.parameters()]
opt = torch.optim.AdamW(params, lr=1e-3)
tokens = torch.randint(0, V, (B, T + 1))
for step in range(10):
    x = emb(tokens[:, :-1])
    for blk in blocks:
        x = checkpoint(blk, x, use_reentrant=False) if kind == "checkpointed" else blk(x)
    loss = F.cross_entropy(head(x).view(-1, V), tokens[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
"""
RULE = "unfused-op-chain"
#: chains per step of the 2-layer model: per layer attention and SwiGLU once, RMSNorm and rotary twice
PER_STEP = {"softmax attention": 2, "SwiGLU": 2, "RMSNorm": 4, "rotary embedding": 4}


def test_chains_are_matched_in_call_order_skipping_views_and_masks():
    # Hugging Face's eager attention: scores, scale, mask, softmax cast back (a cast is skipped), dropout, values
    assert find("matmul mul add softmax to dropout matmul".split()) == [("softmax attention", [0, 1, 2, 3, 5, 6])]
    # LLaMA's MLP: the gate's silu times the up projection
    assert find("linear silu linear mul linear".split()) == [("SwiGLU", [1, 2, 3])]
    # diffusers' GEGLU: one projection cut in halves (a view), the value half times GELU of the gate half
    assert find("linear chunk gelu mul linear".split()) == [("GeGLU", [2, 3])]
    # a GELU MLP whose output a layer scale multiplies (ConvNeXt) is no GeGLU
    assert find("linear gelu linear mul add".split()) == []
    # a name that merely ends like a pattern's op is not that op
    assert find("baddbmm softmax bmm".split())[0][1] == [0, 1, 2]
    assert find("addbmm softmax bmm".split()) == []
    assert find("linear relu linear add".split()) == []


def _run(tmp_path, kind):
    return profiled(tmp_path, SCRIPT, kind, steps=5, warmup=3, name="train_chains.py")


@needs_torch
@pytest.mark.parametrize("kind", ["manual", "checkpointed", "geglu"])
def test_written_out_chains_are_counted_once_per_call(tmp_path, kind):
    report, out = _run(tmp_path, kind)
    chains = {c["name"]: c for c in value(report, "host.op_chains")}
    expected = PER_STEP if kind != "geglu" else {("GeGLU" if n == "SwiGLU" else n): k for n, k in PER_STEP.items()}
    assert {name: c["per_step"] for name, c in chains.items()} == expected
    assert value(report, "host.op_chain_calls") == sum(expected.values())
    total = value(report, "host.op_chain_ms")
    assert sum(c["ms"] for c in chains.values()) == pytest.approx(total, abs=0.01)
    # fusing saves the chain less its longest pass: something, never all of it
    assert 0 < value(report, "host.op_chain_saving_ms") < total < value(report, "step.time_ms")
    assert chains["softmax attention"]["api"] == "torch.nn.functional.scaled_dot_product_attention"
    # a CPU run: the chains are measured, the rule (for device traces) is not applied
    assert RULE not in {f["rule"] for f in report["findings"]}
    assert any(s["what"] == f"rule {RULE}" and "does not apply" in s["reason"] for s in report["skipped"])
    if kind == "manual":
        _same_under_2021_categories(tmp_path, out)


def _same_under_2021_categories(tmp_path, out):
    """PyTorch 1.8 filed the step markers, the optimizer's step and the
    operators alike under the ``Operator`` category (the corpus's
    tb-plugin traces): a ``ProfilerStep#N`` range then encloses every op of
    the step, and only the namespaced ops are read as the forward's."""
    trace = next((out / "trace").glob("*.pt.trace.json"))
    data = json.loads(trace.read_text())
    for ev in data["traceEvents"]:
        if ev.get("cat") in ("cpu_op", "user_annotation"):
            ev["cat"] = "Operator"
    old = tmp_path / "operator" / trace.name
    old.parent.mkdir()
    old.write_text(json.dumps(data))
    chains = {c["name"]: c["per_step"] for c in advisor.analyze(old).metrics["host.op_chains"].value}
    assert chains == PER_STEP


@needs_torch
def test_fused_operators_leave_no_chain(tmp_path):
    report = _run(tmp_path, "fused")[0]
    assert value(report, "host.op_chain_calls") == 0
    assert value(report, "host.op_chains") == []


HF_SCRIPT = """
import sys, torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=344, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=4, max_position_embeddings=256)
model = LlamaForCausalLM(cfg)
model.config._attn_implementation = sys.argv[1]
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, 512, (4, 128))
for step in range(10):
    loss = model(input_ids=ids, labels=ids).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
"""


@needs_torch
@pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                    reason="transformers is not installed (pip install transformers): Hugging Face's LLaMA is not run")
@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_hugging_face_llama_chains_follow_its_attention_implementation(tmp_path, impl):
    report = profiled(tmp_path, HF_SCRIPT, impl, steps=5, warmup=3, name="train_llama.py")[0]
    chains = {c["name"]: c["per_step"] for c in value(report, "host.op_chains")}
    # two decoder layers: RMSNorm twice each and once at the end, rotary on queries and keys, one MLP each
    expected = {"RMSNorm": 5, "rotary embedding": 4, "SwiGLU": 2}
    assert chains == ({**expected, "softmax attention": 2} if impl == "eager" else expected)
