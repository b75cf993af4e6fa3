"""What every command shows the user: the terminal console, the status line
while a profile is read, and the exit status of unusable input."""

from __future__ import annotations

import contextlib
import os

from advisor.errors import AdvisorError

#: Exit status for unusable input or configuration (one line on stderr).
EXIT_BAD_INPUT = AdvisorError.exit_code


def console(no_color: bool):
    """A rich console on stdout; plain with ``--no-color`` or ``$NO_COLOR``."""
    from rich.console import Console

    return Console(no_color=no_color or bool(os.environ.get("NO_COLOR")), highlight=False)


def reading(out, lang: str):
    """A status line on stderr while a profile is read (terminals only;
    drawn without a thread, see ``advisor.runtime.progress``)."""
    from advisor.reports.i18n import t
    from advisor.runtime.progress import status

    if not out.is_terminal or out.no_color:
        return contextlib.nullcontext()
    return status(t(lang, "term_reading"))
