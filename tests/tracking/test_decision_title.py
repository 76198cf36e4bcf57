"""The gate's and promote's decision title reads the same however narrow the table comes out (issue 49,
item 6): the tutorial test compares printed lines after folding whitespace, and a rich table title folded a
word longer than the table (``default.record.json`` / ``, version 1)``), so a narrower table failed it."""

from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from rag_experiments.tracking.compare_render import decision_table
from tests.docs.test_tutorials import missing_lines

TITLE = "gate: run 0fa2d56959c3 (nightly) vs champion 5ad9dad1e3c1 (record default.record.json, version 1)"


def _printed(width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, no_color=True).print(decision_table(SimpleNamespace(alpha=0.05, checks=[]), TITLE))
    return buf.getvalue()


def test_the_title_is_one_line_above_a_narrow_table():
    out = _printed(250)
    assert out.splitlines()[0].strip() == TITLE
    assert missing_lines([TITLE], out) == []


def test_a_narrow_terminal_wraps_the_title_at_words_only():
    assert missing_lines([TITLE], _printed(60)) == []
