"""Metadata lookups: the one-walk index answers as a depth-first search would."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.collectors.ascend.meta import _maybe_json, _Scalars

KEYS = ("rank", "rank_id", "world_size", "tp")


def depth_first(node, keys):
    """The specification: the first node in depth-first order holding any of
    ``keys`` as a scalar (null is absent); at that node the key listed first wins."""
    if isinstance(node, dict):
        for key in keys:
            if node.get(key) is not None and not isinstance(node[key], (dict, list)):
                return node[key]
        for value in node.values():
            found = depth_first(_maybe_json(value), keys)
            if found is not None:
                return found
    return None


scalars = st.one_of(st.integers(-2, 9), st.text(max_size=3), st.none(), st.none())
docs = st.recursive(
    st.dictionaries(st.sampled_from(KEYS + ("x", "y")), scalars, max_size=4),
    lambda inner: st.dictionaries(st.sampled_from(KEYS + ("x", "y", "args")),
                                  st.one_of(inner, inner.map(lambda d: orjson.dumps(d).decode()),
                                            st.lists(inner, max_size=2), scalars), max_size=4),
    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(docs, st.permutations(KEYS).map(lambda p: tuple(p[:2])))
def test_index_matches_depth_first_search(doc, keys):
    assert _Scalars(doc).find(keys) == depth_first(doc, keys)


def test_nested_json_text_and_key_priority():
    doc = {"a": {"deep": {"rank": 5, "tp": None}}, "b": {"tp": 4}, "rank_id": 3,
           "distributed_args": orjson.dumps({"world_size": 8, "tp": 2}).decode()}
    index = _Scalars(doc)
    assert index.find(("rank_id", "rank")) == 3      # the root holds rank_id
    assert index.find(("rank", "rank_id")) == 3      # the root comes before the deeper rank
    assert index.find(("world_size",)) == 8          # read from JSON text
    assert index.find(("tp",)) == 4                  # null is absent: the later 4 counts
    assert index.find(("missing",)) is None
