"""The `advisor` command line: the command group, ``main`` and
``console_main``, the entry point of the ``advisor`` command.

The commands live beside this module, one job each: ``report`` (report,
run), ``reference`` (rules, metrics, schema) and ``regression`` (compare,
gate, history); shared options in ``options``, the console in ``console``.

Exit codes: 0 success, 1 a gate found a regression, 2 unusable input or
configuration (one line on stderr naming the file and the problem; under
``--lang zh`` the problem of an unusable input in Chinese, see
:func:`error_line`).

Exit code 1 means "regression" to the gate's users, so nothing else may
end with it: an unexpected exception (a bug, or input no check foresaw)
is exit 2 with one line naming the command's input and the reason
(:func:`crash_line`); ``advisor --debug ...`` prints the traceback too.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
import traceback

import click

from advisor import __version__
from advisor.cli.console import EXIT_BAD_INPUT
from advisor.cli.reference import metrics, rules, schema
from advisor.cli.regression import compare, gate, history
from advisor.cli.report import report, run
from advisor.errors import AdvisorError, InputError
from advisor.i18n import DEFAULT_LANG
from advisor.runtime.stream_guard import guarded_output


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="advisor")
@click.option("--debug", is_flag=True, help="On an unexpected error, print the traceback too.")
def cli(debug: bool) -> None:
    """Rule-based performance advisor for deep-learning training profiles."""


for _command in (report, run, rules, metrics, schema, compare, gate, history):
    cli.add_command(_command)


#: Characters of an unexpected exception's message kept in its one line.
CRASH_MESSAGE_CHARS = 300


def _rest(ctx: click.Context) -> list[str]:
    """A group's unparsed arguments: the subcommand name and what follows
    (``protected_args`` is deprecated from Click 8.2, where it is ``_protected_args``)."""
    protected = ctx._protected_args if hasattr(ctx, "_protected_args") else ctx.protected_args
    return [*protected, *ctx.args]


def _invocation(argv: list[str]) -> tuple[bool, str, list[str], str]:
    """(--debug given, command name, its arguments' values, its ``--lang``)
    of ``argv``, parsed again without side effects (``resilient_parsing``)."""
    try:
        ctx = cli.make_context("advisor", list(argv), resilient_parsing=True)
        debug = bool(ctx.params.get("debug"))
        command, names, args = cli, [], _rest(ctx)
        while isinstance(command, click.Group) and args:
            name, command, args = command.resolve_command(ctx, args)
            names.append(name)
            ctx = command.make_context(name, args, parent=ctx, resilient_parsing=True)
            args = _rest(ctx) if isinstance(command, click.Group) else []
        values = [ctx.params.get(p.name) for p in command.params if isinstance(p, click.Argument)]
        flat = [str(x) for v in values for x in (v if isinstance(v, (list, tuple)) else [v]) if x is not None]
        return debug, " ".join(names), flat, str(ctx.params.get("lang") or DEFAULT_LANG)
    except Exception:  # noqa: BLE001 -- naming the input must not fail the error path
        return "--debug" in argv, "", [], DEFAULT_LANG


def error_line(exc: AdvisorError, lang: str) -> str:
    """The one line of an expected failure: ``advisor: error: <message>``,
    an unusable input's problem in ``lang`` where the catalogue of skip
    problems has it (``advisor.reports.skip_problems``: the same English
    texts), anything else as written."""
    from advisor.reports.sanitize import clean  # the message may name a file of the profile

    text = str(exc)
    if isinstance(exc, InputError) and lang != DEFAULT_LANG:
        from advisor.reports.skip_problems import localized

        text = f"{exc.path}: {localized(exc.problem, lang)}"
    return f"advisor: error: {clean(text)}"


def crash_line(exc: BaseException, command: str, inputs: list[str]) -> str:
    """One line for an unexpected exception: the command's input, the
    command, the exception's type and the first line of its message."""
    text = " ".join(str(exc).split())
    if len(text) > CRASH_MESSAGE_CHARS:
        text = text[: CRASH_MESSAGE_CHARS - 1] + "\u2026"
    what = inputs[0] if len(inputs) == 1 else " ".join(inputs[:3]) or "advisor"
    reason = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return (f"advisor: error: {what}: `advisor {command or '?'}` failed unexpectedly ({reason}); "
            "rerun with --debug for the traceback")


#: Allocations between two collections of the youngest generation (Python's
#: default is 700). The imports and tables of one run leave ~10^6 objects
#: alive to the end, and at the default the cycle collector walks them again
#: and again; cycles are still collected, just in fewer, larger passes.
GC_THRESHOLD = 50_000


def main(argv: list[str] | None = None) -> None:
    """Entry point: AdvisorError, and any unexpected exception, -> one line
    on stderr and exit code 2 (see the module doc).

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
            lang = _invocation(sys.argv[1:] if argv is None else argv)[3]
            click.echo(error_line(exc, lang), err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("advisor: interrupted", err=True)
            sys.exit(130)
        except Exception as exc:  # noqa: BLE001 -- the safety net: never exit 1 on a crash
            args = sys.argv[1:] if argv is None else argv
            debug, command, inputs, _ = _invocation(args)
            if debug:
                traceback.print_exc()
            click.echo(crash_line(exc, command, inputs), err=True)
            sys.exit(EXIT_BAD_INPUT)


def console_main() -> None:
    """The ``advisor`` command (console script, ``python -m advisor``):
    ``main``, then the process ends without the interpreter's teardown,
    which frees every module and every object a report held (~0.05 s of a
    1024-rank report) and changes nothing on disk: the exit handlers run
    (multiprocessing reaps its processes), the standard streams are
    flushed, and the process exits with ``main``'s code. Where a thread of
    advisor's is still running the interpreter ends normally (it waits for
    it)."""
    try:
        main()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    if threading.active_count() > 1 or not isinstance(code, (int, type(None))):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a reader gone (``| head``) or a closed stream: nothing left to say
            pass
    os._exit(code or 0)


if __name__ == "__main__":
    main()
