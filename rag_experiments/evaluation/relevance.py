"""Relevance anchored to text: when does a retrieved chunk count as finding an evidence span?

**Overlap rule** (one function, used everywhere): a chunk ``[cs, ce)`` and an evidence span
``[es, ee)`` of the same document match when their overlap covers at least ``min_coverage``
(default 0.5) of the evidence span, *or* at least ``min_coverage`` of the chunk. The first
clause credits a chunk that contains most of the answer; the second credits a small chunk
that lies inside a long evidence span (e.g. a whole-document benchmark judgement).

**Crediting** (so that overlapping chunks cannot inflate scores): walking the ranking from the
top, a chunk is credited with the highest-grade evidence span it matches that no earlier
chunk was credited with. Its gain is that span's grade (2 = YES, 1 = PART); a chunk that
matches only already-credited spans gains 0. The relevant units of a case are its evidence
spans, so recall@k = credited spans in top k / all relevant spans, exactly as trec_eval counts
relevant documents. :func:`credit` maps a ranking to pseudo document ids that reproduce this
in ranx / ir_measures (the cross-check tests use it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..golden.resolve import EvalCase, Evidence
from ..types import Hit


def overlap(a_start: int, a_end: int, b_start: int, b_end: int) -> int:
    return max(0, min(a_end, b_end) - max(a_start, b_start))


def matches(doc_id: str, start: int, end: int, ev_doc: str, ev_start: int, ev_end: int,
            min_coverage: float = 0.5) -> bool:
    if doc_id != ev_doc:
        return False
    ov = overlap(start, end, ev_start, ev_end)
    if ov <= 0:
        return False
    return ov >= min_coverage * (ev_end - ev_start) or ov >= min_coverage * (end - start)


@dataclass(frozen=True)
class Credited:
    """Per rank: the gain credited and the evidence ref it was credited for (or None)."""

    gains: tuple[int, ...]
    refs: tuple[str | None, ...]
    judged: tuple[bool, ...]  # the hit overlaps any judged span (any grade) of the case


def credit(case: EvalCase, hits: Sequence[Hit], min_coverage: float = 0.5) -> Credited:
    relevant = sorted(case.relevant, key=lambda e: (-e.grade, e.ref))
    judged_spans = case.judged
    used: set[str] = set()
    gains, refs, judged = [], [], []
    for h in hits:
        best: Evidence | None = None
        for ev in relevant:
            if ev.ref in used:
                continue
            if matches(h.doc_id, h.start, h.end, ev.span.doc_id, ev.span.start, ev.span.end, min_coverage):
                best = ev
                break  # sorted by grade, so the first unused match is the best
        if best is not None:
            used.add(best.ref)
        gains.append(best.grade if best else 0)
        refs.append(best.ref if best else None)
        judged.append(any(
            matches(h.doc_id, h.start, h.end, e.span.doc_id, e.span.start, e.span.end, min_coverage)
            for e in judged_spans))
    return Credited(tuple(gains), tuple(refs), tuple(judged))
