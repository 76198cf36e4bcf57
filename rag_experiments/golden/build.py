"""Build golden records from a document and a quoted passage (shared by every authoring path:
hand-written demo cases, ``golden add``, importers)."""

from __future__ import annotations

from ..errors import GoldenSetError
from ..types import Document
from .records import Span, new_id


def locate(text: str, quote: str, where: str = "document") -> tuple[int, int]:
    """The unique ``[start, end)`` of ``quote`` in ``text``; an error if absent or ambiguous."""
    if not quote:
        raise GoldenSetError(f"{where}: empty quote")
    first = text.find(quote)
    if first < 0:
        raise GoldenSetError(f"{where}: quote not found: {quote[:80]!r}",
                             hint="copy the passage verbatim from the document")
    if text.find(quote, first + 1) >= 0:
        raise GoldenSetError(f"{where}: quote occurs more than once: {quote[:80]!r}",
                             hint="quote a longer passage so it is unique")
    return first, first + len(quote)


def doc_span(doc: Document, start: int, end: int) -> Span:
    return Span(doc.doc_id, doc.source_uri, start, end, doc.text[start:end], doc.content_hash)


def span_json(doc: Document, start: int, end: int) -> dict:
    return doc_span(doc, start, end).to_json()


def case_record(doc: Document, quote: str, query: str, kind: str, provenance: dict, *,
                grade: int = 2, identifier: str | None = None, case_id: str | None = None) -> dict:
    start, end = locate(doc.text, quote, doc.doc_id)
    rec = {
        "type": "case",
        "id": case_id or new_id("c", query, doc.doc_id, start, end),
        "query": query,
        "kind": kind,
        "doc_type": doc.doc_type,
        "evidence": [{**span_json(doc, start, end), "grade": grade}],
        "provenance": provenance,
    }
    if identifier:
        rec["identifier"] = identifier
    return rec
