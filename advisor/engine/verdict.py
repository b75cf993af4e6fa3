"""The run's verdict: ``problems``, ``clean`` or ``inconclusive``.

A report where most checks could not run is not a clean bill of health, so
the verdict weighs what the rules could judge, not only what fired.

**Kinds of checks.** Rules are grouped by what they judge (their
``group``): ``data`` (is the step waiting for input?), ``host`` (does the
device idle for its host?), ``compute`` (is the device's own work slow?),
``communication`` (does the step wait for collectives?) and ``cluster``
(does one rank or link hold the others back?). ``stability`` (outlier
steps) is not weighed: it judges the spread of step times, needs many
steps, and says nothing about where a step's time goes; nor is ``habits``
(garbage collection, the optimizer's implementation, allocator calls, the
environment): it reads host events and settings, which a trace holds even
when its device record is missing, so passing it says nothing about the
device's time either. A kind of check
*matters* for a run when at least one of its rules applies to the run's
framework and device, and, for ``communication``, the run is distributed
(several ranks read, a world size above one, or collectives recorded) and,
for ``cluster``, several ranks were read that can be compared (ranks not
merely assigned to unlabelled files). It is *judged* when at least one of
its rules was evaluated (fired or passed).

**Status**, first match:

0. A memory timeline (``meta.source_format`` ``memory_timeline``) records
   memory, not time: no kind of check above matters for it, and
   ``missing`` says that no timing check applies. It is ``problems`` when
   a memory finding is of :data:`PROBLEM_SEVERITY` or above, else
   ``inconclusive``, its reason naming the memory figures (peak, iterations)
   and saying there is no verdict on where time goes: a timeline without a
   leak is not a clean bill of health for the run's speed.
1. ``inconclusive`` when the window is mostly start-up
   (``window.warmup_ratio`` less ``window.recompile_ratio``, the
   recompilations a failing guard repeats, >= :data:`WARMUP_RATIO`): whatever fired
   describes start-up, not training; or when the device record is too
   sparse to be a training step (``window.device_ops_per_step`` below
   ``MIN_DEVICE_OPS_PER_STEP`` of ``advisor.metrics.window``): a toy, a
   micro-benchmark or a cut trace gets no verdict on training.
2. ``problems`` when a finding (primary or contributing) has severity
   :data:`PROBLEM_SEVERITY` or above, even where other kinds of checks
   could not be judged (they are listed as missing). The count it gives is
   of findings as the report lists them: a primary with its contributing
   causes is one (one cause, one finding: ``advisor.engine.pools``).
3. ``inconclusive`` when fewer than :data:`MIN_JUDGED_SHARE` of the kinds
   of checks that matter were judged (or none matters).
4. ``clean`` otherwise: the checks ran and found nothing of medium
   severity or above. Low and info findings (under 10% of the step under
   automatic severity) are listed but do not make a run ``problems``.

``missing`` lists, one line each, every kind of check that matters and
could not be judged, with the metrics its rules lacked and why.
"""

from __future__ import annotations

from collections.abc import Mapping

from advisor.collectors.memory.collector import SOURCE_FORMAT as MEMORY_TIMELINE
from advisor.engine.evaluation import SEVERITY_WORDS, RuleOutcome
from advisor.metrics.reasons import localized
from advisor.metrics.window import MIN_DEVICE_OPS_PER_STEP
from advisor.model import SEVERITY_ORDER, CheckGroup, Finding, Verdict
from advisor.profile import RunMeta

#: Kinds of checks the verdict weighs (rule groups), in the order it lists them.
CHECK_GROUPS = ("data", "host", "compute", "communication", "cluster")
#: Lowest severity that makes a run ``problems``: under automatic severity,
#: 10% of the step or more at stake. Below it (low: 3-10%, info: < 3%) a
#: cause is within what run-to-run variation of step times moves.
PROBLEM_SEVERITY = "medium"
#: Share of the kinds of checks that matter that must be judged for a
#: ``clean`` verdict: at least half, i.e. not "most could not be evaluated".
MIN_JUDGED_SHARE = 0.5
#: ``window.warmup_ratio`` at or above which the window is mostly start-up
#: (the same bound that makes a single step a warm-up step).
WARMUP_RATIO = 0.5
WARMUP_METRIC = "window.warmup_ratio"
#: The part of ``WARMUP_METRIC`` that is torch.compile recompiling, which is
#: not start-up (step 1 of the status).
RECOMPILE_METRIC = "window.recompile_ratio"
SPARSE_METRIC = "window.device_ops_per_step"
#: The memory figures a memory timeline's verdict names.
MEMORY_PEAK_METRIC = "memory.peak_gib"
MEMORY_ITERATIONS_METRIC = "memory.iterations"

#: The verdict's texts, per language.
VERDICT_TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "group_data": "input data",
        "group_host": "host / device idle",
        "group_compute": "compute",
        "group_communication": "communication",
        "group_cluster": "rank balance",
        "problems": "{n} finding(s) of {sev} severity or above, led by: {title}",
        "problems_partial": "; {k} of {m} kinds of checks could not be evaluated (see what is missing)",
        "clean": "{j} of {m} kinds of checks ran ({groups}) and found nothing of {sev} severity or above",
        "clean_minor": "; {n} minor finding(s) are listed",
        "inconclusive": "only {j} of {m} kinds of checks that matter for {where} could be evaluated: the "
                        "profile lacks what the others need",
        "inconclusive_none": "none of the {m} kinds of checks that matter for {where} could be evaluated: the "
                             "profile lacks what they need",
        "no_checks": "no check applies to {where}",
        "where": "{framework} on {device}",
        "where_device": "a run on {device}",
        "warmup": "the window is mostly start-up ({pct} of it): the findings describe start-up, not "
                  "training; profile later steps",
        "missing": "{group}: {why}",
        "metric_reason": "{metrics}: {reason}",
        "rule_reason": "{rule}: {reason}",
        "more_reasons": "and {n} more reason(s) (the report's skipped list names them)",
        "reason_separator": "; ",
        "more_metrics": "{metrics} and {n} more",
        "not_evaluated": "not evaluated",
        "warmup_missing": "steady-state steps: {pct} of the window is start-up",
        "sparse": "the device record is too sparse to be a training step ({n:g} device operations per step; "
                  "a training step launches at least {min}): a toy, a micro-benchmark or a cut trace; "
                  "profile whole training steps",
        "sparse_missing": "training steps: {n:g} device operations per step",
        "memory_only": "a memory timeline records memory, not time: no timing check applies, so there is no "
                       "verdict on where time goes{figures}",
        "memory_figures": " (memory: peak {peak:.2f} GiB{iterations})",
        "memory_iterations": " over {n} iteration(s)",
        "memory_partial": "; a memory timeline records memory, not time: no timing check applies",
        "memory_missing": "timing checks: a memory timeline records memory, not steps, operators or collectives; "
                          "profile with torch.profiler (a Kineto trace) for them",
        "sep": ", ",
    },
    "zh": {
        "group_data": "数据输入",
        "group_host": "Host/设备空闲",
        "group_compute": "计算",
        "group_communication": "通信",
        "group_cluster": "卡间均衡",
        "problems": "{n} 个严重程度为{sev}及以上的问题，首要问题：{title}",
        "problems_partial": "；{m} 类检查中有 {k} 类无法评估（见缺失项）",
        "clean": "{m} 类检查中 {j} 类已运行（{groups}），未发现严重程度为{sev}及以上的问题",
        "clean_minor": "；另列出 {n} 个次要问题",
        "inconclusive": "对{where}重要的 {m} 类检查中只有 {j} 类可以评估：profile 缺少其余检查所需的数据",
        "inconclusive_none": "对{where}重要的 {m} 类检查都无法评估：profile 缺少所需的数据",
        "no_checks": "没有适用于{where}的检查",
        "where": " {framework}/{device} ",
        "where_device": " {device} 上的运行",
        "warmup": "采集窗口主要是启动阶段（占 {pct}）：问题描述的是启动过程而非训练；请采集更靠后的迭代",
        "missing": "{group}：{why}",
        "metric_reason": "{metrics}：{reason}",
        "rule_reason": "{rule}：{reason}",
        "more_reasons": "另有 {n} 条原因（报告末尾逐条列出）",
        "reason_separator": "；",
        "more_metrics": "{metrics} 等（另有 {n} 项）",
        "not_evaluated": "未评估",
        "warmup_missing": "稳定阶段的迭代：窗口的 {pct} 是启动阶段",
        "sparse": "设备记录过于稀疏，不像一个训练迭代（每个迭代 {n:g} 个设备操作；训练迭代至少下发 {min} 个）："
                  "这是玩具示例、微基准或被截断的 trace；请采集完整的训练迭代",
        "sparse_missing": "训练迭代：每个迭代 {n:g} 个设备操作",
        "memory_only": "内存时间线只记录内存而不记录时间：没有适用的耗时检查，因此无法判断时间花在哪里{figures}",
        "memory_figures": "（内存：峰值 {peak:.2f} GiB{iterations}）",
        "memory_iterations": "，共 {n} 个迭代",
        "memory_partial": "；内存时间线只记录内存而不记录时间：没有适用的耗时检查",
        "memory_missing": "耗时检查：内存时间线只记录内存，不含迭代、算子或通信；请用 torch.profiler 采集 trace（Kineto）以进行这些检查",
        "sep": "、",
    },
}


def _t(lang: str, key: str, **kw: object) -> str:
    table = VERDICT_TEXTS.get(lang, VERDICT_TEXTS["en"])
    return table[key].format(**kw)


def group_label(group: str, lang: str) -> str:
    """A kind of check as users read it (``data`` -> "input data")."""
    return _t(lang, f"group_{group}")


def matters(group: str, outcomes: list[RuleOutcome], meta: RunMeta, collectives: bool) -> bool:
    """Whether a kind of check matters for this run (see module doc)."""
    if not any(o.rule.group == group and o.status != "not_applicable" for o in outcomes):
        return False
    comparable = len(meta.ranks) > 1 and not meta.ranks_inferred
    if group == "communication":
        return comparable or (meta.world_size or 1) > 1 or collectives
    if group == "cluster":
        return comparable
    return True


#: Metrics named per reason (the rest are counted).
MAX_METRICS = 3
#: Reasons a kind of check could not be judged that the verdict names (the
#: first rules' of that kind, in rule order); the rest are in ``skipped``.
MAX_REASONS = 2


def _metric_list(metrics: list[str], lang: str) -> str:
    if len(metrics) <= MAX_METRICS:
        return ", ".join(metrics)
    return _t(lang, "more_metrics", metrics=", ".join(metrics[:MAX_METRICS]), n=len(metrics) - MAX_METRICS)


def _why(outcomes: list[RuleOutcome], metric_reasons: Mapping[str, str], lang: str) -> str:
    """Why a kind of check could not be judged: the metrics its rules lacked,
    grouped by the reason each was not evaluated."""
    by_reason: dict[str, list[str]] = {}
    rule_reasons: list[str] = []
    for o in outcomes:
        if o.status != "skipped":
            continue
        if not o.missing:
            rule_reasons.append(_t(lang, "rule_reason", rule=o.rule.name, reason=o.reason or ""))
        for m in o.missing:
            reason = localized(metric_reasons[m], lang) if metric_reasons.get(m) else _t(lang, "not_evaluated")
            if m not in by_reason.setdefault(reason, []):
                by_reason[reason].append(m)
    parts = list(dict.fromkeys(
        [_t(lang, "metric_reason", metrics=_metric_list(ms, lang), reason=r) for r, ms in by_reason.items()]
        + rule_reasons))
    if len(parts) > MAX_REASONS:
        parts = parts[:MAX_REASONS] + [_t(lang, "more_reasons", n=len(parts) - MAX_REASONS)]
    return _t(lang, "reason_separator").join(parts)


def _number(values: Mapping[str, object], metric: str) -> float | None:
    """A metric's value when it is a number (not a bool, a list or absent)."""
    value = values.get(metric)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _memory_figures(values: Mapping[str, object], lang: str) -> str:
    """The memory figures a memory timeline's verdict names ('' without them)."""
    peak = _number(values, MEMORY_PEAK_METRIC)
    if peak is None:
        return ""
    n = _number(values, MEMORY_ITERATIONS_METRIC)
    iterations = _t(lang, "memory_iterations", n=n) if isinstance(n, int) else ""
    return _t(lang, "memory_figures", peak=peak, iterations=iterations)


def _pct(ratio: float) -> str:
    return f"{100.0 * ratio:.0f}%"


def judge(
    outcomes: list[RuleOutcome],
    findings: list[Finding],
    *,
    meta: RunMeta,
    collectives: bool,
    metric_values: Mapping[str, object],
    metric_reasons: Mapping[str, str],
    lang: str = "en",
) -> Verdict:
    """The verdict (see module doc). ``outcomes``: every rule's outcome;
    ``findings``: the merged findings; ``collectives``: the profile recorded
    collectives; ``metric_values``: metric id -> value; ``metric_reasons``:
    metric id -> why it was not evaluated."""
    checks: list[CheckGroup] = []
    missing: list[str] = []
    memory_only = meta.source_format == MEMORY_TIMELINE
    if memory_only:
        missing.append(_t(lang, "memory_missing"))
    for group in CHECK_GROUPS:
        if memory_only or not matters(group, outcomes, meta, collectives):
            continue
        mine = [o for o in outcomes if o.rule.group == group and o.status != "not_applicable"]
        check = CheckGroup(group=group, judged=any(o.evaluated for o in mine),
                           evaluated=[o.rule.name for o in mine if o.evaluated],
                           skipped=[o.rule.name for o in mine if not o.evaluated])
        checks.append(check)
        if not check.judged:
            missing.append(_t(lang, "missing", group=group_label(group, lang),
                              why=_why(mine, metric_reasons, lang)))
    judged = [c for c in checks if c.judged]
    where_key = "where_device" if meta.framework == "unknown" else "where"
    where = {"where": _t(lang, where_key, framework=meta.framework, device=meta.device)}
    sev_word = SEVERITY_WORDS.get(lang, SEVERITY_WORDS["en"])[PROBLEM_SEVERITY]

    warmup = _number(metric_values, WARMUP_METRIC)
    if warmup is not None:  # recompilations are in the start-up time, yet recur: profiling later leaves none out
        warmup -= _number(metric_values, RECOMPILE_METRIC) or 0.0
    if warmup is not None and warmup >= WARMUP_RATIO:
        missing.insert(0, _t(lang, "warmup_missing", pct=_pct(warmup)))
        return Verdict(status="inconclusive", reason=_t(lang, "warmup", pct=_pct(warmup)),
                       missing=missing, checks=checks)

    sparse = _number(metric_values, SPARSE_METRIC)
    if sparse is not None and sparse < MIN_DEVICE_OPS_PER_STEP:
        missing.insert(0, _t(lang, "sparse_missing", n=sparse))
        return Verdict(status="inconclusive", reason=_t(lang, "sparse", n=sparse, min=MIN_DEVICE_OPS_PER_STEP),
                       missing=missing, checks=checks)

    serious = [f for f in findings
               if any(SEVERITY_ORDER[g.severity] >= SEVERITY_ORDER[PROBLEM_SEVERITY] for g in (f, *f.contributing))]
    if serious:
        lead = serious[0]
        reason = _t(lang, "problems", n=len(serious), sev=sev_word, title=lead.title)
        if memory_only:
            reason += _t(lang, "memory_partial")
        elif missing:
            reason += _t(lang, "problems_partial", k=len(checks) - len(judged), m=len(checks))
        return Verdict(status="problems", reason=reason, missing=missing, checks=checks)

    if memory_only:
        return Verdict(status="inconclusive", reason=_t(lang, "memory_only", figures=_memory_figures(metric_values, lang)),
                       missing=missing, checks=checks)

    if not checks:
        return Verdict(status="inconclusive", reason=_t(lang, "no_checks", **where), missing=missing, checks=checks)
    if len(judged) < MIN_JUDGED_SHARE * len(checks):
        key = "inconclusive" if judged else "inconclusive_none"
        return Verdict(status="inconclusive", reason=_t(lang, key, j=len(judged), m=len(checks), **where),
                       missing=missing, checks=checks)
    reason = _t(lang, "clean", j=len(judged), m=len(checks), sev=sev_word,
                groups=_t(lang, "sep").join(group_label(c.group, lang) for c in judged))
    if findings:
        reason += _t(lang, "clean_minor", n=len(findings))
    return Verdict(status="clean", reason=reason, missing=missing, checks=checks)
