"""The command-line entry point itself."""

from __future__ import annotations

import sys

import pytest

from rag_experiments import cli


def test_a_command_module_that_fails_to_import_fails_loudly(monkeypatch):
    # None in sys.modules makes the import raise ModuleNotFoundError naming the module itself:
    # the case the parser used to skip silently, leaving `rag-exp search` "invalid choice"
    monkeypatch.setitem(sys.modules, "rag_experiments.commands.search", None)
    with pytest.raises(ImportError, match="rag_experiments.commands.search"):
        cli.build_parser()
