"""Every ``rag-exp ...`` command the package prints names a command that exists (issue 44: a miss
printed ``hint: check the source uri (rag-exp corpus list)`` when there was no such command).

The strings are collected from the package's source with ``ast``: every string literal (f-string
parts included; docstrings left out: they are not printed) is searched for ``rag-exp`` followed
by words (a few English verbs after it are prose, :data:`PROSE`). The first word must be a top-level command; when that command has subcommands and a
second word follows, it must be one of them. Then ``rag-exp <command> [<subcommand>] --help``
runs for each distinct command named, through the real parser.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from rag_experiments import cli

PACKAGE = Path(__file__).resolve().parents[1] / "rag_experiments"
_NAMED = re.compile(r"rag-exp((?: +[a-z][a-z0-9_-]*)+)")
# words that follow "rag-exp" in prose ("rag-exp writes UTF-8 lines"), never command names
PROSE = frozenset({"writes", "reads", "prints", "keeps", "uses", "is", "does", "can", "will", "never", "itself",
                   "command", "commands"})


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def named_commands() -> dict[tuple[str, ...], list[str]]:
    """(word, word?) -> where in the package a string names ``rag-exp word [word]``."""
    found: dict[tuple[str, ...], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                for m in _NAMED.finditer(node.value):
                    words = tuple(m.group(1).split()[:2])
                    if words[0] in PROSE:
                        continue
                    found.setdefault(words, []).append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps subparsers here; there is no public accessor
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_path(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> tuple[str, ...] | str:
    """The command path ``words`` names (a tuple), or why it names none (a str)."""
    top = _subcommands(parser)
    if words[0] not in top:
        return f"no command {words[0]!r}"
    sub = _subcommands(top[words[0]])
    if not sub or len(words) == 1:
        return words[:1]
    if words[1] not in sub:
        return f"{words[0]!r} has no subcommand {words[1]!r} (it has: {', '.join(sorted(sub))})"
    return words[:2]


def test_the_package_names_commands_in_its_messages():
    found = named_commands()
    assert len(found) > 20, found
    assert ("golden", "reanchor") in found and ("corpus", "show") in found and ("corpus", "list") in found


def test_every_command_a_message_names_exists():
    parser = cli.build_parser()
    bad = {words: f"{why}; named at {', '.join(where[:3])}" for words, where in named_commands().items()
           if isinstance(why := command_path(parser, words), str)}
    assert not bad, "\n".join(f"rag-exp {' '.join(w)}: {why}" for w, why in bad.items())


@pytest.mark.parametrize("path", sorted({p for w in named_commands() if isinstance(p := command_path(cli.build_parser(), w), tuple)}),
                         ids=" ".join)
def test_help_runs_for_each_named_command(path, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([*path, "--help"])
    assert exc.value.code == 0
    assert f"rag-exp {' '.join(path)}" in capsys.readouterr().out  # its own usage line
