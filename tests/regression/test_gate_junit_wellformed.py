"""junit.xml stays well-formed whatever the profile strings hold.

XML 1.0 forbids most control characters even as character references, so
a ``\\x01`` in an operator name made the whole report unparsable and CI
(GitLab) dropped the failure. The MindSpore ResNet-50 data-bound run names
its slowest dataset stage (``MapOp_3``) in a failing finding; here that
name carries control characters.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

from gate_helpers import advisor

from advisor.reports.gate_verdict import xml_text

REPO = Path(__file__).resolve().parents[2]
BOUND = REPO / "examples" / "resnet50_data_bound" / "profiler"
FIXED = REPO / "examples" / "resnet50_data_fixed"
HOSTILE = "Map\x01\x1b]0;x\x07\ufffeOp"


def test_a_control_character_in_an_op_name_leaves_junit_well_formed(tmp_path):
    cur = tmp_path / "cur"
    shutil.copytree(BOUND, cur)
    for name in ("pipeline_profiling_0.json", "minddata_pipeline_raw_0.csv"):
        path = cur / name
        text = path.read_text(encoding="utf-8")
        assert "MapOp" in text
        # JSON carries the characters as \u escapes, the CSV raw
        value = json.dumps(HOSTILE)[1:-1] if name.endswith(".json") else HOSTILE
        path.write_text(text.replace("MapOp", value), encoding="utf-8")
    out = tmp_path / "g"
    code, _, stderr = advisor("gate", cur, "--baseline", FIXED, "-o", out)
    assert code == 1, stderr
    raw = (out / "junit.xml").read_bytes()
    suite = ET.fromstring(raw)   # raises on a document that is not well-formed
    failures = {c.get("name"): c.find("failure") for c in suite.iter("testcase")}
    message = failures["finding slow-dataset-op"].get("message")
    # the name is still there, its forbidden characters visible as escapes
    assert "Map\\x01\\x1b]0;x\\x07\\ufffeOp_3" in message
    assert b"\x01" not in raw and b"&#1;" not in raw


def test_xml_text_keeps_what_xml_allows():
    assert xml_text("a\tb\nc\r\u00e9\U0001f600") == "a\tb\nc\r\u00e9\U0001f600"
    assert xml_text("\x00\x08\x0b\x0c\x1f\ud800\uffff") == "\\x00\\x08\\x0b\\x0c\\x1f\\ud800\\uffff"
