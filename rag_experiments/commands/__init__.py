"""One module per rag-exp command group; each exposes register(subparsers).

The list of command modules lives here, beside them, so the CLI (which builds the parser from it)
and the start-up benchmark (which times every command's --help) read one list."""

from __future__ import annotations

import argparse
import importlib

COMMAND_MODULES = [
    "db", "corpus", "benchmarks", "ingest", "golden", "compare", "promote", "gate", "history", "triage", "export",
    "bench", "search", "serve", "import_run", "run", "init", "audit_cache", "explore",
]


def register_all(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse's own type
    """Every command's parser under ``sub``, in the order ``rag-exp --help`` lists them."""
    for name in COMMAND_MODULES:
        # a command module that fails to import is a bug: it raises here, never a missing command
        importlib.import_module(f"rag_experiments.commands.{name}").register(sub)
