"""What every command shows the user: the terminal console, the status line
while a profile is read, and the exit status of unusable input."""

from __future__ import annotations

import contextlib
import os
import sys

from advisor.errors import AdvisorError

#: Exit status for unusable input or configuration (one line on stderr).
EXIT_BAD_INPUT = AdvisorError.exit_code


def console(no_color: bool):
    """A rich console on stdout; plain with ``--no-color`` or ``$NO_COLOR``."""
    from rich.console import Console

    return Console(no_color=no_color or bool(os.environ.get("NO_COLOR")), highlight=False)


def reading(lang: str, no_color: bool, out=None):
    """A status line on stderr while a profile is read (drawn without a
    thread, see ``advisor.runtime.progress``), where ``out`` -- the console
    the summary goes to, by default stdout -- is a terminal with colour.
    Without ``out`` nothing loads rich: the read starts sooner."""
    from advisor.reports.i18n import t
    from advisor.runtime.progress import status

    terminal = out.is_terminal and not out.no_color if out is not None else sys.stdout.isatty()
    if not terminal or no_color or os.environ.get("NO_COLOR"):
        return contextlib.nullcontext()
    return status(t(lang, "term_reading"))
