"""UI texts of the reports, one message table per language.

Every heading, label and fixed phrase a renderer shows comes from here; texts
that come from the profile or from rules (titles, messages, fixes) do not.
``MESSAGES`` has one table per language of ``advisor.i18n.LANGS``, with the
same keys; a key a table lacks falls back to English, so a partial table
still works.
Placeholders use ``str.format`` syntax (``{n}``); numbers are formatted by
the caller, never here.
"""

from __future__ import annotations

import re
from functools import cache

from advisor.i18n import DEFAULT_LANG

EN: dict[str, str] = {
    # document
    "doc_title": "advisor report",
    "doc_subtitle": "Training performance report",
    "nav_findings": "Findings",
    "nav_charts": "Charts",
    "nav_metrics": "Metrics",
    "nav_skipped": "Skipped",
    "nav_run": "Run",
    # verdict
    "verdict_label": "Verdict",
    "verdict_none": "No problems found",
    "verdict_none_detail": "No rule fired on this run.",
    "verdict_problems": "Problems",
    "verdict_clean": "Clean",
    "verdict_inconclusive": "Inconclusive",
    "verdict_problems_title": "Problems found",
    "verdict_clean_title": "No problems found",
    "verdict_inconclusive_title": "Inconclusive: the profile does not hold enough to judge this run",
    "verdict_missing": "Could not be judged",
    "bound_compute": "compute-bound: the device computes {pct} of step time",
    "bound_comm": "communication-bound: exposed communication takes {pct} of step time",
    "bound_data_wait": "input-bound: training waits for the next batch {pct} of step time",
    "bound_largest": "largest part of the step: {part}, {pct} of step time",
    "cause_data_wait": "training waits for the next batch {pct} of step time",
    "cause_interval": "the iteration interval between steps (host / input wait) takes {pct} of step time",
    "cause_free": "the device is idle {pct} of step time",
    "cause_free_host": "no operator runs {pct} of step time",
    "cause_exposed_comm": "exposed communication takes {pct} of step time",
    "cause_tail": "the step tail after backward (gradient all-reduce and optimizer) takes {pct} of step time",
    "cause_computing": "the device computes {pct} of step time",
    "cause_fp_bp": "forward and backward take {pct} of step time",
    "bound_free": "device idle: the device is free {pct} of step time (host, input or launch)",
    "bound_free_host": "host outside operators: no operator runs {pct} of step time (Python, data handling, waits)",
    "path_host": "host",
    "path_launch": "launch",
    "path_device": "device",
    "path_sync": "sync",
    "path_split": "critical path {ms} per step: {parts}",
    "path_split_host_only": "critical path {ms} per step, all on the host (a CPU-only trace)",
    "bound_interval": "host/input wait: the iteration interval between steps takes {pct} of step time",
    "bound_fp_bp": "compute-bound: forward and backward take {pct} of step time",
    "bound_tail": "tail-bound: gradient all-reduce and optimizer take {pct} of step time",
    "step_mean": "mean step {ms}",
    "step_mean_def": "Mean over ranks of each rank's mean over steady-state steps; every share of step in this report is of this time.",
    "findings_count_one": "1 finding",
    "findings_count": "{n} findings",
    "gain_up_to": "up to {ms} ms per step to gain ({pct} of step)",
    "gain_up_to_ms": "up to {ms} ms per step to gain",
    # findings
    "findings_heading": "Findings",
    "findings_none": "No rule fired on this run.",
    "findings_order": "Largest estimated gain first. Severity is how much of the step the problem holds; "
                      "the gain is what its fix is expected to give back.",
    "sev_critical": "critical",
    "sev_high": "high",
    "sev_medium": "medium",
    "sev_low": "low",
    "sev_info": "info",
    "gain": "Estimated gain",
    "stake": "Time at stake",
    "stake_pct": "{ms} ms per step ({pct} of step)",
    "stake_ms": "{ms} ms per step",
    "gain_unknown": "gain unknown",
    "per_step": "per step",
    "of_step": "of step",
    "pct_of_step": "({pct} of step)",
    "confidence": "Confidence",
    "evidence": "Evidence",
    "scope": "Scope",
    "scope_run": "whole run",
    "n_ranks": "{n} ranks",
    "n_ranks_one": "1 rank",
    "n_steps": "{n} steps",
    "n_steps_one": "1 step",
    "scope_ranks": "ranks",
    "scope_steps": "steps",
    "scope_ops": "ops",
    "fix": "Fix",
    "fix_for": "for {framework}",
    "fix_default": "for any framework",
    "no_fix": "No fix is suggested for this finding.",
    "caveats": "Caveats",
    "copy": "Copy",
    "copied": "Copied",
    "copy_failed": "Select and copy",
    "more_findings": "{n} more findings",
    "contributing": "Contributing causes",
    "contributing_note": "These causes claim the same time as the finding above; their gains are not added to its gain.",
    # charts
    "charts_heading": "Charts",
    "chart_steps": "Step time breakdown per step",
    "chart_steps_note": "Mean over ranks, ms.",
    "chart_ranks": "Step time breakdown per rank",
    "chart_ranks_note": "Mean over steps, ms.",
    "chart_ops": "Top operators by total time",
    "chart_ops_note": "Total device time, ms.",
    "chart_links": "Slowest links by bandwidth",
    "chart_links_note": "Point-to-point links, GB/s, slowest first.",
    "chart_missing_links": "Links chart omitted: the profile has no communication matrix.",
    "series_bandwidth": "bandwidth",
    "chart_series": "Step time per step",
    "chart_series_note": "ms; anomalous steps flagged by the anomaly model: {n}. Drag to zoom.",
    "chart_heatmap": "Per-rank heatmap",
    "chart_heatmap_note": "Mean over steps, ms; colour: deviation from the median rank, in %. Hover a cell for its value.",
    "chart_heatmap_note_grouped": "Mean over steps, ms, the slowest rank of each group of ranks; colour: deviation from the median, in %. Hover a cell for its value.",
    "heatmap_vs_median": "vs. median rank",
    "heatmap_median": "(white: at the median rank; blue: less time, red: more)",
    "heatmap_legend": "Deviation from the median rank (% of its value; widest here {widest})",
    "series_computing_all": "computing",
    "series_data_wait": "data wait",
    "series_max_rank": "slowest rank",
    "series_min_rank": "fastest rank",
    "series_outlier": "anomalous step",
    "axis_rank_group": "ranks",
    "zoom_reset": "Reset zoom",
    "chart_missing_steps": "Step breakdown chart omitted: the profile has no per-step breakdown.",
    "chart_missing_ranks": "Per-rank chart omitted: the profile has one rank only.",
    "chart_missing_ranks_data": "Per-rank chart omitted: the profile has no per-rank breakdown.",
    "chart_missing_ops": "Top operators chart omitted: the profile has no operator table.",
    "series_computing": "computing (not overlapped)",
    "series_overlapped": "overlapped compute + comm.",
    "series_exposed_comm": "exposed communication",
    "series_free": "free (device idle)",
    "series_free_host": "free (no operator running)",
    "series_duration": "step time",
    "series_interval": "iteration interval (host / data wait)",
    "series_fp_bp": "forward + backward",
    "series_tail": "tail (all-reduce + optimizer)",
    "series_total": "total time",
    "axis_ms": "ms",
    "axis_step": "step",
    "axis_rank": "rank",
    "step_share": "Where step time goes",
    # metrics
    "metrics_heading": "Metrics",
    "metrics_none": "No metrics were computed.",
    "filter_placeholder": "Filter metrics by id, value or unit",
    "filter_label": "Filter",
    "scope_all": "all scopes",
    "showing": "Showing {shown} of {total}",
    "col_id": "id",
    "col_value": "value",
    "col_unit": "unit",
    "col_scope": "scope",
    # metric units and scopes as the metrics table shows them (a unit without a key is shown as it is)
    "unit_ms": "ms", "unit_ratio": "ratio", "unit_count": "count", "unit_text": "text", "unit_list": "list",
    "unit_map": "map", "unit_rank": "rank", "unit_stage": "stage", "unit_steps": "steps", "unit_z": "z-score",
    "unit_us": "us", "unit_bool": "yes / no", "unit_%": "%", "unit_p": "p-value",
    "scope_name_run": "run", "scope_name_step": "step", "scope_name_rank": "rank", "scope_name_op": "operator",
    "scope_name_link": "link",
    # skipped items whose text comes from a fixed template of the metric registry
    # (advisor/metrics/registry.py); matched in English, shown in the report's language
    "skip_what_metric": "metric {id}",
    "skip_no_table": "no {table} table in this profile",
    "skip_no_column": "the {table} table has no {column} values",
    "skip_failed": "metric {id} failed on this input: {error}",
    "skip_no_value": "no value on this profile",
    "skip_single_rank": "a single rank: nothing to compare",
    "sort_hint": "Sort by this column",
    # operators
    "ops_heading": "Operators",
    "ops_filter_placeholder": "Filter operators by name, type or core",
    "col_op_name": "name",
    "col_op_type": "type",
    "col_op_core": "core",
    "col_op_input_dtypes": "input dtypes",
    "col_op_count": "calls",
    "col_op_total_ms": "total ms",
    "col_op_per_step_ms": "ms per step",
    # skipped
    "skipped_heading": "Skipped / not evaluated",
    "skipped_none": "Nothing was skipped.",
    "col_what": "what",
    "col_reason": "why",
    # run
    "run_heading": "Run",
    "meta_framework": "Framework",
    "meta_device": "Device",
    "meta_format": "Source format",
    "meta_source": "Source",
    "meta_ranks": "Ranks",
    "meta_steps": "Steps",
    "meta_version": "advisor version",
    "meta_generated": "Generated",
    "meta_schema": "Report schema",
    "meta_notes": "Notes",
    "footer": "Generated by advisor {version}. Charts: Chart.js (MIT licence), inlined.",
    # markdown only
    "md_title": "advisor: performance report",
    "md_findings_heading": "Findings",
    "md_fixes_heading": "Fixes",
    "md_metrics_heading": "Key metrics",
    "md_skipped_heading": "Skipped / not evaluated",
    "md_col_severity": "severity",
    "md_col_rule": "rule",
    "md_col_message": "message",
    "md_col_gain": "est. gain",
    "md_run_line": "{framework} on {device}, {format}, {ranks} rank(s), {steps} step(s)",
    "md_truncated": "{n} more {noun} not shown: a comment is capped at {cap} characters; see report.html or report.json.",
    "md_noun_findings": "findings",
    "md_noun_fixes": "fixes",
    "md_noun_metrics": "metrics",
    "md_noun_skipped": "skipped items",
    "md_noun_notes": "notes",
    "md_metrics_more": "{n} more metrics in report.html and report.json.",
    "md_contributing": "Contributing",
    # terminal
    "term_title": "advisor: {n} finding(s), largest estimated gain first",
    "term_none": "advisor: no problems found",
    "term_verdict": "advisor: verdict {status}: {reason}",
    "term_missing": "  not judged: {text}",
    "term_more_missing": "  ... and {n} more not judged (see the report)",
    "term_contributing": "{n} also:",
    "term_more": "... and {n} more (see the report)",
    "term_note": "note: {text}",
    "term_more_notes": "... and {n} more notes (see the report)",
    "term_fix": "fix {label}: {text}",
    "term_fix_more": "... {n} more line(s) in the report",
    "term_fix_hint": "(the fixes of {n} more finding(s): --verbose, or the report)",
}

ZH: dict[str, str] = {
    # document
    "doc_title": "advisor 报告",
    "doc_subtitle": "训练性能分析报告",
    "nav_findings": "问题",
    "nav_charts": "图表",
    "nav_metrics": "指标",
    "nav_skipped": "未评估项",
    "nav_run": "运行信息",
    # verdict
    "verdict_label": "结论",
    "verdict_none": "未发现问题",
    "verdict_none_detail": "本次运行没有触发任何规则。",
    "verdict_problems": "存在问题",
    "verdict_clean": "正常",
    "verdict_inconclusive": "无法判断",
    "verdict_problems_title": "发现问题",
    "verdict_clean_title": "未发现问题",
    "verdict_inconclusive_title": "无法判断：profile 中的数据不足以评判本次运行",
    "verdict_missing": "无法评估的检查",
    "bound_compute": "计算瓶颈：设备计算占迭代时间的 {pct}",
    "bound_comm": "通信瓶颈：通信未掩盖时间占迭代时间的 {pct}",
    "bound_data_wait": "数据瓶颈：训练等待下一批数据的时间占迭代时间的 {pct}",
    "bound_largest": "迭代时间中最大的部分：{part}，占 {pct}",
    "cause_data_wait": "训练等待下一批数据的时间占迭代时间的 {pct}",
    "cause_interval": "迭代间隙（Host/数据等待）占迭代时间的 {pct}",
    "cause_free": "设备空闲时间占迭代时间的 {pct}",
    "cause_free_host": "无算子运行的时间占迭代时间的 {pct}",
    "cause_exposed_comm": "通信未掩盖时间占迭代时间的 {pct}",
    "cause_tail": "反向之后的迭代拖尾（梯度 AllReduce 和优化器）占迭代时间的 {pct}",
    "cause_computing": "设备计算占迭代时间的 {pct}",
    "cause_fp_bp": "前反向占迭代时间的 {pct}",
    "bound_free": "设备空闲：设备空闲时间占迭代时间的 {pct}（Host 侧、数据输入或算子下发）",
    "bound_free_host": "算子之外的 Host 时间：无算子运行的时间占迭代时间的 {pct}（Python、数据处理、等待）",
    "path_host": "Host 侧",
    "path_launch": "下发",
    "path_device": "设备",
    "path_sync": "同步",
    "path_split": "关键路径每步 {ms}：{parts}",
    "path_split_host_only": "关键路径每步 {ms}，全部在 Host 上（仅 CPU 的 trace）",
    "bound_interval": "Host/数据等待：迭代间隙占迭代时间的 {pct}",
    "bound_fp_bp": "计算瓶颈：前反向占迭代时间的 {pct}",
    "bound_tail": "迭代拖尾瓶颈：梯度 AllReduce 和优化器更新占迭代时间的 {pct}",
    "step_mean": "平均迭代时间 {ms}",
    "step_mean_def": "各卡稳态迭代时间均值的卡间平均；报告中所有“占迭代时间”的比例均以此为准。",
    "findings_count_one": "1 个问题",
    "findings_count": "{n} 个问题",
    "gain_up_to": "每步最多可节省 {ms} ms（迭代时间的 {pct}）",
    "gain_up_to_ms": "每步最多可节省 {ms} ms",
    # findings
    "findings_heading": "问题",
    "findings_none": "本次运行没有触发任何规则。",
    "findings_order": "按预计收益从大到小排列。严重程度表示问题占迭代时间的多少，预计收益表示修复后预计能节省的时间。",
    "sev_critical": "严重",
    "sev_high": "高",
    "sev_medium": "中",
    "sev_low": "低",
    "sev_info": "提示",
    "gain": "预计收益",
    "stake": "涉及耗时",
    "stake_pct": "每步 {ms} ms（迭代时间的 {pct}）",
    "stake_ms": "每步 {ms} ms",
    "gain_unknown": "收益未知",
    "per_step": "每步",
    "of_step": "迭代时间",
    "pct_of_step": "（迭代时间的 {pct}）",
    "confidence": "置信度",
    "evidence": "依据",
    "scope": "范围",
    "scope_run": "整个运行",
    "n_ranks": "{n} 卡",
    "n_ranks_one": "1 卡",
    "n_steps": "{n} 步",
    "n_steps_one": "1 步",
    "scope_ranks": "卡（rank）",
    "scope_steps": "迭代",
    "scope_ops": "算子",
    "fix": "优化建议",
    "fix_for": "适用于 {framework}",
    "fix_default": "通用",
    "no_fix": "该问题暂无优化建议。",
    "caveats": "注意事项",
    "copy": "复制",
    "copied": "已复制",
    "copy_failed": "请手动选择并复制",
    "more_findings": "另有 {n} 个问题",
    "contributing": "相关原因",
    "contributing_note": "以下原因涉及的是与上述问题相同的时间；它们的收益不会叠加到该问题的收益上。",
    # charts
    "charts_heading": "图表",
    "chart_steps": "每步迭代时间分解",
    "chart_steps_note": "各卡平均，单位 ms。",
    "chart_ranks": "每卡迭代时间分解",
    "chart_ranks_note": "各步平均，单位 ms。",
    "chart_ops": "总耗时最长的算子",
    "chart_ops_note": "设备侧总耗时，单位 ms。",
    "chart_links": "带宽最低的通信链路",
    "chart_links_note": "点对点链路，单位 GB/s，最慢的在前。",
    "chart_missing_links": "未绘制链路图：profile 中没有通信矩阵。",
    "series_bandwidth": "带宽",
    "chart_series": "每步迭代时间",
    "chart_series_note": "单位 ms；异常检测模型标记的异常迭代：{n} 个。拖动鼠标可缩放。",
    "chart_heatmap": "各卡热力图",
    "chart_heatmap_note": "各步平均，单位 ms；颜色表示相对中位数卡的偏差（%）。悬停查看数值。",
    "chart_heatmap_note_grouped": "各步平均，单位 ms，每组卡取最慢的一张；颜色表示相对中位数的偏差（%）。悬停查看数值。",
    "heatmap_vs_median": "相对中位数卡",
    "heatmap_median": "（白色：等于中位数卡；蓝色：时间更少，红色：时间更多）",
    "heatmap_legend": "相对中位数卡的偏差（占其数值的 %；本图最大 {widest}）",
    "series_computing_all": "计算",
    "series_data_wait": "数据等待",
    "series_max_rank": "最慢的卡",
    "series_min_rank": "最快的卡",
    "series_outlier": "异常迭代",
    "axis_rank_group": "卡（分组）",
    "zoom_reset": "重置缩放",
    "chart_missing_steps": "未绘制迭代分解图：profile 中没有每步的时间分解。",
    "chart_missing_ranks": "未绘制每卡对比图：profile 中只有一张卡。",
    "chart_missing_ranks_data": "未绘制每卡对比图：profile 中没有每卡的时间分解。",
    "chart_missing_ops": "未绘制算子图：profile 中没有算子表。",
    "series_computing": "计算（未被通信掩盖部分）",
    "series_overlapped": "计算与通信重叠",
    "series_exposed_comm": "通信未掩盖",
    "series_free": "空闲（设备空闲）",
    "series_free_host": "空闲（无算子运行）",
    "series_duration": "迭代时间",
    "series_interval": "迭代间隙（Host/数据等待）",
    "series_fp_bp": "前反向",
    "series_tail": "迭代拖尾（AllReduce + 优化器）",
    "series_total": "总耗时",
    "axis_ms": "ms",
    "axis_step": "迭代",
    "axis_rank": "卡",
    "step_share": "迭代时间构成",
    # metrics
    "metrics_heading": "指标",
    "metrics_none": "没有计算出任何指标。",
    "filter_placeholder": "按 id、值或单位筛选指标",
    "filter_label": "筛选",
    "scope_all": "全部范围",
    "showing": "显示 {shown} / {total}",
    "col_id": "id",
    "col_value": "值",
    "col_unit": "单位",
    "col_scope": "范围",
    "unit_ms": "毫秒", "unit_ratio": "比例", "unit_count": "个数", "unit_text": "文本", "unit_list": "列表",
    "unit_map": "映射", "unit_rank": "rank 编号", "unit_stage": "流水线阶段", "unit_steps": "步数", "unit_z": "z 分数",
    "unit_us": "微秒", "unit_bool": "是 / 否", "unit_%": "百分比", "unit_p": "p 值",
    "scope_name_run": "整个运行", "scope_name_step": "迭代", "scope_name_rank": "每个 rank", "scope_name_op": "算子",
    "scope_name_link": "链路",
    "skip_what_metric": "指标 {id}",
    "skip_no_table": "此 profile 中没有 {table} 表",
    "skip_no_column": "{table} 表中没有 {column} 的值",
    "skip_failed": "指标 {id} 在此输入上计算失败：{error}",
    "skip_no_value": "此 profile 上没有取值",
    "skip_single_rank": "只有一个 rank：没有可比较的对象",
    "ops_heading": "算子",
    "ops_filter_placeholder": "按名称、类型或核筛选算子",
    "col_op_name": "名称",
    "col_op_type": "类型",
    "col_op_core": "核",
    "col_op_input_dtypes": "输入数据类型",
    "col_op_count": "调用次数",
    "col_op_total_ms": "总耗时 ms",
    "col_op_per_step_ms": "每步 ms",
    "sort_hint": "按此列排序",
    # skipped
    "skipped_heading": "跳过 / 未评估",
    "skipped_none": "没有跳过任何内容。",
    "col_what": "对象",
    "col_reason": "原因",
    # run
    "run_heading": "运行信息",
    "meta_framework": "框架",
    "meta_device": "设备",
    "meta_format": "数据格式",
    "meta_source": "数据来源",
    "meta_ranks": "卡数",
    "meta_steps": "迭代数",
    "meta_version": "advisor 版本",
    "meta_generated": "生成时间",
    "meta_schema": "报告 schema 版本",
    "meta_notes": "备注",
    "footer": "由 advisor {version} 生成。图表：Chart.js（MIT 许可），已内嵌。",
    # markdown only
    "md_title": "advisor：性能分析报告",
    "md_findings_heading": "问题",
    "md_fixes_heading": "优化建议",
    "md_metrics_heading": "关键指标",
    "md_skipped_heading": "跳过 / 未评估",
    "md_col_severity": "严重程度",
    "md_col_rule": "规则",
    "md_col_message": "说明",
    "md_col_gain": "预计收益",
    "md_run_line": "{framework}，{device}，{format}，{ranks} 卡，{steps} 步",
    "md_truncated": "另有 {n} 条{noun}未显示：评论最多 {cap} 个字符，完整内容见 report.html 或 report.json。",
    "md_noun_findings": "问题",
    "md_noun_fixes": "优化建议",
    "md_noun_metrics": "指标",
    "md_noun_skipped": "跳过项",
    "md_noun_notes": "备注",
    "md_metrics_more": "另有 {n} 个指标，见 report.html 和 report.json。",
    "md_contributing": "相关原因",
    # terminal
    "term_title": "advisor：发现 {n} 个问题，按预计收益从大到小",
    "term_none": "advisor：未发现问题",
    "term_verdict": "advisor：结论 {status}：{reason}",
    "term_missing": "  无法评估：{text}",
    "term_more_missing": "  ……另有 {n} 项无法评估（见报告）",
    "term_contributing": "{n} 相关：",
    "term_more": "……另有 {n} 个（见报告）",
    "term_note": "备注：{text}",
    "term_more_notes": "……另有 {n} 条备注（见报告）",
    "term_fix": "优化建议（{label}）：{text}",
    "term_fix_more": "……另有 {n} 行（见报告）",
    "term_fix_hint": "（另有 {n} 个问题的优化建议：使用 --verbose，或见报告）",
    "term_report": "报告：{path}",
    "term_reading": "读取 profile",
}

EN["term_report"] = "report: {path}"
EN["term_reading"] = "reading the profile"

MESSAGES: dict[str, dict[str, str]] = {"en": EN, "zh": ZH}


def messages(lang: str = DEFAULT_LANG) -> dict[str, str]:
    """The full message table for ``lang``: its own texts over English."""
    table = MESSAGES.get(lang)
    if table is None or table is EN:
        return EN
    return {**EN, **table}


def t(lang: str, key: str, **kwargs: object) -> str:
    """One UI text in ``lang`` with ``{placeholders}`` filled in."""
    text = messages(lang)[key]
    return text.format(**kwargs) if kwargs else text


#: Keys of the fixed skip-reason templates (``skip_*`` above), most specific first.
SKIP_REASON_KEYS = ("skip_failed", "skip_no_column", "skip_no_table", "skip_no_value", "skip_single_rank")


@cache
def _pattern(template: str) -> re.Pattern[str]:
    """The English ``template`` as a regex, each ``{name}`` a named group."""
    parts = re.split(r"\{(\w+)\}", template)
    rx = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts))
    return re.compile(rx + r"\Z", re.DOTALL)


def _localized(lang: str, text: str, keys: tuple[str, ...]) -> str:
    if lang == DEFAULT_LANG:
        return text
    for key in keys:
        m = _pattern(EN[key]).match(text)
        if m:
            return t(lang, key, **m.groupdict())
    return text


def skip_texts(lang: str, what: str, reason: str) -> tuple[str, str]:
    """A skipped item's (what, reason) in ``lang`` where the text is one of
    the fixed templates (:data:`SKIP_REASON_KEYS`, ``skip_what_metric``);
    other texts are returned as they are."""
    return _localized(lang, what, ("skip_what_metric",)), _localized(lang, reason, SKIP_REASON_KEYS)


def unit_text(lang: str, unit: str) -> str:
    """A metric unit in ``lang`` (``GB/s`` and other symbols as they are)."""
    return t(lang, f"unit_{unit}") if f"unit_{unit}" in EN else unit


def scope_name(lang: str, scope: str) -> str:
    """A metric scope (run, step, rank, op, link) in ``lang``."""
    return t(lang, f"scope_name_{scope}") if f"scope_name_{scope}" in EN else scope
