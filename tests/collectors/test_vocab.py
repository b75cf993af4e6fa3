"""One answer for collective kinds and dtypes (``advisor.collectors.vocab``):
the names every format writes, the same operator read from different
formats, and no other collectors module keeping a table of its own."""

from __future__ import annotations

import ast
import csv
import json
import re
from pathlib import Path

import pytest

from advisor.collectors import load_profile, vocab
from bench.scenarios.ascend import sample_rank, write_db, write_text

COLLECTORS = Path(vocab.__file__).parent


@pytest.mark.parametrize("name, kind", [
    # NCCL kernels (Kineto traces)
    ("ncclKernel_AllReduce_RING_LL_Sum_float", "allreduce"),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "reducescatter"),
    ("ncclDevKernel_AllGather_RING_LL", "allgather"),
    ("ncclDevKernel_Broadcast_RING_LL", "broadcast"),
    ("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", "sendrecv"),
    # c10d / gloo host ops
    ("nccl:all_to_all", "alltoall"),
    ("gloo:all_reduce", "allreduce"),
    ("c10d::allgather_", "allgather"),
    ("nccl:_reduce_scatter_base", "reducescatter"),
    ("nccl:send 0->1", "send"),
    ("nccl:recv 0<-1", "receive"),
    ("record_param_comms", "other"),
    # HCCL operators (Ascend)
    ("hcom_allReduce__123_0", "allreduce"),
    ("hcom_reduceScatter__8_1", "reducescatter"),
    ("hcom_allGather__4_0_1", "allgather"),
    ("hcom_broadcast__2_0", "broadcast"),
    ("hcom_alltoallv_", "alltoall"),
    ("HcomBatchSendRecv", "sendrecv"),
    ("hcom_batchSendRecv__17_0", "sendrecv"),
    ("hcom_send__5_0", "send"),
    ("hcom_receive__6_0", "receive"),
    # MindSpore operators
    ("AllReduce-op1", "allreduce"),
    ("HcomAllReduce", "allreduce"),
    ("AllGather-op2", "allgather"),
    ("Send-op3", "send"),
    ("Receive-op4", "receive"),
    ("MatMul-op5", "other"),
    ("", "other"),
    (None, "other"),
])
def test_collective_kind_of_real_names(name, kind):
    assert vocab.collective_kind(name) == kind
    assert kind in vocab.KINDS


def test_a_more_specific_name_wins_over_the_generic_point_to_point_kernel():
    send_recv = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
    assert vocab.more_specific(None, send_recv, "nccl:all_to_all") == "alltoall"  # all-to-all over p2p
    assert vocab.more_specific("recv", send_recv, None) == "receive"  # the Collective name argument
    assert vocab.more_specific(None, send_recv, None) == "sendrecv"
    assert vocab.more_specific(None, "void gemm_kernel<float>()", None) == "other"


@pytest.mark.parametrize("raw, dtype", [
    # CANN (Ascend kernel_details.csv, the profiler database)
    ("DT_FLOAT", "FLOAT"), ("DT_FLOAT16", "FLOAT16"), ("DT_BF16", "BF16"), ("DT_INT64", "INT64"),
    ("DT_DOUBLE", "DOUBLE"), ("FLOAT", "FLOAT"), ("float16", "FLOAT16"), ("BFLOAT16", "BF16"),
    # MindSpore framework_raw op_info
    ("NUMBER_TYPE_FLOAT32", "FLOAT"), ("NUMBER_TYPE_INT32", "INT32"), ("DTFLOAT16", "FLOAT16"),
    ("kNumberTypeFloat16", "FLOAT16"), ("Float64", "DOUBLE"), ("UNKNOWN", "UNKNOWN"),
    # PyTorch C++ type names (Kineto "Input type")
    ("float", "FLOAT"), ("double", "DOUBLE"), ("c10::Half", "FLOAT16"), ("c10::BFloat16", "BF16"),
    ("long int", "INT64"), ("int", "INT32"), ("short int", "INT16"), ("signed char", "INT8"),
    ("unsigned char", "UINT8"), ("bool", "BOOL"), ("c10::complex<float>", "COMPLEX64"),
    ("c10::complex<double>", "COMPLEX128"), ("c10::complex<c10::Half>", "COMPLEX32"),
    ("c10::Float8_e4m3fn", "FLOAT8_E4M3FN"), ("c10::Float8_e5m2fnuz", "FLOAT8_E5M2FNUZ"),
    # plain spellings
    ("fp32", "FLOAT"), ("fp16", "FLOAT16"), ("half", "FLOAT16"), ("float64", "DOUBLE"), ("", ""),
])
def test_dtype_of_real_spellings(raw, dtype):
    assert vocab.dtype(raw) == dtype


def test_dtype_lists():
    assert vocab.dtype_list(["float", "c10::Half", "Scalar", "", "TensorList", "long int"]) == "FLOAT;FLOAT16;INT64"
    assert vocab.dtype_list(["Scalar", ""]) is None and vocab.dtype_list(()) is None
    assert vocab.dtype_text("DT_BF16;DT_BF16") == "BF16;BF16" and vocab.dtype_text(None) is None


def test_batched_send_recv_is_one_kind_in_every_ascend_layout_and_mindinsight(tmp_path):
    """``HcomBatchSendRecv`` read from the Ascend text and database layouts
    and from MindInsight's framework file: the same kind everywhere."""
    spec = sample_rank(0)
    spec.comm_time.append((1, "hcom_batchSendRecv__9_0", "pp", 1.0, 0.5, 0.3, 0.1, 0.0, 0.1))
    kinds = {}
    for layout, write in (("text", write_text), ("db", write_db)):
        write(tmp_path / layout, spec)
        comm = load_profile(tmp_path / layout, jobs=1).comm
        kinds[layout] = set(comm.loc[comm["name"].str.startswith("hcom_batchSendRecv"), "kind"])
    mi = tmp_path / "mindinsight"
    mi.mkdir()
    (mi / "aicore_intermediate_0_detail.csv").write_text("full_op_name,task_duration,execution_frequency,task_type\n"
                                                         "Default/MatMul-op1,100.0,4,AI_CORE\n")
    with open(mi / "framework_raw_0.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["full_op_name", "op_type", "op_info"])
        writer.writerow(["Default/MatMul-op1", "MatMul", json.dumps({})])
        writer.writerow(["Default/HcomBatchSendRecv-op2", "HcomBatchSendRecv", json.dumps({})])
    kinds["mindinsight"] = set(load_profile(mi, jobs=1).comm["kind"])
    assert kinds == {"text": {"sendrecv"}, "db": {"sendrecv"}, "mindinsight": {"sendrecv"}}


# ------------------------------------------------------------- one source

#: Strings that only a kind table holds: the kinds and the tokens they are read from.
KIND_WORDS = {token for token, _ in vocab.KIND_TOKENS} | (set(vocab.KINDS) - {vocab.OTHER}) | {"batchsendrecv"}
#: Strings that only a dtype table holds: every spelling ``vocab.DTYPES`` knows, upper case as the
#: profilers write it, and the Kineto non-tensor input names. (Lower-case ``"int64"``, ``"float64"``
#: are pandas/NumPy dtypes, which any module may name.)
DTYPE_WORDS = set(vocab.DTYPES) | set(vocab.DTYPES.values()) | (vocab.NON_TENSOR_TYPES - {"", "None"})
#: Vendor dtype prefixes a private normalizer would strip.
DTYPE_PREFIX = re.compile(r"DT_|NUMBER_TYPE|kNumberType|c10::", re.IGNORECASE)


def _strings(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module other than docstrings: (line, text)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs]


def _table_strings(path: Path) -> list[str]:
    """The literals of ``path`` that belong in a kind or dtype table, as ``file:line: text``."""
    return [f"{path}:{line}: {text!r}" for line, text in _strings(path)
            if text.lower() in KIND_WORDS or text in DTYPE_WORDS or DTYPE_PREFIX.search(text)]


def test_no_other_collectors_module_keeps_a_kind_or_dtype_table():
    modules = sorted(p for p in COLLECTORS.rglob("*.py") if p.name != "vocab.py")
    assert len(modules) > 30 and COLLECTORS / "kineto" / "tables.py" in modules
    assert [hit for path in modules for hit in _table_strings(path)] == []


def test_the_check_finds_a_private_table(tmp_path):
    """What the check above says of tables like those ``vocab`` replaced."""
    module = tmp_path / "example.py"
    for source in ('_KINDS = (("allreduce", "allreduce"), ("send", "send"))\n',
                   '_DTYPES = {"c10::Half": "FLOAT16"}\n',
                   'PREFIX = re.compile(r"^(DT_|NUMBER_TYPE_)")\n'):
        module.write_text('"""A module."""\n' + source)
        assert _table_strings(module), source
    module.write_text('"""allreduce, FLOAT16 and DT_ in a docstring are prose."""\nX = "int64"\n')
    assert _table_strings(module) == []
