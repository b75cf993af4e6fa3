"""Errors that reach the user as one line and a non-zero exit code."""

from __future__ import annotations

from pathlib import Path


class AdvisorError(Exception):
    """Base class: an expected failure with a user-facing one-line message."""

    exit_code = 2


class InputError(AdvisorError):
    """A path cannot be used: missing, unreadable, malformed, or not a profile.

    ``str(err)`` is ``"<path>: <problem>"`` so the CLI can print it as is.
    """

    def __init__(self, path: str | Path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class ConfigError(AdvisorError):
    """A rule file, threshold override or config file is invalid."""


class ReaderError(AdvisorError):
    """A reader process died or could not start (killed for memory, or a
    script that starts advisor without an ``if __name__ == "__main__":``
    guard where processes cannot fork)."""
