"""bench.peer_advisor: the incumbent's result is parsed into problems, each
mapped to its check and advisor's rules; on a real run of msprof-analyze
(when its virtual environment is here) the mapping covers every row."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from advisor.engine import peer_checks
from bench import peer_advisor
from bench.peer_advisor import PeerProblem, Side, parse_agent_output, problems
from bench.scenarios import Spec, generate

# The document `msprof-analyze advisor all --agent` prints: the "problems"
# sheet of OptimizeResult (msprof_analyze/advisor/result/result.py, `add`),
# headers of OptimizeItem + StatisticsItem (advisor/result/item.py), written
# by AnalyzerController._stdout_advisor_result through set_json_success
# (prof_common/json_output.py). The "slow rank" description is
# SlowRankAnalyzer.produce_bottleneck's text (analyzer/cluster/slow_rank_analyzer.py).
HEADERS = ["category", "description", "suggestion", "problem count", "total_time(us)", "time ratio",
           "income(us)", "income ratio"]
SLOW_RANK = ("Computing \n    has some issues in the cluster, \n    because the max difference of Computing time \n"
             "    has reached 12.5ms. \nFree \n    has some issues in the cluster, \n"
             "    because the max difference of Free time \n    has reached 3.1ms. \n")


def _doc(*rows):
    return {"status": "success", "code": 0, "suggestion": "",
            "message": {"problems": {"headers": HEADERS, "data": [list(r) + [""] * 6 for r in rows]}}}


def test_rows_become_problems_mapped_to_checks():
    table = peer_checks.load()
    got = problems(_doc(("slow rank", SLOW_RANK), ("RANK 4 operator dynamic shape issues", "Found all operators"),
                        ("Packet Analysis", "In the SDMA communication, 50.00% ..."), ("Brand New Check", "x")), table)
    assert [(p.label, p.check.check if p.check else None) for p in got] == [
        ("slow rank: Computing", "slow-rank"), ("slow rank: Free", "slow-rank"),
        ("RANK 4 operator dynamic shape issues", "dynamic-shape"), ("Packet Analysis", "packet"),
        ("Brand New Check", None)]


def test_no_slow_rank_issue_is_no_problem():
    assert problems(_doc(("slow rank", "There is no slow rank issues")), peer_checks.load()) == []
    assert problems({"status": "success", "message": {}, "suggestion": "No optimization suggestions found."},
                    peer_checks.load()) == []


def test_the_json_line_is_found_after_log_lines():
    doc = parse_agent_output('[INFO] start\n{"status": "success", "message": {}}\n')
    assert doc["status"] == "success"
    with pytest.raises(ValueError):
        parse_agent_output("Traceback (most recent call last):\n  boom\n")


def test_reported_and_injected_follow_the_rules_and_the_fault():
    table = peer_checks.load()
    comp, free = problems(_doc(("slow rank", SLOW_RANK)), table)
    side = Side("x", "slow-rank", "", "success", [comp, free], {"slow-rank": (12.0, 10.0)})
    assert side.reported(comp) == ["slow-rank"] and side.injected(comp) is True
    assert side.injected(free) is False  # a slow rank computes longer; free time is not the fault
    assert Side("y", None, "", "success").injected(PeerProblem("slow link", "")) is None


@pytest.mark.skipif(peer_advisor.peer_executable() is None,
                    reason=f"msprof-analyze is not installed in {peer_advisor.PEER_VENV} (set ADVISOR_PEER_VENV); "
                           "CI does not have it")
def test_a_real_incumbent_run_on_a_slow_rank_maps_to_advisor(tmp_path):
    data, _ = generate(Spec(ranks=4, steps=6, fault="slow-rank", seed=2, severity=0.25), tmp_path / "s")
    copy = tmp_path / "peer"
    shutil.copytree(data, copy)  # the incumbent writes into the folder it reads
    proc = subprocess.run(peer_advisor.peer_command(copy, tmp_path / "peer-out"), capture_output=True, text=True,
                          timeout=peer_advisor.PEER_TIMEOUT_S, cwd=tmp_path, stdin=subprocess.DEVNULL)
    doc = parse_agent_output(proc.stdout)
    assert doc["status"] == "success", doc
    found = problems(doc, peer_checks.load())
    assert found and all(p.check is not None for p in found), [p.category for p in found]
    verdict, findings, checked = peer_advisor.run_advisor(data)
    side = Side("slow-rank", "slow-rank", "", doc["status"], found, findings, checked=checked)
    injected = [p for p in found if side.injected(p)]
    # the incumbent sees the slow rank's computing; advisor reports it too, with a gain
    assert [p.label for p in injected] == ["slow rank: Computing"]
    assert side.reported(injected[0]) == ["slow-rank"]
    assert findings["slow-rank"][0] > 0


def test_the_count_line_and_the_table():
    table = peer_checks.load()
    comp, free = problems(_doc(("slow rank", SLOW_RANK)), table)
    packet, = problems(_doc(("Packet Analysis", "In the SDMA communication, 50.00% ...")), table)
    side = Side("gen", "slow-rank", "40 s", "success", [comp, free, packet], {"slow-rank": (12.0, 10.0)})
    known = {"slow-rank", "slow-pipeline-stage"}
    text = peer_advisor.render([side], markdown=False, known=known)
    assert ("advisor reports 2 of 3 incumbent problems; 1 of them name the injected fault of a generated input, "
            "and advisor reports 1 of those; 1 map only to rules not in this rule set") in text
    md = peer_advisor.render([side], markdown=True, known=known)
    assert "| gen (slow-rank) | **slow rank: Computing**: Computing has some issues" in md
    assert "| slow-rank, slow-pipeline-stage | yes | slow-rank 12 ms/step (10.0%) |" in md
    assert "small-packets (not in this rule set) | no |" in md


def test_a_problem_advisor_does_not_report_shows_what_its_rules_found(tmp_path):
    """A healthy generated cluster: the slow-rank rule is evaluated and
    passes, and the side-by-side shows the values its condition read."""
    data, _ = generate(Spec(ranks=4, steps=6, seed=3), tmp_path / "h")
    verdict, findings, checked = peer_advisor.run_advisor(data)
    assert "slow-rank" not in findings
    assert checked["slow-rank"].startswith("passed (") and "cluster.slow_rank_excess_ratio=" in checked["slow-rank"]
    comp, _ = problems(_doc(("slow rank", SLOW_RANK)), peer_checks.load())
    side = Side("healthy", None, "", "success", [comp], findings, checked=checked)
    assert side.why_not(comp).startswith("slow-rank passed (")
    md = peer_advisor.render([side], markdown=True, known={"slow-rank", "slow-pipeline-stage"})
    assert "| no | slow-rank passed (" in md
