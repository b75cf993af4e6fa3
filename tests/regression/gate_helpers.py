"""Run the real CLI in process and capture its exit code and output; check
a one-line error."""

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


def one_line_error(code: int, stderr: str, *needles: str) -> None:
    """Exit code 2 and one line ``advisor: error: ...`` holding each of
    ``needles``, no traceback."""
    assert code == 2, stderr
    assert stderr.startswith("advisor: error: ") and stderr.count("\n") == 1, stderr
    assert "Traceback" not in stderr
    for n in needles:
        assert n in stderr, stderr
