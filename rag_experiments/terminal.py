"""The console every command and table prints through (rich).

A module of its own, below every layer, so that tracking's tables and the top-level run summary
(`report`) print the same way without tracking importing the layer above it."""

from __future__ import annotations

from rich.console import Console


def console() -> Console:
    # not a terminal (CI logs, pipes): wide enough that segment names are never cut
    c = Console()
    return c if c.is_terminal else Console(width=180)
