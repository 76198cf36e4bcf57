"""Labelled spans in documents left out as copies (``corpus.copies=exclude``) move to the same
text in a kept document, for scoring only.

A copy's text lives on in the documents kept (:mod:`rag_experiments.corpus.copies`): a case whose
evidence was quoted from ``git-add.html`` is answered by the same sentence in ``git-add.txt``
when the HTML page is not indexed. Without this, every such span would be unreachable and the
case would score 0 for a reason that has nothing to do with retrieval. The golden file is not
touched (append-only): the spans are moved in the scored cases of this run, found verbatim, else
through whitespace, Markdown markup and case (:func:`.normalise.find_normalised`), in the copy's
main source first, else approximately in that source (:func:`.fuzzy.locate` at the re-anchoring
threshold, 0.85: a judged chunk of an HTML page against its asciidoc source). A span found
nowhere stays where it is (unreachable) and is counted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from ..types import Document
from .fuzzy import FUZZY_THRESHOLD, DocIndex, locate
from .normalise import find_normalised, normalised, rough
from .records import Span
from .resolve import GoldenSet


# token comparisons the approximate search may spend on one span (the bound placing a team's passages uses)
FUZZY_BUDGET = 5_000_000


@dataclass(frozen=True)
class Relocated:
    golden: GoldenSet  # the cases to score, spans in excluded copies moved to kept documents
    moved: int  # relevant spans moved
    unreachable: int  # relevant spans in an excluded copy whose text no kept document has


def _found(quote: str, doc: Document, norms: dict[str, tuple[str, list[int]]]) -> Span | None:
    at = doc.text.find(quote)
    if at >= 0:
        a, b = at, at + len(quote)
    else:
        words = rough(quote).split()
        if not words or max(words, key=len) not in rough(doc.text):  # cheap: cannot hold it
            return None
        if doc.doc_id not in norms:
            norms[doc.doc_id] = normalised(doc.text)
        spans = find_normalised(doc.text, quote, norms[doc.doc_id])
        if not spans:
            return None
        a, b = spans[0]
    return Span(doc.doc_id, doc.source_uri, a, b, doc.text[a:b], doc.content_hash)


def _near(quote: str, doc: Document, indexes: dict[str, DocIndex]) -> Span | None:
    """The window of ``doc`` most like ``quote`` at the golden set's re-anchoring threshold
    (:func:`.fuzzy.locate`, work-bounded as placing a team's passages is), or None."""
    if doc.doc_id not in indexes:
        indexes[doc.doc_id] = DocIndex(doc.text)
    m = locate(indexes[doc.doc_id], quote, None, quote, FUZZY_THRESHOLD, FUZZY_BUDGET)
    if m.status == "none":
        return None
    return Span(doc.doc_id, doc.source_uri, m.start, m.end, doc.text[m.start:m.end], doc.content_hash)


def relocate_to_kept(golden: GoldenSet, docs: Sequence[Document], gone: frozenset[str],
                     source_of: Mapping[str, str] | None = None) -> Relocated:
    """``golden`` with every labelled span in a document of ``gone`` moved to the same text in a
    kept document of ``docs`` (``source_of``: copy doc id -> the kept document to look in first)."""
    kept = [d for d in docs if d.doc_id not in gone]
    by_id = {d.doc_id: d for d in kept}
    norms: dict[str, tuple[str, list[int]]] = {}
    indexes: dict[str, DocIndex] = {}
    moved = unreachable = 0
    cases = []
    for case in golden.cases:
        evidence = list(case.evidence)
        for i, e in enumerate(evidence):
            if e.span.doc_id not in gone:
                continue
            first = by_id.get((source_of or {}).get(e.span.doc_id, ""))
            order = ([first] if first else []) + [d for d in kept if d is not first]
            span = next((s for d in order if (s := _found(e.span.quote, d, norms)) is not None), None)
            if span is None and first is not None and e.grade > 0:  # a chunk whose markup differs (HTML vs source)
                span = _near(e.span.quote, first, indexes)
            if span is None:
                unreachable += e.grade > 0
                continue
            evidence[i] = replace(e, span=span)
            moved += e.grade > 0
        cases.append(replace(case, evidence=tuple(evidence)) if evidence != list(case.evidence) else case)
    return Relocated(replace(golden, cases=tuple(cases)), moved, unreachable)
