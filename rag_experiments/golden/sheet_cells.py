"""CSV cells a spreadsheet cannot read as a formula, read back exactly (issue 55 probe 7).

The blind label sheets (``golden label --by-hand --export``, ``golden spotcheck --export``) go to
a spreadsheet, and their questions can come from production logs (``import-queries``): a
question starting with ``=HYPERLINK(...)`` was written raw, and a spreadsheet runs it. A cell
starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (OWASP's list of formula
starts) is written with a leading ``'``, which spreadsheets show as text and drop on saving;
the import strips it back. A value that itself starts with ``'`` before such a character gets
one more, so a file read back without a spreadsheet gives every value exactly as written.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

_FORMULA_START = re.compile(r"'*[=+\-@\t\r]")
_GUARDED = re.compile(r"''*[=+\-@\t\r]")


def sheet_cell(value: Any) -> Any:
    """``value`` as a CSV cell no spreadsheet evaluates (numbers and empty cells as they are)."""
    if isinstance(value, str) and _FORMULA_START.match(value):
        return "'" + value
    return value


def sheet_row(values: Iterable[Any]) -> list[Any]:
    return [sheet_cell(v) for v in values]


def read_cell(value: str | None) -> str | None:
    """A cell as written before :func:`sheet_cell` guarded it (one ``'`` removed before a formula start)."""
    if value and _GUARDED.match(value):
        return value[1:]
    return value


def read_row(row: dict[str, str | None]) -> dict[str, str | None]:
    """A ``csv.DictReader`` row with every cell read back (:func:`read_cell`)."""
    return {k: (read_cell(v) if isinstance(v, str) else v) for k, v in row.items()}
