"""The end-to-end tests run strict, and the commands they start inherit it."""

from __future__ import annotations

import subprocess
import sys

from advisor.profile import strict_mode


def test_end_to_end_tests_and_their_subprocesses_run_strict():
    assert strict_mode()
    code = "from advisor.profile import strict_mode; print(strict_mode())"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "True"
