"""The typed per-rank decoder of communication files gives exactly the
generic walk's tables, and hands every file outside its layout back to the
generic walk (results never depend on which path ran)."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest

from advisor.collectors.ascend import comm as ascend_comm
from advisor.collectors.ascend import comm_typed as ascend_comm_typed


from bench.scenarios import Spec, generate


@pytest.fixture(scope="module")
def rank_files(tmp_path_factory) -> tuple[dict, dict]:
    """(communication.json, communication_matrix.json) of one generated rank."""
    data, _ = generate(Spec(ranks=4, steps=3, seed=5, kernels_per_step=4), tmp_path_factory.mktemp("s") / "s")
    out = next(data.glob("*/ASCEND_PROFILER_OUTPUT"))
    return (orjson.loads((out / "communication.json").read_bytes()),
            orjson.loads((out / "communication_matrix.json").read_bytes()))


def _read(reader, path: Path, rank, monkeypatch, typed: bool):
    with monkeypatch.context() as m:
        if not typed:
            m.setattr(ascend_comm_typed, "comm_columns", lambda raw: None)
            m.setattr(ascend_comm_typed, "link_columns", lambda raw: None)
        return reader(path, rank)


def _records(comm: dict):
    """Every operator record of a per-rank communication.json."""
    for cats in comm.values():
        for ops in cats.values():
            yield from ops.values()


def _same_both_ways(tmp_path, doc, reader, rank, monkeypatch) -> object:
    path = tmp_path / "f.json"
    path.write_bytes(orjson.dumps(doc))
    typed = _read(reader, path, rank, monkeypatch, typed=True)
    generic = _read(reader, path, rank, monkeypatch, typed=False)
    for a, b in zip(typed if isinstance(typed, tuple) else (typed,), generic if isinstance(generic, tuple) else (generic,)):
        assert (a is None and b is None) or a.equals(b), (a, b)
    return typed


def _nulls(doc):
    for rec in _records(doc):
        rec["Communication Time Info"]["Wait Time(ms)"] = None
        rec["Communication Time Info"].pop("Idle Time(ms)", None)
    return doc


def _ints(doc):
    for rec in _records(doc):
        rec["Communication Time Info"]["Elapse Time(ms)"] = 3
    return doc


def _total(doc):
    for cats in doc.values():
        cats["collective"]["Total Op Info"] = {"Communication Time Info": {"Elapse Time(ms)": 9.0}}
    return doc


def _no_elapse(doc):
    del next(_records(doc))["Communication Time Info"]["Elapse Time(ms)"]
    return doc


IN_LAYOUT = {"as written": lambda d: d, "nulls and missing fields": _nulls, "integers": _ints,
             "Total Op Info": _total, "a record without elapse": _no_elapse}


@pytest.mark.parametrize("change", IN_LAYOUT.values(), ids=IN_LAYOUT.keys())
def test_typed_communication_equals_generic(rank_files, change, tmp_path, monkeypatch):
    doc = change(copy.deepcopy(rank_files[0]))
    assert ascend_comm_typed.comm_columns(orjson.dumps(doc)) is not None  # the typed path ran
    comm, bandwidth = _same_both_ways(tmp_path, doc, ascend_comm.read_communication, 7, monkeypatch)
    assert set(comm.column("rank").to_pylist()) == {7} and bandwidth.num_rows > 0


def _unit(doc):
    for rec in _records(doc):
        info = rec["Communication Time Info"]
        info["Elapse Time(us)"] = info.pop("Elapse Time(ms)") * 1000
    return doc


def _spelling(doc):
    for rec in _records(doc):
        info = rec["Communication Time Info"]
        info["Idel Time(ms)"] = info.pop("Idle Time(ms)")
    return doc


def _text_number(doc):
    next(_records(doc))["Communication Time Info"]["Elapse Time(ms)"] = " 2.5 "
    return doc


def _cluster_nesting(doc):
    return {"group0": {step: {op: {"0": rec} for op, rec in cats["collective"].items()}
                       for step, cats in doc.items()}}


def _shallow(doc):
    return {step: dict(cats["collective"]) for step, cats in doc.items()}  # no collective|p2p level


OUTSIDE = {"another unit": _unit, "another spelling": _spelling, "a number as text": _text_number,
           "cluster nesting": _cluster_nesting, "a record above the operator level": _shallow}


@pytest.mark.parametrize("change", OUTSIDE.values(), ids=OUTSIDE.keys())
def test_communication_outside_the_layout_is_read_generically(rank_files, change, tmp_path, monkeypatch):
    doc = change(copy.deepcopy(rank_files[0]))
    assert ascend_comm_typed.comm_columns(orjson.dumps(doc)) is None
    comm, _ = _same_both_ways(tmp_path, doc, ascend_comm.read_communication, 2, monkeypatch)
    assert comm is not None and comm.num_rows > 0
    if change is _unit:  # the generic walk honours the unit
        assert comm.column("elapse_us").to_pylist() == [
            r["Communication Time Info"]["Elapse Time(us)"] for r in _records(doc)]


def _links(doc):
    for cats in doc.values():
        for ops in cats.values():
            yield from ops.values()


def _matrix_total(doc):
    for cats in doc.values():
        cats["collective"]["Total Op Info"] = {"0-1": {"Transport Type": "HCCS", "Transit Size(MB)": 8}}
    return doc


def _matrix_missing(doc):
    for links in _links(doc):
        for link in links.values():
            link.pop("Bandwidth(GB/s)", None)
    return doc


def _torch_op_name(doc):
    """torch_npu names a sample's operator "Op Name" (MindSpore: "op_name")."""
    for links in _links(doc):
        for link in links.values():
            if "op_name" in link:
                link["Op Name"] = link.pop("op_name")
    return doc


MATRIX_IN = {"as written": lambda d: d, "Total Op Info": _matrix_total, "missing bandwidth": _matrix_missing,
             "Op Name spelling": _torch_op_name}


@pytest.mark.parametrize("change", MATRIX_IN.values(), ids=MATRIX_IN.keys())
def test_typed_matrix_equals_generic(rank_files, change, tmp_path, monkeypatch):
    doc = change(copy.deepcopy(rank_files[1]))
    assert ascend_comm_typed.link_columns(orjson.dumps(doc)) is not None
    links = _same_both_ways(tmp_path, doc, ascend_comm.read_matrix, 3, monkeypatch)
    assert links.num_rows > 0 and set(links.column("rank").to_pylist()) == {3}


def _link_high(doc):
    step = next(iter(doc))
    doc[step]["0-1"] = {"x": {"Transport Type": "HCCS", "Transit Size(MB)": 1.0}}
    return doc


def _totals(doc):
    """The ``{type}-total`` entries: the ones link_columns decodes first."""
    for cats in doc.values():
        for ops in cats.values():
            yield from (links for key, links in ops.items() if key.split("@")[0].endswith("-total"))


def _samples(doc):
    """The ``-top1`` / ``-middle`` / ``-bottomN`` entries a total repeats."""
    for cats in doc.values():
        for ops in cats.values():
            yield from (links for key, links in ops.items() if not key.split("@")[0].endswith("-total"))


def _not_a_link(doc):
    next(_totals(doc))["extra"] = {"Transport Type": "HCCS"}
    return doc


def _null_transport(doc):
    next(iter(next(_totals(doc)).values()))["Transport Type"] = None
    return doc


MATRIX_OUT = {"a link key above the operator": _link_high, "a non-link key below an operator": _not_a_link,
              "a null transport": _null_transport}


@pytest.mark.parametrize("change", MATRIX_OUT.values(), ids=MATRIX_OUT.keys())
def test_matrix_outside_the_layout_is_read_generically(rank_files, change, tmp_path, monkeypatch):
    doc = change(copy.deepcopy(rank_files[1]))
    assert ascend_comm_typed.link_columns(orjson.dumps(doc)) is None
    links = _same_both_ways(tmp_path, doc, ascend_comm.read_matrix, 2, monkeypatch)
    assert links is not None and links.num_rows > 0


def _odd_sample(doc):
    sample = next(_samples(doc))
    sample["extra"] = {"Transport Type": "HCCS"}
    next(iter(sample.values()))["Transport Type"] = None
    return doc


def test_matrix_samples_a_total_repeats_are_not_decoded(rank_files, tmp_path, monkeypatch):
    """torch_npu's matrix writes ``{type}-total`` and four samples of it per
    type, group and step (``comm_keys.matrix_entry``); both walks leave the
    samples' rows out, so the typed one does not decode them and reads a
    file whose samples are odd as the generic walk does."""
    doc = _odd_sample(copy.deepcopy(rank_files[1]))
    assert next(_totals(doc)) and ascend_comm_typed.link_columns(orjson.dumps(doc)) is not None
    links = _same_both_ways(tmp_path, doc, ascend_comm.read_matrix, 2, monkeypatch)
    assert links is not None and links.num_rows > 0
