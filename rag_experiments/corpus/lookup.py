"""Finding a corpus document by the name a person types, and line positions in its text.

A document is named by its ``source_uri``, its ``doc_id``, or its file stem when only one
document has it (``git-rebase`` for ``man/git-rebase.html``): what ``rag-exp corpus show`` and
``rag-exp golden add --source-uri`` accept. Offsets are those of the document text (after the
front matter, as converted): the ones every golden span and every hit uses.
"""

from __future__ import annotations

import bisect
import difflib
import re
import shlex
from pathlib import PurePosixPath
from typing import Sequence

from ..errors import CorpusError
from ..types import Document


def _stem(name: str) -> str:
    return PurePosixPath(name.replace("\\", "/")).stem


def resolve_document(docs: Sequence[Document], name: str) -> Document | None:
    """The document ``name`` designates: its source_uri, its doc_id, or its unique file stem."""
    for d in docs:
        if d.source_uri == name:
            return d
    for d in docs:
        if d.doc_id == name:
            return d
    stem = _stem(name)
    hits = {d.doc_id: d for d in docs if stem in (_stem(d.source_uri), _stem(d.doc_id))}
    return next(iter(hits.values())) if len(hits) == 1 else None


def similar_names(docs: Sequence[Document], name: str, n: int = 3) -> list[str]:
    """The source_uris closest to ``name`` (by the name, then by the stem)."""
    uris = [d.source_uri for d in docs]
    close = difflib.get_close_matches(name, uris, n=n, cutoff=0.5)
    if len(close) < n:
        stems = {_stem(u): u for u in uris}
        close += [stems[s] for s in difflib.get_close_matches(_stem(name), list(stems), n=n, cutoff=0.5)
                  if stems[s] not in close]
    stem = _stem(name)
    close += [d.source_uri for d in docs if stem in (_stem(d.source_uri), _stem(d.doc_id))
              and d.source_uri not in close]  # an ambiguous stem: every document that has it
    return close


def find_document(docs: Sequence[Document], name: str, corpus: str) -> Document:
    """:func:`resolve_document`, or a :class:`CorpusError` naming the closest names and the
    command that lists them all."""
    doc = resolve_document(docs, name)
    if doc is not None:
        return doc
    close = similar_names(docs, name)
    stem = _stem(name)
    ambiguous = [d.source_uri for d in docs if stem in (_stem(d.source_uri), _stem(d.doc_id))]
    what = (f"file stem {stem!r} names {len(ambiguous)} documents" if len(ambiguous) > 1
            else "no such document")
    near = f"; closest: {', '.join(close)}" if close else ""
    raise CorpusError(f"document {name!r} is not in corpus {corpus} ({len(docs)} documents): {what}{near}",
                      hint=f"give its source_uri as `rag-exp corpus list --corpus {shlex.quote(str(corpus))}` shows it")


class Lines:
    """Line numbers (1-based) and their start offsets in one text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def __len__(self) -> int:
        return len(self.starts)

    def line_of(self, offset: int) -> int:
        """The 1-based line holding char ``offset``."""
        return bisect.bisect_right(self.starts, offset)

    def span(self, line: int) -> tuple[int, int]:
        """``[start, end)`` of 1-based ``line``, without its newline."""
        start = self.starts[line - 1]
        end = self.starts[line] - 1 if line < len(self.starts) else len(self.text)
        return start, end
