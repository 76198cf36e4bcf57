"""Placing a team's passages in the corpus text, so the span-anchored golden set scores them
whatever their chunking (relevance is span overlap, never a shared chunk id).

Methods, tried in this order, the first that works recorded per hit (:data:`METHODS`):

* ``offsets``: the passage gives ``start``/``end``. They must lie inside the document (else the
  result is malformed: :class:`ExternalResultError`); when the passage also gives its text, the
  text at the offsets must equal it (after the normalisation below), else the offsets are not
  trusted and the text is placed instead;
* ``exact``: the text occurs verbatim in the document (first occurrence);
* ``normalised``: it occurs once both are normalised: runs of whitespace made one space,
  Markdown markup characters (``* ` # > | _ \\``) dropped, letters lower-cased; and when that fails,
  again with up to :data:`MAX_PREFIX_LINES` leading lines dropped (a breadcrumb or title the
  system put in front of its chunk text). Offsets map back to the original text;
* ``fuzzy``: the golden set's own approximate matcher (:func:`rag_experiments.golden.fuzzy.locate`,
  token similarity >= 0.85, ambiguous windows refused), for text the system altered more;
* ``document``: a stored run's bare document name (no offsets, no text): the whole document,
  as a document-level run means it;
* ``failed``: none of these; ``unknown_document``: no corpus document has that source_uri/doc_id.

An unplaced passage stays in the ranked list at its rank as a hit no evidence span can overlap
(a miss that occupies its slot, as it does for the system's users), and is listed in the run's
``alignment_failures.json``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Sequence

from ..golden.fuzzy import FUZZY_THRESHOLD, DocIndex, locate
from ..types import Document, Hit
from .passages import ExternalResultError, Passage

METHODS = ("offsets", "exact", "normalised", "fuzzy", "document", "failed", "unknown_document")
PLACED = frozenset(("offsets", "exact", "normalised", "fuzzy", "document"))
MAX_PREFIX_LINES = 3
MARKUP = frozenset("*`#>|_\\")
UNPLACED_DOC = "unplaced:"  # doc_id prefix of a hit no span can overlap


def _normalised(text: str) -> tuple[str, list[int]]:
    """The normalised text and, for each of its characters, the index of the original character."""
    out: list[str] = []
    where: list[int] = []
    space = True  # drop leading whitespace
    for i, c in enumerate(text):
        if c in MARKUP:
            continue
        if c.isspace():
            if not space:
                out.append(" ")
                where.append(i)
            space = True
            continue
        low = c.lower()
        out.append(low if len(low) == 1 else c)
        where.append(i)
        space = False
    if out and out[-1] == " ":
        out.pop()
        where.pop()
    return "".join(out), where


@dataclass(frozen=True)
class Placement:
    method: str  # one of METHODS
    doc: Document | None
    start: int = 0
    end: int = 0
    note: str = ""


class Placer:
    """Places passages in ``docs``; per-document indexes are built on first use and kept."""

    def __init__(self, docs: Sequence[Document]) -> None:
        self.by_name: dict[str, Document] = {}
        for d in docs:
            self.by_name.setdefault(d.source_uri, d)
            self.by_name.setdefault(d.doc_id, d)
        # a system that read the files names them by path: match the file name when it is unique
        stems: dict[str, list[Document]] = {}
        for d in docs:
            stems.setdefault(PurePosixPath(d.source_uri).stem, []).append(d)
        self.by_stem = {s: ds[0] for s, ds in stems.items() if len(ds) == 1}
        self._norm: dict[str, tuple[str, list[int]]] = {}
        self._index: dict[str, DocIndex] = {}

    def document(self, name: str) -> Document | None:
        d = self.by_name.get(name)
        if d is None:
            d = self.by_stem.get(PurePosixPath(name.replace("\\", "/")).stem)
        return d

    def place(self, p: Passage, where: str) -> Placement:
        doc = self.document(p.document)
        if doc is None:
            return Placement("unknown_document", None, note=f"no corpus document {p.document!r}")
        if p.start is not None:
            if not (0 <= p.start < p.end <= len(doc.text)):
                raise ExternalResultError(
                    f"{where}: offsets {p.start}..{p.end} are outside document {doc.source_uri!r} "
                    f"(0..{len(doc.text)})", hint="offsets index the text of the corpus document after its front matter (rag_experiments.corpus.loader.load_corpus gives it)")
            if p.text is None or self._same(doc.text[p.start:p.end], p.text):
                return Placement("offsets", doc, p.start, p.end)
        elif p.text is None:  # only a stored run's bare docno gets here (read_passage refuses it)
            return Placement("document", doc, 0, len(doc.text))
        placed = self._by_text(doc, p.text or "")
        if p.start is not None and placed.method in PLACED:
            return Placement(placed.method, doc, placed.start, placed.end,
                             f"offsets {p.start}..{p.end} disagree with the text; placed by text")
        return placed

    @staticmethod
    def _same(a: str, b: str) -> bool:
        return a == b or _normalised(a)[0] == _normalised(b)[0]

    def _by_text(self, doc: Document, text: str) -> Placement:
        if not text.strip():
            return Placement("failed", doc, note="empty text")
        i = doc.text.find(text)
        if i >= 0:
            return Placement("exact", doc, i, i + len(text))
        norm, where = self._norm.get(doc.doc_id) or self._norm.setdefault(doc.doc_id, _normalised(doc.text))
        lines = text.split("\n")
        for drop in range(min(MAX_PREFIX_LINES, len(lines) - 1) + 1):
            q = _normalised("\n".join(lines[drop:]))[0]
            if not q:
                break
            j = norm.find(q)
            if j >= 0:
                note = f"{drop} leading line(s) dropped" if drop else ""
                return Placement("normalised", doc, where[j], where[j + len(q) - 1] + 1, note)
        index = self._index.get(doc.doc_id) or self._index.setdefault(doc.doc_id, DocIndex(doc.text))
        m = locate(index, text.strip(), 0, text.strip(), FUZZY_THRESHOLD)
        if m.status != "none":
            return Placement("fuzzy", doc, m.start, m.end, m.note)
        return Placement("failed", doc, note=m.note or "not found in the document")


def placed_hit(p: Passage, placement: Placement, rank: int) -> Hit:
    """The hit evaluation scores: the placed span, or a span in no document when unplaced."""
    score = p.score if p.score is not None else 0.0
    if placement.method in PLACED:
        d = placement.doc
        cid = p.id or "ext:" + hashlib.sha1(f"{d.doc_id}|{placement.start}|{placement.end}".encode()).hexdigest()[:16]
        return Hit(cid, d.doc_id, d.source_uri, d.doc_type, placement.start, placement.end, score, rank,
                   {"external": rank})
    cid = p.id or "ext:" + hashlib.sha1(f"{p.document}|{p.text}".encode()).hexdigest()[:16]
    return Hit(cid, UNPLACED_DOC + p.document, UNPLACED_DOC + p.document, "", 0, 0, score, rank, {"external": rank})
