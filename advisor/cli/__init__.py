"""The ``advisor`` command line: ``main`` is the console-script entry point."""

from advisor.cli.app import cli, main

__all__ = ["cli", "main"]
