"""Errors a user can cause and fix.

A ``UserError`` ends a command with one clear message and a non-zero exit, no traceback
(unless ``--debug`` or ``HYDRA_FULL_ERROR=1``). The message names the file, field or value
and, where possible, says what to do next.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem in the user's input, config or environment (not a bug in this package)."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message}\n  hint: {hint}")


class ConfigError(UserError):
    """A config value is out of range or unknown; the message names the key."""


class CorpusError(UserError):
    """A corpus file cannot be read or is malformed; the message names the file."""


class GoldenSetError(UserError):
    """A golden-set file is malformed, edited in place or truncated; names file and line."""


class DatabaseError(UserError):
    """The database is unreachable or lacks something we need."""
