"""The zh rule texts print metric values through the ``zh`` filter: the
phrases advisor itself writes into them (idle-time labels, shape remarks)
come out in Chinese, the profile's own names as they are."""

from __future__ import annotations

import re

import pytest

import advisor
from advisor.collectors.kineto import idle
from advisor.engine.render import render
from advisor.metrics.kernels import unaligned_reason
from advisor.metrics.labels_zh import to_zh

#: Three or more English words in a row: text a Chinese reader was not given.
ENGLISH = re.compile(r"[A-Za-z][a-z]+(?: [a-z]+){2,}")


@pytest.mark.parametrize(("label", "chinese"), [
    (f"stream 7 ({idle._waits_on(20)})", "stream 7（等待 stream 20）"),
    (f"cudaEventSynchronize ({idle._waits_on(-1)})", "cudaEventSynchronize（等待未知 stream 上的事件）"),
    (idle.BETWEEN_OPS, "（Host 算子之间的 Python 代码）"),
    (unaligned_reason("MatMulV3", "8192,15365;8192,4096"), "内轴 15365 不是 256 的倍数"),
    (unaligned_reason("FlashAttentionScore", "4096,2,511;4096,2,512"), "query 最后一维 511 不是 128 的倍数"),
])
def test_phrases_advisor_writes_are_translated(label, chinese):
    assert to_zh(label).replace(" （", "（") == chinese
    assert render("{{ v|zh }}", {"v": label}) == to_zh(label)


def test_profile_names_pass_unchanged():
    name = "aten::batch_norm > cudnn::bn_fw_tr_1C11_kernel_NCHW (waits) not a multiple"
    assert to_zh(name) == name


@pytest.mark.parametrize(("path", "rule", "chinese"), [
    ("hta/trace_filter", "dependency-stall", "stream 7（无等待记录）"),
    ("hta/nccl_parser_config/nccl_data.json.gz", "host-bound", "（Host 算子之间的 Python 代码）"),
    ("mstt/test/ut/advisor/compute_advice/data/kernel_details.csv", "unaligned-matmul", "内轴 15365 不是 256 的倍数"),
])
def test_chinese_findings_on_real_traces_hold_no_english_phrases(corpus, path, rule, chinese):
    """Real traces whose findings name waits, host time between operators
    and unaligned shapes: the zh message names them in Chinese."""
    report = advisor.analyze(corpus / path, lang="zh")
    finding = next(f for f in report.all_findings() if f.rule == rule)
    assert chinese in finding.message.replace(" （", "（")
    assert not ENGLISH.findall(finding.message), finding.message
