"""Relevance anchored to text: when does a retrieved chunk count as finding an evidence span?

**Overlap rule** (one function, used everywhere): a chunk ``[cs, ce)`` and an evidence span
``[es, ee)`` of the same document match when their overlap covers at least ``min_coverage``
(default 0.5) of the evidence span, *or* at least ``min_coverage`` of the chunk. The first
clause credits a chunk that contains most of the answer; the second credits a small chunk
that lies inside a long evidence span (e.g. a whole-document benchmark judgement).

**Crediting** (:func:`credit`, the single place; docs/concepts/relevance.md has the worked
examples the tests use). Walking the ranking from the top, in the order the system gave it
(scores are never re-sorted, so ties in score keep the list's order):

1. *A repeated span earns nothing and keeps its rank.* A hit whose ``(doc_id, start, end)``
   equals an earlier hit's is a duplicate: gain 0, credited with nothing, still occupying its
   rank (the user sees it there), so every later hit stays where the user sees it. The first
   occurrence is the one credited. Empty spans (unplaced passages) are never duplicates.
2. *Each evidence span is credited once.* Any other hit is credited with one evidence span it
   matches that no earlier hit was credited with: the highest grade (2 = YES, 1 = PART); among
   spans of that grade, the one the hit covers the largest share of; then the one that starts
   first in the document; then the span's ref. Its gain is that span's grade; a hit that
   matches only already-credited spans gains 0.

The relevant units of a case are its evidence spans, so recall@k = credited spans in top k /
all relevant spans, exactly as trec_eval counts relevant documents (for a case of one evidence
group; a case that needs several passages averages that share over its groups:
:func:`.metrics.group_recall_at_k`, each credited span counting for its own group). :meth:`Credited.pseudo_ids`
maps a ranking to document ids that reproduce this in ranx / ir_measures (the cross-check tests
use it): a credited hit is its span's ref, any other hit a unique id of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..golden.resolve import EvalCase, Evidence
from ..span_match import matches, overlap
from ..types import Hit


@dataclass(frozen=True)
class Credited:
    """Per rank: the gain credited and the evidence ref it was credited for (or None)."""

    gains: tuple[int, ...]
    refs: tuple[str | None, ...]
    judged: tuple[bool, ...]  # the hit overlaps any judged span (any grade) of the case
    # the 1-based rank of the earlier hit with the same span, or None: a repeat earns nothing
    duplicate_of: tuple[int | None, ...] = ()

    @property
    def duplicate_ranks(self) -> list[int]:
        """The 1-based ranks that repeat an earlier hit's span (what the per-case table lists)."""
        return [i for i, first in enumerate(self.duplicate_of, start=1) if first is not None]

    def pseudo_ids(self, hits: Sequence[Hit]) -> list[str]:
        """One document id per rank for trec_eval / ranx / ir_measures: a credited hit is its
        evidence ref (the qrels' id), any other hit ``<chunk id>@<rank>``, unique even when the
        system repeated a chunk (a run maps a document id to one score: a repeated id would
        collapse and move every later hit up)."""
        return [ref if ref is not None else f"{h.chunk_id}@{i}"
                for i, (h, ref) in enumerate(zip(hits, self.refs), start=1)]


def _share(h: Hit, ev: Evidence) -> float:
    """The share of the evidence span the hit covers."""
    length = ev.span.end - ev.span.start
    return overlap(h.start, h.end, ev.span.start, ev.span.end) / length if length > 0 else 0.0


def credit(case: EvalCase, hits: Sequence[Hit], min_coverage: float = 0.5) -> Credited:
    relevant = case.relevant
    judged_spans = case.judged
    used: set[str] = set()
    first_at: dict[tuple[str, int, int], int] = {}
    gains, refs, judged, duplicate_of = [], [], [], []
    for rank, h in enumerate(hits, start=1):
        judged.append(any(
            matches(h.doc_id, h.start, h.end, e.span.doc_id, e.span.start, e.span.end, min_coverage)
            for e in judged_spans))
        span = (h.doc_id, h.start, h.end)
        earlier = first_at.get(span) if h.end > h.start else None
        duplicate_of.append(earlier)
        if earlier is not None:  # the user sees the same passage again: it keeps its rank, earns nothing
            gains.append(0)
            refs.append(None)
            continue
        if h.end > h.start:
            first_at[span] = rank
        candidates = [ev for ev in relevant if ev.ref not in used and matches(
            h.doc_id, h.start, h.end, ev.span.doc_id, ev.span.start, ev.span.end, min_coverage)]
        best = min(candidates, key=lambda ev: (-ev.grade, -_share(h, ev), ev.span.start, ev.ref), default=None)
        if best is not None:
            used.add(best.ref)
        gains.append(best.grade if best else 0)
        refs.append(best.ref if best else None)
    return Credited(tuple(gains), tuple(refs), tuple(judged), tuple(duplicate_of))
