"""Critical path per step: advisor's (``critical_path.*``) beside HolisticTraceAnalysis'.

For each corpus Kineto trace with ``ProfilerStep#N`` markers, every step's
critical-path length and split as advisor computes it (the ``cp_edges``
table of its Kineto collector and :func:`advisor.metrics.critical_path.longest_path`)
and as HTA's ``TraceAnalysis.critical_path_analysis(rank, "ProfilerStep",
instance)`` does (the summed ``duration`` of ``get_critical_path_breakdown()``,
split by its ``bound_by``). HTA runs in a subprocess of the interpreter named
by ``$ADVISOR_HTA_PYTHON`` (a venv with ``pip install holistictraceanalysis``),
else of this one; without it only advisor's figures are printed.

    ADVISOR_HTA_PYTHON=/tmp/venv-peers/bin/python python -m bench.critical_path_vs_hta
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("ADVISOR_CORPUS", REPO.parent / "shared" / "corpus"))
#: Corpus traces with step markers (relative to the corpus).
TRACES = (
    "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
    "hta/nccl_parser_config/nccl_data.json.gz",
    "hta/trace_filter/sampled_rank-0.json.gz",
    "hta/trace_compare/base/base.json.gz",
    "kineto-tb-plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
    "kineto-tb-plugin/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
)

_HTA = textwrap.dedent("""
    import json, logging, sys, warnings
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    import pandas as pd
    _drop = pd.DataFrame.drop
    def drop(self, labels=None, *, axis=0, index=None, columns=None, **kw):  # HTA 0.5 passes axis with columns,
        if columns is not None or index is not None:                       # which pandas 3 refuses
            return _drop(self, labels, index=index, columns=columns, **kw)
        return _drop(self, labels, axis=axis, **kw)
    pd.DataFrame.drop = drop
    from hta.trace_analysis import TraceAnalysis
    from hta.configs.config import logger
    logger.setLevel(logging.CRITICAL)
    path = sys.argv[1]
    ta = TraceAnalysis(trace_files={0: path}, trace_dir="/", include_last_profiler_step=True)
    df = ta.t.get_trace(0)
    steps = sorted(v for k, v in ta.t.symbol_table.get_sym_id_map().items() if k.startswith("ProfilerStep#"))
    n = int(df.name.isin(steps).sum())
    out = []
    for i in range(n):
        try:
            graph, ok = ta.critical_path_analysis(rank=0, annotation="ProfilerStep", instance_id=i)
            b = graph.get_critical_path_breakdown() if ok else None
        except Exception as e:  # HTA fails on some traces; report it
            out.append({"instance": i, "error": type(e).__name__ + ": " + str(e)[:120]})
            continue
        if b is None:
            out.append({"instance": i, "error": "no path"})
            continue
        split = b.groupby("bound_by").duration.sum().to_dict()
        out.append({"instance": i, "length_us": float(b.duration.sum()),
                    "split_us": {k or "dependency": float(v) for k, v in split.items()}})
    print(json.dumps(out))
""")


def hta_paths(trace: Path) -> list[dict] | str:
    """HTA's per-step critical paths of ``trace`` (in step order), or why not."""
    python = os.environ.get("ADVISOR_HTA_PYTHON", sys.executable)
    try:
        done = subprocess.run([python, "-c", _HTA, str(trace)], capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"HTA not run: {e}"
    if done.returncode != 0:
        return "HTA failed: " + (done.stderr.strip().splitlines() or ["?"])[-1][:160]
    return json.loads(done.stdout.strip().splitlines()[-1])


def advisor_paths(trace: Path) -> list[dict]:
    """advisor's critical path of every step of ``trace`` (in step order)."""
    from advisor.collectors import load_profile
    from advisor.metrics.critical_path import KINDS, longest_path

    profile = load_profile(trace)
    edges, steps = profile.cp_edges, profile.steps.sort_values("start_us")
    out = []
    for step, dur in zip(steps["step"], steps["duration_us"]):
        e = edges[edges["step"] == step] if edges is not None else None
        if e is None or e.empty:
            out.append({"step": int(step), "step_us": float(dur), "length_us": None})
            continue
        length, on = longest_path(e["src"].to_numpy(), e["dst"].to_numpy(), e["weight_us"].to_numpy(float))
        kinds, w = e["kind"].to_numpy()[on], e["weight_us"].to_numpy(float)[on]
        out.append({"step": int(step), "step_us": float(dur), "length_us": length,
                    "split_us": {k: float(w[kinds == k].sum()) for k in KINDS}})
    return out


def _fmt(split: dict) -> str:
    return " ".join(f"{k}={v / 1000:.2f}" for k, v in split.items() if v)


def main() -> None:
    print(f"{'trace / step':<58} {'step ms':>9} {'advisor ms':>11} {'HTA ms':>9}  split (advisor | HTA), ms")
    for rel in TRACES:
        trace = CORPUS / rel
        if not trace.exists():
            print(f"{rel}: not in the corpus")
            continue
        ours, theirs = advisor_paths(trace), hta_paths(trace)
        if isinstance(theirs, str):
            print(f"{rel}: {theirs}")
            theirs = []
        for k, row in enumerate(ours):
            hta = theirs[k] if k < len(theirs) else {}
            a = "-" if row["length_us"] is None else f"{row['length_us'] / 1000:.2f}"
            h = f"{hta['length_us'] / 1000:.2f}" if "length_us" in hta else hta.get("error", "-")[:40]
            label = f"{rel.split('/')[-2]}/{rel.split('/')[-1][:18]} #{row['step']}"
            print(f"{label:<58} {row['step_us'] / 1000:>9.2f} {a:>11} {h:>9}  "
                  f"{_fmt(row.get('split_us', {}))} | {_fmt(hta.get('split_us', {}))}")


if __name__ == "__main__":
    main()
