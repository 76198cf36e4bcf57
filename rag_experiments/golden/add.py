"""Add a case written by a person: a production failure, or a question of a given kind.

The expected evidence is given either as a chunk id (its span is the evidence; the chunk comes
from the retriever's store) or as a document plus a quoted passage located in that document's
text: the text as loaded (Markdown as it is, other formats as converted), so adding a case by
quote needs the corpus files and nothing else (no database, no embedding).

A quote must occur exactly once, tried in this order, the first that finds it reported:

* ``exact``: verbatim;
* ``whitespace``: with any run of whitespace equal to any other;
* ``normalised``: through whitespace, Markdown markup and case (:mod:`.normalise`, the
  normalisation a team's passages get when they are placed in the corpus), so ``ORIG_HEAD``
  copied from a rendered page matches the converted text's `` `ORIG_HEAD` ``.

The span stored is the matched span of the document text (its quote is the document's text,
markup included; a ``normalised`` match is widened over the ``*`` and `` ` `` markers right around
it, so the quote keeps both markers of `` `ORIG_HEAD` ``). Not found, or found more than once, is a :class:`QuoteError` naming the quote
and the document; a miss carries the closest passages of the document and the other documents
where the quote is (:attr:`QuoteError.context`).

Kinds (:data:`KINDS`): ``exact`` (the question names an identifier that the evidence's document
holds, recorded as the case's ``identifier``: the segment the gate's exact-identifier guard checks), ``paraphrase`` (the question in other
words than the passage), ``production`` (a question as a user asked it; the default).
"""

from __future__ import annotations

import getpass
import math
import os
import re
import shlex
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path, PurePosixPath
from typing import Callable, Sequence

from ..corpus.loader import load_corpus, load_some
from ..corpus.lookup import Lines, resolve_document, similar_names
from ..errors import GoldenSetError, UserError
from ..identifiers import extract_identifiers, find_identifiers, written_in
from ..limits import check_query, check_text
from ..types import Document
from .generate import quote_matches
from .golden_file import GoldenFile
from .normalise import find_normalised, normalised, rough
from .records import Span, new_id

KINDS = ("exact", "paraphrase", "production")
ADD_METHODS = ("human", "agent")  # provenance.method of a case written by hand: a person, or an AI agent


class QuoteError(UserError):
    """A quote that is not in the document, or is in it more than once. ``context``: lines to
    show before the error (the closest passages of the document)."""

    def __init__(self, message: str, *, hint: str | None = None, context: Sequence[str] = ()) -> None:
        super().__init__(message, hint=hint)
        self.context = tuple(context)


class NotFoundError(UserError):
    """A chunk id or document that the store or the corpus does not have."""

    def __init__(self, message: str, *, hint: str | None = None, context: Sequence[str] = ()) -> None:
        super().__init__(message, hint=hint)
        self.context = tuple(context)


@dataclass(frozen=True)
class AddResult:
    record: dict
    located: str  # chunk | exact | whitespace | normalised


def _short(quote: str, limit: int = 80) -> str:
    q = " ".join(quote.split())
    return repr(q if len(q) <= limit else q[: limit - 3] + "...")


def show_command(doc: str, corpus: str | None = None, grep: str | None = None) -> str:
    """The ``rag-exp corpus show`` command that prints ``doc``'s text (where ``grep`` matches)."""
    argv = [doc] + (["--corpus", str(corpus)] if corpus is not None else []) + (["--grep", grep] if grep else [])
    return "rag-exp corpus show " + shlex.join(argv)


# == where a quote is ==========================================================================
def find_quote(text: str, quote: str) -> tuple[str, list[tuple[int, int]]]:
    """``(mode, spans)``: the first of exact / whitespace / normalised that finds ``quote`` in
    ``text`` and every span it finds; ``("none", [])`` when none does."""
    mode, spans = quote_matches(text, quote)
    if mode == "exact" and len(spans) == 1:
        # unique verbatim, but a whitespace variant elsewhere would make the intent ambiguous
        loose = [(m.start(), m.end()) for m in re.finditer(r"\s+".join(map(re.escape, quote.split())), text)]
        spans = spans if len(loose) <= 1 else loose
    if spans:
        return mode, spans
    spans = [_widen(text, a, b) for a, b in find_normalised(text, quote)]
    return ("normalised", spans) if spans else ("none", [])


_PAIRED = "*`"  # emphasis and code markers: a normalised match is widened over those around it


def _widen(text: str, start: int, end: int) -> tuple[int, int]:
    """The span widened over the ``*`` and `` ` `` markers right before and after it, so that the
    stored quote of `` `ORIG_HEAD` `` or ``**--force**`` keeps both of its markers."""
    while start > 0 and text[start - 1] in _PAIRED:
        start -= 1
    while end < len(text) and text[end] in _PAIRED:
        end += 1
    return start, end


def documents_with(docs: Sequence[Document], quote: str, skip: str | None = None) -> list[Document]:
    """The documents in which ``quote`` occurs (through whitespace, markup and case)."""
    q = normalised(quote)[0]
    if not q:
        return []
    longest = max(q.split(" "), key=len)  # cheap filter first: a document without it cannot match
    out = []
    for d in docs:
        if d.doc_id == skip or longest not in rough(d.text):
            continue
        if d.text.find(quote) >= 0 or find_normalised(d.text, quote):
            out.append(d)
    return out


_WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _blocks(text: str, quote_len: int) -> list[tuple[int, int]]:
    """Candidate passages: paragraphs (blank-line separated), a long one split into its lines."""
    out = []
    for m in re.finditer(r"(?:[^\n]*\S[^\n]*(?:\n|$))+", text):
        start, body = m.start(), m.group().rstrip()
        if len(body) > 3 * quote_len + 200 and "\n" in body:
            out += [(start + k.start(), start + k.end()) for k in re.finditer(r"[^\n]*\S[^\n]*", body)]
        else:
            out.append((start, start + len(body)))
    return out


def closest_passages(text: str, quote: str, n: int = 3) -> list[tuple[int, int, int, int]]:
    """The ``n`` passages of ``text`` (paragraphs, or the lines of a long one) closest to the
    quote: ``(start, end, shared, of)``, ``shared`` of the quote's ``of`` distinct words in it.
    Ranked by the shared words weighted by their rarity among the passages (``log(1 + N / df)``,
    so "the" counts little), then by ``difflib`` ratio of the normalised texts, then position."""
    qwords = _words(quote)
    if not qwords:
        return []
    blocks = [(s, e, _words(text[s:e])) for s, e in _blocks(text, len(quote))]
    df = {w: sum(1 for _, _, ws in blocks if w in ws) for w in qwords}
    weight = {w: math.log(1 + len(blocks) / max(1, df[w])) for w in qwords}
    scored = []
    for s, e, ws in blocks:
        shared = qwords & ws
        if shared:
            scored.append((sum(weight[w] for w in shared), len(shared), s, e))
    scored.sort(key=lambda t: (-t[0], t[2]))
    q = normalised(quote)[0]
    top = [(w, SequenceMatcher(None, q, normalised(text[s:e])[0][: 4 * len(q) + 200], autojunk=False).ratio(),
            k, s, e) for w, k, s, e in scored[: 4 * n]]
    top.sort(key=lambda t: (-round(t[0], 9), -t[1], t[3]))
    return [(s, e, k, len(qwords)) for _, _, k, s, e in top[:n]]


def _grep_word(text: str, quote: str) -> str | None:
    """The quote's longest word that the document holds (to narrow ``corpus show --grep``)."""
    low = rough(text)
    words = sorted((w for w in _WORD.findall(rough(quote)) if len(w) >= 4), key=len, reverse=True)
    return next((w for w in words if w in low), None)


def miss_context(doc: Document, quote: str, corpus: str | None = None, n: int = 3) -> list[str]:
    """Lines that show where ``quote`` nearly is in ``doc``, with the command that shows them."""
    close = closest_passages(doc.text, quote, n)
    if not close:
        return [f"no passage of {doc.source_uri} shares a word with the quote; its text: "
                f"{show_command(doc.source_uri, corpus)}"]
    lines = Lines(doc.text)
    out = [f"closest passages in {doc.source_uri} (its text as a quote must match it: "
           f"{show_command(doc.source_uri, corpus)}):"]
    for start, end, shared, of in close:
        out.append(f"  line {lines.line_of(start)}, chars {start}..{end} ({shared} of the quote's {of} words): "
                   f"{_short(doc.text[start:end], 160)}")
    return out


Corpus = Sequence[Document] | Callable[[], Sequence[Document]]
"""The corpus as a list, or a function that reads it (called only when a miss must search it)."""


def _every(docs: Corpus | None) -> Sequence[Document]:
    return () if docs is None else docs() if callable(docs) else docs


def locate_unique(text: str, quote: str, doc: str, *, docs: Corpus | None = None,
                  corpus: str | None = None) -> tuple[int, int, str]:
    """``(start, end, mode)`` of the single occurrence of ``quote`` in ``text`` (see the module
    docstring). ``docs``: the corpus (or a function that reads it), to say on a miss in which
    other documents the quote is."""
    mode, spans = find_quote(text, quote)
    if not spans:
        docs = _every(docs)
        here = next((d for d in docs if doc in (d.source_uri, d.doc_id)), None)
        elsewhere = documents_with(docs, quote, skip=here.doc_id if here else None)
        context = miss_context(here or Document(doc, doc, doc, "doc", text), quote, corpus)
        grep = _grep_word(text, quote)
        if elsewhere:
            names = ", ".join(d.source_uri for d in elsewhere[:5]) + (" ..." if len(elsewhere) > 5 else "")
            raise QuoteError(f"quote {_short(quote)} not found in document {doc}, but it is in: {names}",
                             hint=f"pass --source-uri {shlex.quote(elsewhere[0].source_uri)}"
                             + (" (or another of them)" if len(elsewhere) > 1 else ""), context=context)
        raise QuoteError(f"quote {_short(quote)} not found in document {doc} (compared through whitespace, "
                         "Markdown markup and case)",
                         hint="copy the passage from the document's text as converted: "
                         + show_command(doc, corpus, grep), context=context)
    if len(spans) > 1:
        where = ", ".join(str(s) for s, _ in spans[:5])
        how = " (ignoring markup and case)" if mode == "normalised" else ""
        raise QuoteError(f"quote {_short(quote)} occurs {len(spans)} times{how} in document {doc} "
                         f"(at offsets {where})", hint="quote a longer passage so that it occurs once")
    (start, end), = spans
    return start, end, mode


def named_document(corpus_path: str | Path, name: str) -> tuple[Document | None, Corpus]:
    """The document ``name`` designates in the corpus folder (as :func:`resolve_document` finds it
    in the whole corpus), reading only the files that can be it: the one whose path or file stem
    is ``name``'s, and the Markdown files (their front matter may set another source_uri). Also
    returns the corpus to search on a miss: the documents read, when ``name`` was not found
    among them, else a function that reads every document then (once)."""
    stem = PurePosixPath(name.replace("\\", "/")).stem

    def keep(rel: str, fmt: str) -> bool:
        return fmt == "md" or rel == name or PurePosixPath(rel).stem == stem

    some = load_some(corpus_path, keep)
    found = resolve_document(some, name)
    if found is None:  # not among the files that could be it (or ambiguous): the whole corpus decides
        every = load_corpus(corpus_path)
        return resolve_document(every, name), every
    whole: list[Document] = []

    def read_all() -> list[Document]:
        whole[:] = whole or load_corpus(corpus_path)
        return whole

    return found, read_all


# == the case ==================================================================================
def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise UserError(f"--kind must be one of {', '.join(KINDS)}, got {kind!r}",
                        hint="exact: the question names an identifier the passage holds; paraphrase: it asks in "
                        "other words; production: as a user asked it")
    return kind


def case_identifier(query: str, text: str, kind: str, identifier: str | None) -> str | None:
    """The identifier an ``exact`` case carries: ``identifier`` when given, else the first
    identifier of the question (:func:`rag_experiments.identifiers.find_identifiers`: snake_case
    and dotted names, ``--options``, ``file.conf``, error codes, names in capitals such as
    ``HISTSIZE``, camelCase settings such as ``push.autoSetupRemote``) that ``text`` (the
    evidence's document, or its chunk) holds, recorded as the question writes it. Compared through
    markup and case (a name in capitals in capitals); it must be in the question (for ``exact``)
    and in ``text``. None for other kinds without ``identifier``."""
    body = normalised(text)[0]
    if identifier is not None:
        ident = normalised(identifier)[0]
        if not ident:
            raise UserError("--identifier is empty")
        if kind == "exact" and ident not in normalised(query)[0]:
            raise UserError(f"--identifier {identifier!r} is not in the question",
                            hint="an exact question names the identifier (an option, parameter, error code, ...)")
        if ident not in body:
            raise UserError(f"--identifier {identifier!r} is not in the evidence's document",
                            hint="an exact case asks about an identifier its evidence documents")
        return identifier
    if kind != "exact":
        return None
    idents = find_identifiers(query)
    found = next((i for i in idents if _holds(text, body, i)), None)
    if found is None:
        named = f" ({', '.join(idents)}: not in the evidence's document)" if idents else ""
        raise UserError(f"--kind exact: the question names no identifier that the evidence's document holds{named}",
                        hint="name it with --identifier TEXT (as the question and the document write it, e.g. "
                        "push.autoSetupRemote), or use --kind paraphrase or --kind production")
    return found


def _holds(text: str, body: str, ident: str) -> bool:
    """Whether a document (``text``; ``body``: its normalised text) holds the identifier a question
    names: a word in capitals (``HISTSIZE``, a shape only :func:`find_identifiers` knows) as a
    whole token in capitals (``PATH`` is a name, "path" a word); the other shapes (``AUTO_CD``,
    ``--autosquash``) through markup and case, as before."""
    if ident.isupper() and not extract_identifiers(ident):
        return written_in(ident, text)
    return normalised(ident)[0] in body


def production_case(query: str, *, chunk_id: str | None = None, source_uri: str | None = None,
                    quote: str | None = None, chunk_lookup: Callable[[str], dict | None] | None = None,
                    doc_lookup: Callable[[str], dict | None] | None = None,
                    docs: Sequence[Document] | None = None, corpus: str | None = None,
                    corpus_path: str | Path | None = None,
                    author: str | None = None, note: str | None = None, grade: int = 2,
                    kind: str = "production", identifier: str | None = None, method: str = "human") -> AddResult:
    """Build (not append) a case from a chunk id, or a source uri + quote.

    ``method``: who wrote the case, recorded as ``provenance.method``: ``human`` (a person) or
    ``agent`` (an AI agent or a script writing by hand; its cases count as generated in
    ``golden stats``), with ``author`` naming the person or the agent.

    The document of a quote comes from ``docs`` (the corpus as loaded: by source_uri, doc_id or
    unique file stem), from ``corpus_path`` (the corpus folder: only the named document's file is
    read, and the Markdown files, whose front matter may name them otherwise; every document only
    when a miss must say where the quote is or which names are close) or from ``doc_lookup``.
    ``corpus``: named in the hints' commands when it is not the configured one."""
    query = " ".join(query.split())
    if not query:
        raise UserError("the query is empty")
    check_query(query, "--query")  # refused here, or every later run on the set would trip on it
    check_kind(kind)
    if method not in ADD_METHODS:
        raise UserError(f"--by {method!r}: expected one of {', '.join(ADD_METHODS)}")
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
        doc_type, located, doc_text = chunk["doc_type"], "chunk", chunk["text"]
    else:
        if not quote or not quote.strip():
            raise UserError("--source-uri needs --quote (the passage that answers the query)")
        if docs is None and corpus_path is not None:
            found, docs = named_document(corpus_path, source_uri)
        elif docs is not None:
            found = resolve_document(docs, source_uri)
        if docs is not None:
            doc = None if found is None else {"doc_id": found.doc_id, "source_uri": found.source_uri,
                                              "doc_type": found.doc_type, "text": found.text,
                                              "content_hash": found.content_hash}
        elif doc_lookup is not None:
            doc = doc_lookup(source_uri)
        else:
            raise ValueError("docs or doc_lookup is required with source_uri")
        if doc is None:
            raise _no_document(source_uri, quote, None if docs is None else _every(docs), corpus)
        start, end, located = locate_unique(doc["text"], quote, doc.get("source_uri") or source_uri, docs=docs,
                                            corpus=corpus)
        span = Span(doc["doc_id"], doc.get("source_uri") or source_uri, start, end, doc["text"][start:end],
                    doc["content_hash"])
        doc_type, doc_text = doc["doc_type"], doc["text"]
    ident = case_identifier(query, doc_text, kind, identifier)
    provenance = {"method": method, "author": author or os.environ.get("USER") or getpass.getuser()}
    if note:
        provenance["note"] = note
    record = {
        "type": "case",
        "id": new_id("c", query, *span.key),
        "query": query,
        "kind": kind,
        "doc_type": doc_type,
        "evidence": [{**span.to_json(), "grade": grade}],
        "provenance": provenance,
    }
    if ident is not None:
        record["identifier"] = ident
    return AddResult(record, located)


def _no_document(source_uri: str, quote: str, docs: Sequence[Document] | None, corpus: str | None) -> NotFoundError:
    list_cmd = "rag-exp corpus list" + ("" if corpus is None else " --corpus " + shlex.quote(str(corpus)))
    if docs is None:
        return NotFoundError(f"document {source_uri!r} not found", hint=f"check the source uri ({list_cmd})")
    holding = documents_with(docs, quote)
    if holding:
        names = ", ".join(d.source_uri for d in holding[:5])
        return NotFoundError(f"document {source_uri!r} is not in the corpus ({len(docs)} documents); the quote is "
                             f"in: {names}", hint=f"pass --source-uri {shlex.quote(holding[0].source_uri)}")
    close = similar_names(docs, source_uri)
    near = f"; closest names: {', '.join(close)}" if close else ""
    return NotFoundError(f"document {source_uri!r} is not in the corpus ({len(docs)} documents), and the quote is "
                         f"in none of them{near}",
                         hint=f"give a source_uri, doc_id or unique file stem as {list_cmd} shows them")


def add_production_case(golden_path: str | Path, query: str, **kwargs) -> AddResult:
    """Build a case (see :func:`production_case`) and append it to the golden set."""
    result = production_case(query, **kwargs)
    golden = GoldenFile(golden_path)
    if golden.exists() and any(r.id == result.record["id"] for r in golden.read_records()):
        raise GoldenSetError(f"{golden.path}: this case (same query and evidence) is already there: "
                             f"{result.record['id']}")
    written, = golden.append([result.record])
    return AddResult(written, result.located)


add_case = add_production_case
