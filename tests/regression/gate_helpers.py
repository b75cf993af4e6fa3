"""Run the real CLI in process and capture its exit code and output."""

from __future__ import annotations

import contextlib
import io

from advisor.cli import main


def advisor(*args: str) -> tuple[int, str, str]:
    """``advisor ARGS`` -> (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()
