"""Chinese: the UI message table, the rule overlays, and acceptance 4 --
with ``--lang zh`` no English rule text reaches a report."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from rich.console import Console

from advisor.cli import main
from advisor.collectors import load_profile
from advisor.engine.check import check_rules
from advisor.engine.loader import (
    _TAG,
    builtin_rule_files,
    load_rules,
    overlay_path,
    overlay_problems,
    read_overlay,
    read_rule,
)
from advisor.engine.schema import caveat_text
from advisor.pipeline import analyze_profile
from advisor.reports import render_html, render_markdown
from advisor.reports.i18n import EN, ZH
from advisor.reports.terminal import print_summary

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "reports"))
from _cluster_profile import cluster_profile  # noqa: E402

CJK = re.compile(r"[\u4e00-\u9fff]")
EXAMPLES = ["resnet50_data_bound", "resnet50_8p_allreduce_tail"]  # vgg16_fp32: test_cli_report_zh
# keys whose Chinese text has no Chinese character (units, identifiers, punctuation)
SAME_IN_ZH = {"axis_ms", "col_id", "list_sep", "cmp_where", "cmp_term_finding", "cfg_file", "cfg_and",
              "gate_unmeasured_item"}


def english_sentences() -> set[str]:
    """Fixed English phrases of every rule: the static text between template
    tags, split at punctuation, four words or more."""
    out: set[str] = set()
    for r in load_rules():
        texts = [r.title, r.message, *map(caveat_text, r.caveats),
                 r.explanation.what, r.explanation.why, r.explanation.how]
        texts += [f.text for f in r.fix.values()]
        for text in texts:
            for part in _TAG.split(text):
                for piece in re.split(r"[.;:,()]", " ".join(part.split())):
                    if len(piece.split()) >= 4:
                        out.add(piece.strip())
    return out


def test_zh_ui_table_is_complete_and_chinese():
    assert set(ZH) == set(EN)
    for key, text in ZH.items():
        if key not in SAME_IN_ZH:
            assert CJK.search(text), key
        assert set(re.findall(r"\{(\w+)\}", text)) == set(re.findall(r"\{(\w+)\}", EN[key])), key


@pytest.mark.parametrize("path", builtin_rule_files(), ids=lambda p: p.stem)
def test_every_shipped_rule_has_a_complete_zh_overlay(path: Path):
    rule = read_rule(path)
    overlay = read_overlay(overlay_path(path, "zh"))
    assert overlay_problems(rule, overlay, complete=True) == []
    zh = next(r for r in load_rules(lang="zh") if r.id == rule.id)
    for text in [zh.title, zh.message, *map(caveat_text, zh.caveats), zh.explanation.what,
                 *(f.text for f in zh.fix.values()), *(p.description for p in zh.params.values())]:
        assert CJK.search(text), text
    # numbers live in the English file only
    assert {k: p.default for k, p in zh.params.items()} == {k: p.default for k, p in rule.params.items()}
    assert zh.condition == rule.condition and zh.examples == rule.examples


def _copy_rule(tmp: Path, name: str = "slow_link.yaml") -> Path:
    folder = tmp / "rules"
    (folder / "zh").mkdir(parents=True)
    src = next(p for p in builtin_rule_files() if p.name == name)
    text = src.read_text(encoding="utf-8").replace("id: ADV006", "id: ADV906").replace(
        "name: slow-link", "name: my-slow-link")
    (folder / name).write_text(text, encoding="utf-8")
    zh = overlay_path(src, "zh").read_text(encoding="utf-8").replace("id: ADV006", "id: ADV906")
    (folder / "zh" / name).write_text(zh, encoding="utf-8")
    return folder


def test_validate_checks_overlays(tmp_path: Path, capsys):
    assert check_rules([]) == ([], len(builtin_rule_files()))
    folder = _copy_rule(tmp_path)
    assert check_rules([folder]) == ([], 1)
    zh = folder / "zh" / "slow_link.yaml"
    good = zh.read_text(encoding="utf-8")
    bad = (good.replace("的 {{ cluster.slowest_link_ratio|pct }}", "的 50%")
               .replace("    text: 检查", "    txt: 检查")
               + "fix_extra: 1\n")
    zh.write_text(good.replace("的 {{ cluster.slowest_link_ratio|pct }}", "的 50%"), encoding="utf-8")
    problems, _ = check_rules([folder])
    assert any("message: number(s) 50 not in the English text" in p for p in problems), problems
    zh.write_text(bad, encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["rules", "validate", str(folder)])
    assert exc.value.code == 2
    assert str(zh) in capsys.readouterr().err
    # changed code (not just its comments) is refused
    zh.write_text(good.replace("# NVIDIA：nvidia-smi", "rm -rf / # NVIDIA：nvidia-smi"), encoding="utf-8")
    assert any("fix.default.code: differs" in p for p in check_rules([folder])[0])
    # a missing overlay is fine for a user rule, required for a shipped one
    zh.unlink()
    assert check_rules([folder]) == ([], 1)


@pytest.fixture(scope="module")
def zh_reports():
    reports = [analyze_profile(load_profile(ROOT / "examples" / name, jobs=1), lang="zh") for name in EXAMPLES]
    reports.append(analyze_profile(cluster_profile(ranks=8, steps=40), lang="zh"))
    assert {f.rule for r in reports for f in r.all_findings()} >= {
        "input-bound", "slow-dataset-op", "exposed-allreduce", "slow-rank", "slow-link", "step-outlier"}
    return reports


def test_zh_report_has_no_english_rule_text(zh_reports):
    english = english_sentences()
    assert len(english) > 50
    for report in zh_reports:
        strings = []
        for f in report.all_findings():
            strings += [f.title, f.message, *f.caveats]
            if f.fix:
                strings.append(f.fix.text)
                strings += [line.split("#", 1)[1] for line in (f.fix.code or "").splitlines() if "#" in line]
        for s in strings:
            assert CJK.search(s), s
            leaked = [e for e in english if e in s]
            assert not leaked, (s, leaked)
        for rendered in (render_markdown(report, "zh"), render_html(report, "zh")):
            leaked = [e for e in english if e in rendered]
            assert not leaked, leaked
        console = Console(record=True, width=120, force_terminal=False)
        print_summary(report, console, lang="zh")
        text = console.export_text()
        assert "advisor：发现" in text and not [e for e in english if e in text]


def test_rules_explain_zh(capsys):
    main(["rules", "explain", "input-bound", "--lang", "zh"])
    out = capsys.readouterr().out
    assert "检测内容" in out and "训练在等待输入数据" in out and "input-bound.min_data_wait_ratio = 0.1" in out


def test_cli_report_zh(tmp_path: Path, capsys):
    src = ROOT / "examples" / "vgg16_fp32"
    main(["report", str(src), "-o", str(tmp_path / "out"), "--lang", "zh", "--no-color", "-j", "1"])
    out = capsys.readouterr().out
    assert "advisor：发现 2 个问题" in out and "float32 的矩阵乘和卷积算子" in out and "报告：" in out
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "### 优化建议" in md and "开启混合精度" in md
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert '<html lang="zh">' in html and "矩阵计算以 float32 精度运行" in html
    shutil.rmtree(tmp_path / "out")


def test_cli_one_line_errors_zh(tmp_path: Path, capsys):
    """An unusable input's one-line error states its problem in the report's
    language (the catalogue of skip problems), with exit code 2; the
    English line is unchanged without --lang."""
    cut = tmp_path / "cut.pt.trace.json"
    cut.write_text('{"traceEvents": [{"ph": "X", ')  # a trace whose writer was killed
    plain = tmp_path / "notes"
    plain.mkdir()
    (plain / "readme.txt").write_text("not a profile")
    cases = [(tmp_path / "missing", "文件或文件夹不存在", "no such file or folder"),
             (cut, "JSON 格式错误或被截断", "truncated"),
             (plain, "未找到 profile", "no profiler output found")]
    for path, zh, en in cases:
        for lang, expected in (("zh", zh), ("en", en)):
            with pytest.raises(SystemExit) as exit_:
                main(["report", str(path), "-o", str(tmp_path / "out"), "--lang", lang, "--no-color", "-j", "1"])
            err = capsys.readouterr().err
            assert exit_.value.code == 2 and err.count("\n") == 1, err
            assert err.startswith(f"advisor: error: {path}: ") and expected in err, err
    assert not (tmp_path / "out").exists()
