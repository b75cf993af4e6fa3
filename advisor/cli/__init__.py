"""The ``advisor`` command line: ``console_main`` is the console-script
entry point, ``main`` the same command for a caller in this process."""

from advisor.cli.app import cli, console_main, main

__all__ = ["cli", "console_main", "main"]
