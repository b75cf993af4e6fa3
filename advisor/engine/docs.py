"""Rule documentation from the rule files: ``advisor rules explain`` text
and the Markdown reference ``docs/rules.md``.

One source of truth: both read the same rule files (and their language
overlays) the engine evaluates. Regenerate the committed reference with::

    python -m advisor.engine.docs            # writes docs/rules.md
    advisor rules docs -o docs/rules.md
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from advisor.engine.schema import INFERRED_CONFIDENCE, Caveat, Rule
from advisor.runtime.files import write_atomic

HEADINGS = {
    "en": {
        "what": "What it detects",
        "why": "Why it matters",
        "how": "How to fix",
        "thresholds": "Thresholds",
        "override": "Override with `--set {name}.PARAM=VALUE` or in advisor.toml: "
        "`thresholds = {{\"{name}.PARAM\" = VALUE}}`.",
        "override_plain": "override: --set {name}.PARAM=VALUE, or advisor.toml thresholds",
        "condition": "Condition",
        "let": "Cases the fixes and message read (let)",
        "fixes": "Fixes",
        "fix_for": "for {framework}",
        "caveats": "Caveats",
        "caveat_on": "on {platforms}: ",
        "examples": "Examples",
        "fire": "fires",
        "pass": "passes",
        "meta": "group {group}, status {status}, severity {severity}, time pool {pool}",
        "symptom": " (a symptom: a finding of its pool that names the cause leads it)",
        "direct": "Direct evidence (without it the finding is inferred: confidence at most {cap:g}, and it says)",
        "requires": "Needs metrics",
        "references": "References",
        "doc_title": "Rules",
        "doc_intro": "Generated from `rules/*.yaml` by `python -m advisor.engine.docs`; do not edit by hand. "
        "`advisor rules explain NAME` prints the same text.",
        "col_rule": "rule",
        "col_title": "title",
        "col_group": "group",
        "col_status": "status",
        "peer_title": "Coverage of the incumbent tools' checks",
        "peer_intro": "Every check of {peers}, and what in advisor reports the same problem, or why nothing "
        "does (the data it would need). Generated from `docs/peer_checks.yaml`. "
        "{covered} of {total} checks have a rule, metric or command in advisor.",
        "peer_planned": " ({with_planned} of {total} counting the rules marked *planned*.)",
        "col_peer": "peer",
        "col_check": "check",
        "col_source": "source",
        "col_advisor": "advisor",
        "col_beyond": "beyond the peer, or why not covered",
        "planned": "planned",
        "not_covered": "not covered: {why}",
        "peer_none": "Rules of advisor that no check of these tools makes: {rules}.",
    },
    "zh": {
        "what": "检测内容",
        "why": "影响",
        "how": "优化方法",
        "thresholds": "阈值",
        "override": "可用 `--set {name}.PARAM=VALUE` 或在 advisor.toml 中用 "
        "`thresholds = {{\"{name}.PARAM\" = VALUE}}` 覆盖。",
        "override_plain": "覆盖方式：--set {name}.PARAM=VALUE，或 advisor.toml 的 thresholds",
        "condition": "触发条件",
        "let": "消息与建议引用的情形（let）",
        "fixes": "优化建议",
        "fix_for": "适用于 {framework}",
        "caveats": "注意事项",
        "caveat_on": "仅限 {platforms}：",
        "examples": "示例",
        "fire": "触发",
        "pass": "不触发",
        "meta": "分组 {group}，状态 {status}，严重程度 {severity}，时间池 {pool}",
        "symptom": "（症状：同一时间池中指出原因的问题排在它之前）",
        "direct": "直接依据（缺少时结论为推断：置信度至多 {cap:g}，并在说明中注明）",
        "requires": "所需指标",
        "references": "参考资料",
        "doc_title": "规则",
        "doc_intro": "由 `python -m advisor.engine.docs` 根据 `rules/*.yaml` 生成，请勿手工修改。"
        "`advisor rules explain NAME --lang zh` 输出相同内容。",
        "col_rule": "规则",
        "col_title": "标题",
        "col_group": "分组",
        "col_status": "状态",
        "peer_title": "对现有工具检查项的覆盖",
        "peer_intro": "{peers} 的每一项检查，以及 advisor 中报告同一问题的规则或指标；未覆盖时说明所需的数据。"
        "由 `docs/peer_checks.yaml` 生成。{total} 项中 {covered} 项在 advisor 中有规则、指标或命令。",
        "peer_planned": "（计入标为 *planned* 的规则时为 {with_planned} 项。）",
        "col_peer": "工具",
        "col_check": "检查",
        "col_source": "来源",
        "col_advisor": "advisor",
        "col_beyond": "超出之处，或未覆盖的原因",
        "planned": "planned",
        "not_covered": "未覆盖：{why}",
        "peer_none": "这些工具均无对应检查的 advisor 规则：{rules}。",
    },
}



def _meta(h: dict, r) -> str:
    """The rule's group, status, severity and time pool line."""
    line = h["meta"].format(group=r.group, status=r.status, severity=r.severity, pool=r.pool)
    return line + (h["symptom"] if r.symptom else "")

def _h(lang: str) -> dict[str, str]:
    return HEADINGS.get(lang, HEADINGS["en"])


def _one(text: str) -> str:
    return " ".join(str(text).split())


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else json.dumps(v, ensure_ascii=False)


def _caveat(h: dict, caveat: str | Caveat) -> str:
    """A caveat's text, led by the platforms it is shown on when it names some."""
    if isinstance(caveat, str):
        return caveat
    names = [n for n in (*caveat.frameworks, *caveat.devices) if n != "any"]
    return (h["caveat_on"].format(platforms=", ".join(names)) if names else "") + caveat.text


def explain_rule(r: Rule, lang: str = "en") -> str:
    """The terminal text of ``advisor rules explain``."""
    h = _h(lang)
    wrap = lambda s: textwrap.fill(_one(s), 78, initial_indent="  ", subsequent_indent="  ")  # noqa: E731
    lines = [f"{r.id} {r.name}: {r.title}",
             _meta(h, r), ""]
    for key, text in (("what", r.explanation.what), ("why", r.explanation.why), ("how", r.explanation.how)):
        lines += [h[key], wrap(text), ""]
    if r.params:
        lines.append(f"{h['thresholds']} ({h['override_plain'].format(name=r.name)})")
        for key, p in r.params.items():
            lines.append(f"  {r.name}.{key} = {p.default:g}   {_one(p.description)}")
        lines.append("")
    lines += [h["condition"], wrap(r.condition), ""]
    if r.let:
        lines += [h["let"], *(wrap(f"let.{name} = {expr}") for name, expr in r.let.items()), ""]
    if r.confirm is not None:
        lines += [h["direct"].format(cap=INFERRED_CONFIDENCE), wrap(r.confirm.direct), wrap(r.confirm.text), ""]
    lines.append(h["fixes"])
    for fw, fx in r.fix.items():
        lines.append(f"  [{fw}] {_one(fx.text)}")
        if fx.code:
            lines += ["      " + line for line in fx.code.rstrip().splitlines()]
    if r.caveats:
        lines += ["", h["caveats"]] + [wrap("- " + _caveat(h, c)) for c in r.caveats]
    lines += ["", h["examples"]]
    for e in r.examples:
        metrics = ", ".join(f"{k}={_fmt(v)}" for k, v in e.metrics.items())
        lines.append(f"  {h[e.expect]:<6} {e.name}")
        lines.append(textwrap.fill(metrics, 78, initial_indent="         ", subsequent_indent="         "))
    return "\n".join(lines)


def _md(text: str) -> str:
    return _one(text).replace("|", "\\|")


def rule_markdown(r: Rule, lang: str = "en") -> str:
    """One rule's section of ``docs/rules.md``."""
    h = _h(lang)
    out = [f"## `{r.name}` ({r.id}): {_one(r.title)}", ""]
    out += [f"*{_meta(h, r)}*", ""]
    for key, text in (("what", r.explanation.what), ("why", r.explanation.why), ("how", r.explanation.how)):
        out += [f"**{h[key]}.** {_one(text)}", ""]
    needs = sorted(set(r.requires)) + [f"{m}?" for m in r.requires_any]
    if needs:
        out += [f"**{h['requires']}:** " + ", ".join(f"`{m}`" for m in needs), ""]
    if r.params:
        out += [f"**{h['thresholds']}.** {h['override'].format(name=r.name)}", ""]
        out += ["| param | default | |", "|---|---:|---|"]
        out += [f"| `{r.name}.{k}` | {p.default:g} | {_md(p.description)} |" for k, p in r.params.items()]
        out.append("")
    out += [f"**{h['condition']}:** `{_one(r.condition)}`", ""]
    if r.let:
        out += [f"**{h['let']}:**", "", *(f"- `let.{name}` = `{_one(expr)}`" for name, expr in r.let.items()), ""]
    if r.confirm is not None:
        out += [f"**{h['direct'].format(cap=INFERRED_CONFIDENCE)}:** `{_one(r.confirm.direct)}`. "
                f"{_one(r.confirm.text)}", ""]
    out += [f"**{h['fixes']}**", ""]
    for fw, fx in r.fix.items():
        out.append(f"- *{h['fix_for'].format(framework=fw)}*: {_one(fx.text)}")
    out.append("")
    if r.caveats:
        out += [f"**{h['caveats']}**", ""] + [f"- {_one(_caveat(h, c))}" for c in r.caveats] + [""]
    out += [f"**{h['examples']}**", ""]
    out += [f"- {h[e.expect]}: {_one(e.name)}" for e in r.examples]
    out.append("")
    return "\n".join(out)


def rules_markdown(lang: str = "en") -> str:
    """The built-in rules as one Markdown document."""
    from advisor.engine.loader import load_rules

    h = _h(lang)
    rules = sorted(load_rules(lang=lang), key=lambda r: r.id)
    out = [f"# {h['doc_title']}", "", h["doc_intro"], ""]
    out += [f"| id | {h['col_rule']} | {h['col_title']} | {h['col_group']} | {h['col_status']} |", "|---|---|---|---|---|"]
    out += [f"| {r.id} | [`{r.name}`](#{r.name}-{r.id.lower()}) | {_md(r.title)} | {r.group} | {r.status} |" for r in rules]
    out.append("")
    out += [rule_markdown(r, lang) for r in rules]
    out += peer_coverage_markdown(rules, lang)
    return "\n".join(out).rstrip() + "\n"


def peer_coverage_markdown(rules: list[Rule], lang: str = "en") -> list[str]:
    """The coverage table of ``docs/peer_checks.yaml`` (no lines when the
    data file is not there, as in an installed package)."""
    from advisor.engine import peer_checks

    if not peer_checks.DATA_PATH.is_file():
        return []
    h = _h(lang)
    table = peer_checks.load()
    anchors = {r.name: f"#{r.name}-{r.id.lower()}" for r in rules}
    covered, total = table.share()
    with_planned, _ = table.share(with_planned=True)
    peers = ", ".join(f"{name} {info['version']}" for name, info in table.peers.items())
    out = [f"## {h['peer_title']}", "",
           h["peer_intro"].format(peers=peers, covered=covered, total=total)
           + (h["peer_planned"].format(with_planned=with_planned, total=total) if with_planned > covered else ""),
           "",
           f"| {h['col_peer']} | {h['col_check']} | {h['col_source']} | {h['col_advisor']} | {h['col_beyond']} |",
           "|---|---|---|---|---|"]
    for c in table.checks:
        cover = [f"[`{r}`]({anchors[r]})" if r in anchors else f"`{r}` ({h['planned']})" for r in c.rules]
        cover += [f"`{m}`" for m in c.metrics]
        cover += [f"`advisor {c.command}`"] if c.command else []
        note = h["not_covered"].format(why=_md(c.not_covered)) if c.not_covered else _md(c.beyond or "")
        out.append(f"| {c.peer} | **{c.check}**: {_md(c.title)} | `{c.source}` | {', '.join(cover)} | {note} |")
    named = {r for c in table.checks for r in c.rules}
    only_advisor = [f"[`{r.name}`]({anchors[r.name]})" for r in rules if r.name not in named]
    out += ["", h["peer_none"].format(rules=", ".join(only_advisor) or "-"), ""]
    return out


DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


def main(argv: list[str] | None = None) -> int:
    """``python -m advisor.engine.docs [PATH]``: write the rule reference."""
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else DOC_PATH
    write_atomic(path, rules_markdown("en"))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
