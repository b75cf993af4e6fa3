"""The collector contract (``advisor.collectors.protocol``): every collector
declares what it can do, and a declaration that does not match the module
is refused."""

from __future__ import annotations

import types

import pytest

from advisor.collectors import collectors
from advisor.collectors.protocol import Capabilities, check, load


def test_every_collector_keeps_the_contract():
    declared = {m.__name__.split(".")[-2]: check(m) for m in collectors()}
    # most specific layout first; memory timelines last, so that a folder holding
    # both a trace and a timeline is read as the trace (the timeline is noted);
    # the MindSpore GPU layout before MindInsight's, whose step-trace and MindData names it shares
    assert list(declared) == ["ascend", "mindspore_gpu", "mindinsight", "kineto", "memory"]
    assert declared["ascend"] == Capabilities("Ascend profiler folder(s)", arrow=True, batch=True,
                                              skips_kernels=True)
    assert declared["kineto"] == Capabilities("Kineto trace(s)", splits_unit=True, shared_ranks=True)
    assert declared["mindinsight"] == Capabilities("MindInsight profiler output(s)")
    assert declared["mindspore_gpu"] == Capabilities("MindSpore GPU profiler output(s)")
    assert declared["memory"] == Capabilities("PyTorch memory timeline(s)")
    module, caps = load("advisor.collectors.ascend.collector")
    assert module is collectors()[0] and caps is declared["ascend"]


def _module(caps, **functions) -> types.ModuleType:
    module = types.ModuleType("advisor.collectors.example.collector")
    module.discover = lambda root: []
    module.read = lambda unit: None
    module.CAPABILITIES = caps
    for name, func in functions.items():
        setattr(module, name, func)
    return module


def test_a_declaration_must_match_the_functions():
    def read_arrow(unit, kernels=True):
        return None

    assert check(_module(Capabilities("x", arrow=True), read_arrow=read_arrow)).arrow
    with pytest.raises(TypeError, match="arrow=True but read_arrow"):
        check(_module(Capabilities("x", arrow=True)))
    with pytest.raises(TypeError, match="splits_unit=False but read_alone"):  # never called: declare it
        check(_module(Capabilities("x"), read_alone=lambda unit, jobs: None))
    with pytest.raises(TypeError, match="no CAPABILITIES"):
        check(_module(None))
    with pytest.raises(ValueError, match="needs arrow"):
        Capabilities("x", skips_kernels=True)
