"""The crediting rules, on the hand-worked examples of docs/concepts/relevance.md (same numbers):
a repeated span keeps its rank and earns nothing; a hit matching several unused spans of one
grade is credited with the span it covers the largest share of, then the earliest in the
document, then the span's ref; ties in score keep the system's order."""

from __future__ import annotations

import math

import pytest

from rag_experiments.evaluation import metrics as M
from rag_experiments.evaluation.evaluate import EvalParams, score_case
from rag_experiments.evaluation.relevance import credit
from rag_experiments.golden.records import Span
from rag_experiments.golden.resolve import EvalCase, Evidence
from rag_experiments.types import Hit, RankedList


def _case(*spans: tuple[int, int, str], grade: int = 2, grades: tuple[int, ...] = ()) -> EvalCase:
    ev = tuple(Evidence(Span("d", "d", s, e, "x" * (e - s), "h"), grades[i] if grades else grade, ref)
               for i, (s, e, ref) in enumerate(spans))
    return EvalCase("c", "q", "exact", "t", ev)


def _hits(*spans: tuple[int, int], score: float | None = None) -> list[Hit]:
    return [Hit(f"h{s}-{e}", "d", "d", "t", s, e, score if score is not None else 1.0 / r, r)
            for r, (s, e) in enumerate(spans, start=1)]


def test_filler_filler_evidence_is_scored_where_the_user_sees_the_evidence():
    """[filler, filler, evidence], the two fillers one span: the evidence is at rank 3."""
    case = _case((1000, 1100, "c#0"))
    hits = _hits((0, 400), (0, 400), (1000, 1200))
    cr = credit(case, hits)
    assert cr.gains == (0, 0, 2) and cr.duplicate_ranks == [2] and cr.duplicate_of == (None, 1, None)
    row = score_case(case, RankedList("q", tuple(hits)), EvalParams())
    assert row["mrr_at_10"] == pytest.approx(1 / 3)                    # 0.333, not the 0.500 of dropping the repeat
    assert row["recall_at_5"] == 1.0 and M.recall_at_k(cr.gains, [2], 2) == 0.0
    assert row["ndcg_at_10"] == pytest.approx((2 / math.log2(4)) / 2)  # 1 / 2 = 0.500 (not 0.631)
    assert row["ndcg_at_10"] == pytest.approx(0.5)
    assert row["duplicate_ranks"] == [2] and row["gains"] == [0, 0, 2] and row["first_relevant_rank"] == 3


def test_a_repeat_of_a_hit_covering_two_spans_earns_nothing():
    """One hit covering both evidence spans, returned twice: the repeat is not credited with the
    second span (the old rule gave it 2: recall@2 1.0 and nDCG@10 1.0)."""
    case = _case((100, 140, "c#0"), (160, 200, "c#1"))
    hits = _hits((90, 210), (90, 210))
    cr = credit(case, hits)
    assert cr.gains == (2, 0) and cr.refs == ("c#0", None) and cr.duplicate_ranks == [2]
    assert M.recall_at_k(cr.gains, [2, 2], 2) == 0.5
    ideal = 2 + 2 / math.log2(3)                                       # 3.26186
    assert M.ndcg_at_k(cr.gains, [2, 2], 10) == pytest.approx(2 / ideal)
    assert 2 / ideal == pytest.approx(0.613147, abs=1e-6)


@pytest.mark.parametrize("spans, first_hit, credited", [
    # covers 60% of c#0 and 100% of c#1: the span it covers the larger share of
    (((0, 100, "c#0"), (150, 190, "c#1")), (40, 190), "c#1"),
    # covers all of both: the one that starts first in the document (not the smaller ref)
    (((100, 140, "c#1"), (200, 240, "c#0")), (100, 240), "c#1"),
    # covers all of both and both start at 100: the ref decides
    (((100, 140, "c#1"), (100, 160, "c#0")), (100, 160), "c#0"),
])
def test_a_hit_covering_two_spans_of_one_grade(spans, first_hit, credited):
    """The second hit lies on the span the first one was not credited with: a reader credits the
    first hit with what it holds best and the second with the other, so both count."""
    other = next((s, e) for s, e, ref in spans if ref != credited)
    case = _case(*spans)
    cr = credit(case, _hits(first_hit, other))
    assert cr.refs[0] == credited and cr.gains == (2, 2)
    assert M.recall_at_k(cr.gains, [2, 2], 2) == 1.0 and M.ndcg_at_k(cr.gains, [2, 2], 10) == pytest.approx(1.0)


def test_the_first_example_differs_from_crediting_by_span_id():
    """The rule by ref alone (the old one) credited hit 1 with c#0; hit 2, which holds only c#0,
    then earned nothing: recall@2 0.5 where a reader counts both spans found."""
    case = _case((0, 100, "c#0"), (150, 190, "c#1"))
    cr = credit(case, _hits((40, 190), (0, 100)))
    assert cr.refs == ("c#1", "c#0") and M.recall_at_k(cr.gains, [2, 2], 2) == 1.0


def test_grade_comes_before_coverage():
    case = _case((0, 100, "c#0"), (150, 190, "c#1"), grades=(2, 1))
    cr = credit(case, _hits((40, 190)))
    assert cr.refs == ("c#0",) and cr.gains == (2,)  # 60% of a YES span beats 100% of a PART span


def test_ties_in_score_keep_the_systems_order_and_unplaced_hits_are_never_repeats():
    case = _case((1000, 1100, "c#0"))
    tied = _hits((0, 400), (1000, 1200), score=0.7)  # equal scores: nothing is re-sorted
    assert credit(case, tied).gains == (0, 2)
    unplaced = [Hit(f"u{i}", "unplaced:x", "unplaced:x", "", 0, 0, 0.0, i) for i in (1, 2)]
    assert credit(case, unplaced).duplicate_ranks == []  # two misses, not a repeat


def test_pseudo_ids_keep_a_repeat_at_its_rank():
    """What the ranx / ir_measures cross-checks feed them: one id per rank, a repeat its own id."""
    case = _case((1000, 1100, "c#0"))
    hits = _hits((0, 400), (0, 400), (1000, 1200))
    ids = credit(case, hits).pseudo_ids(hits)
    assert ids == ["h0-400@1", "h0-400@2", "c#0"] and len(set(ids)) == 3
