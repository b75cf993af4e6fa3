"""The `advisor` command line: the command group and ``main``, its entry point.

The commands live beside this module, one job each: ``report`` (report,
run), ``reference`` (rules, metrics, schema) and ``regression`` (compare,
gate, history); shared options in ``options``, the console in ``console``.

Exit codes: 0 success, 1 a gate found a regression, 2 unusable input or
configuration (one line on stderr naming the file and the problem).
"""

from __future__ import annotations

import atexit
import gc
import sys

import click

from advisor import __version__
from advisor.cli.console import EXIT_BAD_INPUT
from advisor.cli.reference import metrics, rules, schema
from advisor.cli.regression import compare, gate, history
from advisor.cli.report import report, run
from advisor.errors import AdvisorError
from advisor.runtime.stream_guard import guarded_output


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="advisor")
def cli() -> None:
    """Rule-based performance advisor for deep-learning training profiles."""


for _command in (report, run, rules, metrics, schema, compare, gate, history):
    cli.add_command(_command)


#: Allocations between two collections of the youngest generation (Python's
#: default is 700). The imports and tables of one run leave ~10^6 objects
#: alive to the end, and at the default the cycle collector walks them again
#: and again; cycles are still collected, just in fewer, larger passes.
GC_THRESHOLD = 50_000


def main(argv: list[str] | None = None) -> None:
    """Entry point: AdvisorError -> one line on stderr and exit code 2.

    Garbage collection runs every ``GC_THRESHOLD`` allocations, and what is
    alive when the process exits is frozen first, so the interpreter's exit
    skips its last full collection over everything (~0.1 s of every run)."""
    if gc.get_threshold()[0] < GC_THRESHOLD:
        gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
        atexit.register(gc.freeze)
    with guarded_output():
        try:
            cli.main(args=argv, prog_name="advisor", standalone_mode=False)
        except click.exceptions.Abort:
            click.echo("advisor: aborted", err=True)
            sys.exit(130)
        except click.ClickException as exc:
            exc.show()
            sys.exit(EXIT_BAD_INPUT)
        except AdvisorError as exc:
            from advisor.reports.sanitize import clean  # the message may name a file of the profile

            click.echo(f"advisor: error: {clean(exc)}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("advisor: interrupted", err=True)
            sys.exit(130)


if __name__ == "__main__":
    main()
