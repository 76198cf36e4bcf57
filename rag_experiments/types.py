"""Plain values that flow left to right through the pipeline.

Everything here is a frozen dataclass: no module mutates a value it received (BEIR's in-place
mutation of result dicts is the anti-pattern we avoid). Nothing here imports hydra, omegaconf
or mlflow.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import cached_property


def sha256_text(text: str) -> str:
    """Hex sha256 of UTF-8 text: the content hash used for documents, chunks and caches."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class SourceFile:
    """Where a converted document's text came from (a PDF, DOCX, PPTX or HTML file): the
    converter that made it and the structure it saw. Markdown and plain-text documents have none:
    their text is the file."""

    path: str  # relative to the corpus folder
    file_sha256: str  # of the file's bytes: what the conversion cache is keyed by
    converter: str  # "pypdf 7.1.1": package and version, recorded in the corpus manifest
    pages: tuple[int, ...] = ()  # start offset in the text of page (PDF) or slide (PPTX) 1, 2, ...
    headings: tuple[tuple[int, int, str], ...] = ()  # (offset, level, title): PDF bookmarks, Markdown headings

    def page_at(self, offset: int) -> int | None:
        """The 1-based page (or slide) holding char ``offset`` of the text; None without pages."""
        if not self.pages:
            return None
        return max(1, bisect_right(self.pages, offset))


@dataclass(frozen=True)
class Document:
    """One source document. ``text`` is what every char span indexes into."""

    doc_id: str  # stable id; for the shipped corpus the same as source_uri
    source_uri: str
    title: str
    doc_type: str
    text: str
    corpus: str = "demo"
    # converted documents only; left out of equality and hashing, so a Document compares (and
    # keys) by its text and ids exactly as before, converted or not
    source: SourceFile | None = field(default=None, compare=False, repr=False)
    # where ``text`` starts in the file as read in text mode (CRLF read as LF): the front matter's
    # length in characters, 0 without one; what a library's loader that keeps the front matter
    # counts its offsets from (retrieval.external.offsets=raw). Converted documents: 0
    text_offset: int = field(default=0, compare=False, repr=False)

    @cached_property
    def content_hash(self) -> str:
        # computed once per document: drift, evidence and manifest checks ask for it on every
        # sweep point (cached_property writes the instance dict, so the dataclass stays frozen)
        return sha256_text(self.text)


@dataclass(frozen=True)
class Chunk:
    """A span ``[start, end)`` of a document. ``text == document.text[start:end]`` always holds.

    ``indexed_text`` is what gets embedded and full-text indexed: the span text, optionally
    with a breadcrumb (``Page > Section``) or a carried table header in front of it.
    """

    chunk_id: str
    doc_id: str
    start: int
    end: int
    text: str
    indexed_text: str
    n_tokens: int
    ordinal: int  # position of the chunk within its document

    @staticmethod
    def make_id(strategy_key: str, doc_id: str, start: int, end: int) -> str:
        """Stable id for the same input: same strategy, document and span give the same id."""
        raw = f"{strategy_key}|{doc_id}|{start}|{end}"
        return hashlib.sha1(raw.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk: the single shape of a leg's candidate, a fused or reranked hit, what
    evaluation scores and what the CLI and serving show. ``rank`` is its 1-based position in the
    list it is in; ``leg_ranks`` maps a leg name (``vector``, ``keyword``, ``fused``, ``rerank``) to the
    1-based rank that stage gave this chunk; a stage that did not return it has no entry.
    """

    chunk_id: str
    doc_id: str
    source_uri: str
    doc_type: str
    start: int
    end: int
    score: float
    rank: int
    leg_ranks: dict[str, int] = field(default_factory=dict, hash=False, compare=False)

    def ranked(self, score: float, rank: int, leg_ranks: dict[str, int]) -> Hit:
        """This chunk as the next stage ranks it: ``dataclasses.replace`` at a fifth of its cost (a
        sweep point builds ~20k of them; the frozen ``__init__`` sets each field through
        ``object.__setattr__``). Every field is copied, then the three that change are set."""
        new = object.__new__(Hit)
        d = new.__dict__
        d.update(self.__dict__)
        d["score"] = score
        d["rank"] = rank
        d["leg_ranks"] = leg_ranks
        return new


@dataclass(frozen=True)
class RankedList:
    """The answer of a retrieval variant for one query: hits in rank order (rank 1 first)."""

    query: str
    hits: tuple[Hit, ...]
    latency_ms: float = 0.0
