"""``advisor compare`` and ``advisor gate`` with ``--lang zh``: the terminal,
compare.md, compare.html and gate.md in Chinese, none of the English fixed
phrases left; without ``--lang`` the English output is as before, and the
machine formats (compare.json, gate.json, junit.xml) stay English."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from gate_helpers import advisor

from advisor.reports.i18n import EN, ZH

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BOUND, FIXED = EXAMPLES / "resnet50_data_bound", EXAMPLES / "resnet50_data_fixed"
CJK = re.compile(r"[\u4e00-\u9fff]")
PREFIXES = ("cmp_", "gate_", "cfg_")


def english_phrases() -> list[str]:
    """The fixed English of the compare and gate texts: each template's text
    between its placeholders, where it holds two words or more."""
    out = set()
    for key, text in EN.items():
        if key.startswith(PREFIXES):
            for piece in re.split(r"\{\w+\}", text):
                piece = piece.strip(" ,.;:()[]")
                if len(re.findall(r"[A-Za-z]{2,}", piece)) >= 2 and piece not in ("Mann-Whitney U", "advisor gate"):
                    out.add(piece)
    return sorted(out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[int, str, str, Path]]:
    """compare and gate (a regression: the input-bound run against the
    fixed one) on the example profiles, in English and in Chinese."""
    root = tmp_path_factory.mktemp("zh")
    out = {}
    for lang in ("en", "zh"):
        extra = ("--lang", lang) if lang == "zh" else ()
        folder = root / f"cmp_{lang}"
        out[f"compare_{lang}"] = (*advisor("compare", BOUND, FIXED, "-o", folder, "--no-color", *extra), folder)
        folder = root / f"gate_{lang}"
        out[f"gate_{lang}"] = (*advisor("gate", BOUND, "--baseline", FIXED, "-o", folder, "--no-color", *extra),
                               folder)
    return out


def no_english(text: str) -> None:
    left = [p for p in english_phrases() if p in text]
    assert not left, left


def test_the_phrases_checked_are_the_moved_ones() -> None:
    phrases = english_phrases()
    assert "Where the time grew" in phrases and "beyond noise" in phrases and "What got slower" in phrases
    assert all(ZH[key] != EN[key] for key in EN if key.startswith(PREFIXES))


def test_compare_terminal_in_chinese(runs) -> None:
    code, stdout, _, _ = runs["compare_zh"]
    assert code == 0
    lines = stdout.splitlines()
    assert re.match(r"迭代时间 91\.\d+ -> 18\.\d+ ms（-80\.\d%，快 5\.\d+ 倍，超出噪声）", lines[0]), lines[0]
    assert any(ln.startswith("基线：mindspore，ascend，1 卡，60 步") for ln in lines), lines
    assert any(ln.startswith("减少：迭代组成部分 迭代间隙") for ln in lines), lines
    assert "已解决：input-bound [严重]" in lines and any(ln.startswith("对比报告：") for ln in lines)
    no_english(stdout)
    for word in ("baseline:", "grew:", "shrank:", "resolved:", "note:", "comparison:", "step component"):
        assert word not in stdout


def test_compare_files_in_chinese(runs) -> None:
    folder = runs["compare_zh"][3]
    md = (folder / "compare.md").read_text(encoding="utf-8")
    assert md.startswith("## advisor 对比：")
    assert "### 耗时减少的部分" in md and "| 框架 | mindspore | mindspore |" in md and "| 已解决 | `input-bound` | 严重 |" in md
    assert "**是**" in md and "### 问题" in md
    html = (folder / "compare.html").read_text(encoding="utf-8")
    assert '<html lang="zh">' in html and "<h1>advisor 对比</h1>" in html and "<h2>指标</h2>" in html
    assert '<span class="tag resolved">已解决</span>' in html
    for text in (md, html):
        no_english(text)
    # the findings of profile folders are written in Chinese too
    assert CJK.search(md.split("### 问题")[1].splitlines()[4])


def test_gate_in_chinese(runs) -> None:
    code, stdout, _, folder = runs["gate_zh"]
    assert code == 1
    assert "advisor 门禁：回归" in stdout and "预算 step.time_ms +5%" in stdout and "失败" in stdout
    assert "门禁配置：无配置文件（内置默认值）；严格配置：关" in stdout and "摘要：" in stdout
    no_english(stdout)
    md = (folder / "gate.md").read_text(encoding="utf-8")
    assert md.startswith("### \u274c **advisor 门禁：回归**")
    for heading in ("**变慢的部分**", "**耗时增加的部分**", "| 检查项 | 结果 | 基线 | 当前 | 变化 | 阈值 | p |", "**配置**",
                    "<sub>检验方法：对每步耗时做单侧"):
        assert heading in md, heading
    assert re.search(r"- step\.time\\_ms 回归 \+\d+\.\d%（阈值 \+5\.0%；p=", md)
    assert "新增问题 input-bound \\[严重\\]：" in md
    no_english(md)
    assert '<html lang="zh">' in (folder / "compare.html").read_text(encoding="utf-8")


def test_machine_formats_stay_english(runs) -> None:
    zh, en = runs["gate_zh"][3], runs["gate_en"][3]
    result = json.loads((zh / "gate.json").read_text(encoding="utf-8"))
    assert result["method"].startswith("one-sided Mann-Whitney U test")
    budget = result["checks"][0]
    assert budget["name"] == "budget step.time_ms +5%" and "regressed" in budget["message"]
    junit = (zh / "junit.xml").read_text(encoding="utf-8")
    assert 'name="budget step.time_ms +5%"' in junit and "gate config: no config file (built-in defaults)" in junit
    assert "new finding input-bound [critical]: " in junit  # the finding's own message: the analysis's language
    assert not any(ZH[key] in junit for key in ("gate_title", "gate_md_config", "cfg_defaults", "cmp_baseline"))
    assert (en / "junit.xml").is_file()
    notes = json.loads((runs["compare_zh"][3] / "compare.json").read_text(encoding="utf-8"))["notes"]
    assert notes and not any(CJK.search(n) for n in notes)


def test_default_language_is_english(runs) -> None:
    code, stdout, _, folder = runs["compare_en"]
    assert code == 0
    assert re.match(r"step time 91\.\d+ -> 18\.\d+ ms \(-80\.\d%, 5\.\d+x faster, beyond noise\)", stdout)
    assert "resolved: input-bound [critical]" in stdout and not CJK.search(stdout)
    md = (folder / "compare.md").read_text(encoding="utf-8")
    assert "### Where the time shrank" in md and "| framework | mindspore | mindspore |" in md
    assert not CJK.search(md)
    html = (folder / "compare.html").read_text(encoding="utf-8")
    assert '<html lang="en">' in html and "<h2>Where the time shrank (ms per step)</h2>" in html
    assert "A bar is the change's share of the step time." in html and '"-" when the metric' in html
    code, stdout, _, folder = runs["gate_en"]
    assert code == 1 and "advisor gate: regression" in stdout and not CJK.search(stdout)
    md = (folder / "gate.md").read_text(encoding="utf-8")
    assert md.startswith("### \u274c **advisor gate: regression**") and "**What got slower**" in md
    assert "- gate config: no config file (built-in defaults); strict config off" in md and not CJK.search(md)
