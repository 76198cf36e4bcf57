"""Turn a production failure into a golden case (kind ``production``).

The expected evidence is given either as a chunk id (its span is the evidence) or as a source
uri plus a quoted passage located in that document's text. A quote must occur exactly once:
verbatim, or else with whitespace runs treated as equal (reported as ``whitespace``). Not found
or found more than once (counting whitespace variants) is a :class:`QuoteError` naming the quote
and the document.
"""

from __future__ import annotations

import getpass
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import GoldenSetError, UserError
from ..limits import check_query, check_text
from .generate import quote_matches
from .records import Span, new_id
from .golden_file import GoldenFile


class QuoteError(UserError):
    """A quote that is not in the document, or is in it more than once."""


class NotFoundError(UserError):
    """A chunk id or document that the retriever's store does not have."""


@dataclass(frozen=True)
class AddResult:
    record: dict
    located: str  # chunk | exact | whitespace


def _short(quote: str, limit: int = 80) -> str:
    q = " ".join(quote.split())
    return repr(q if len(q) <= limit else q[: limit - 3] + "...")


def locate_unique(text: str, quote: str, doc: str) -> tuple[int, int, str]:
    """``(start, end, mode)`` of the single occurrence of ``quote`` in ``text``."""
    mode, spans = quote_matches(text, quote)
    if mode == "exact" and len(spans) == 1:
        # unique verbatim, but a whitespace variant elsewhere would make the intent ambiguous
        loose = [(m.start(), m.end()) for m in re.finditer(r"\s+".join(map(re.escape, quote.split())), text)]
        spans = spans if len(loose) <= 1 else loose
    if not spans:
        raise QuoteError(f"quote {_short(quote)} not found in document {doc}",
                         hint="copy the passage from the document text (whitespace may differ, nothing else)")
    if len(spans) > 1:
        where = ", ".join(str(s) for s, _ in spans[:5])
        raise QuoteError(f"quote {_short(quote)} occurs {len(spans)} times in document {doc} (at offsets {where})",
                         hint="quote a longer passage so that it occurs once")
    (start, end), = spans
    return start, end, mode


def production_case(query: str, *, chunk_id: str | None = None, source_uri: str | None = None,
                    quote: str | None = None, chunk_lookup: Callable[[str], dict | None] | None = None,
                    doc_lookup: Callable[[str], dict | None] | None = None, author: str | None = None,
                    note: str | None = None, grade: int = 2) -> AddResult:
    """Build (not append) a ``production`` case from a chunk id, or a source uri + quote."""
    query = " ".join(query.split())
    if not query:
        raise UserError("the query is empty")
    check_query(query, "--query")  # refused here, or every later run on the set would trip on it
    if quote is not None:
        check_text(quote, "--quote")
    if (chunk_id is None) == (source_uri is None):
        raise UserError("give the expected evidence either as --chunk-id, or as --source-uri with --quote")
    if chunk_id is not None:
        if chunk_lookup is None:
            raise ValueError("chunk_lookup is required with chunk_id")
        chunk = chunk_lookup(chunk_id)
        if chunk is None:
            raise NotFoundError(f"chunk {chunk_id!r} not found in the configured chunking strategy",
                                hint="chunk ids depend on the chunking strategy; pass the same --set overrides")
        start, end = int(chunk["start"]), int(chunk["end"])
        if len(chunk["text"]) != end - start:
            raise UserError(f"chunk {chunk_id}: its text is not the span {start}..{end} of its document")
        span = Span(chunk["doc_id"], chunk["source_uri"], start, end, chunk["text"], chunk["doc_hash"])
        doc_type, located = chunk["doc_type"], "chunk"
    else:
        if not quote or not quote.strip():
            raise UserError("--source-uri needs --quote (the passage that answers the query)")
        if doc_lookup is None:
            raise ValueError("doc_lookup is required with source_uri")
        doc = doc_lookup(source_uri)
        if doc is None:
            raise NotFoundError(f"document {source_uri!r} not found", hint="check the source uri (rag-exp corpus list)")
        start, end, located = locate_unique(doc["text"], quote, source_uri)
        span = Span(doc["doc_id"], doc.get("source_uri") or source_uri, start, end, doc["text"][start:end],
                    doc["content_hash"])
        doc_type = doc["doc_type"]
    provenance = {"method": "human", "author": author or os.environ.get("USER") or getpass.getuser()}
    if note:
        provenance["note"] = note
    record = {
        "type": "case",
        "id": new_id("c", query, *span.key),
        "query": query,
        "kind": "production",
        "doc_type": doc_type,
        "evidence": [{**span.to_json(), "grade": grade}],
        "provenance": provenance,
    }
    return AddResult(record, located)


def add_production_case(golden_path: str | Path, query: str, **kwargs) -> AddResult:
    """Build a production case (see :func:`production_case`) and append it to the golden set."""
    result = production_case(query, **kwargs)
    golden = GoldenFile(golden_path)
    if golden.exists() and any(r.id == result.record["id"] for r in golden.read_records()):
        raise GoldenSetError(f"{golden.path}: this case (same query and evidence) is already there: "
                             f"{result.record['id']}")
    written, = golden.append([result.record])
    return AddResult(written, result.located)
