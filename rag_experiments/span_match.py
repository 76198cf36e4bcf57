"""The overlap rule: when a retrieved span counts as a golden span.

Pure span arithmetic, in a module of its own below every layer: evaluation credits hits by it,
labelling skips the hits evaluation would already credit by it, and triage finds the expected
evidence by it. One rule, so the three can never disagree."""

from __future__ import annotations


def overlap(a_start: int, a_end: int, b_start: int, b_end: int) -> int:
    """Characters two half-open spans share (0 when they do not touch)."""
    return max(0, min(a_end, b_end) - max(a_start, b_start))


def matches(doc_id: str, start: int, end: int, ev_doc: str, ev_start: int, ev_end: int,
            min_coverage: float = 0.5) -> bool:
    """Same document, and the overlap is at least ``min_coverage`` of the evidence span or of the hit."""
    if doc_id != ev_doc:
        return False
    ov = overlap(start, end, ev_start, ev_end)
    if ov <= 0:
        return False
    return ov >= min_coverage * (ev_end - ev_start) or ov >= min_coverage * (end - start)
