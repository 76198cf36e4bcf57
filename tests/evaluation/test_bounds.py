"""Bounds under unjudged hits, worked by hand (rag_experiments.evaluation.bounds).

Notation: a list's slots are per rank a fixed gain (2 YES, 1 PART, 0 a judged miss) or the key of
an unjudged passage ("u1"); grades are the case's relevant units.
"""

from __future__ import annotations

import math

import pytest

from rag_experiments.evaluation.bounds import (CaseView, case_view, delta_bounds, pair_range, run_bounds, run_range,
                                               value)
from rag_experiments.golden.records import Span
from rag_experiments.golden.resolve import EvalCase, Evidence
from rag_experiments.types import Hit


def view(*slots, grades=(2,)):
    return CaseView(tuple(slots), tuple(grades))


def test_recall_high_end_adds_the_new_units_to_the_denominator():
    # top 5: relevant, unjudged, miss, unjudged, miss; 2 relevant units known (one not retrieved)
    v = view(2, "u1", 0, "u2", 0, grades=(2, 2))
    assert value("recall", 5, v) == 0.5
    lo, hi = run_range("recall", 5, v)
    # both unjudged relevant: found 3 of 4 units (not 3 of 2)
    assert (lo, hi) == (0.5, 0.75)


def test_mrr_and_hit_ends():
    v = view(0, 0, "u1", 1, "u2", grades=(1,))
    assert run_range("mrr", 10, v) == (0.25, pytest.approx(1 / 3))
    assert run_range("hit", 5, view(0, "u1", 0, grades=(2,))) == (0.0, 1.0)
    # an unjudged hit past the cut-off moves nothing
    assert run_range("hit", 2, view(0, 0, "u1", grades=(2,))) == (0.0, 0.0)


def test_ndcg_max_is_not_all_yes():
    # relevant at rank 1, unjudged at rank 10: a YES there raises the ideal more than the DCG
    v = view(2, 0, 0, 0, 0, 0, 0, 0, 0, "u1", grades=(2,))
    lo, hi = run_range("ndcg", 10, v)
    all_yes = (2 + 2 / math.log2(11)) / (2 + 2 / math.log2(3))
    assert hi == 1.0
    assert lo == pytest.approx(all_yes)  # 0.792: the low end is the all-YES reading here


def test_pair_range_shared_passage_takes_one_verdict():
    # both lists rank the same unjudged passage first; everything else a miss: Δ is 0 whatever it is
    a = view("u1", 0, 0, grades=(2,))
    b = view("u1", 0, 0, grades=(2,))
    assert pair_range("mrr", 10, a, b) == (0.0, 0.0)
    # the per-run ends combined would have said -1..+1
    assert run_range("mrr", 10, a)[1] - run_range("mrr", 10, b)[0] == 1.0


def test_pair_range_exclusive_passages():
    # A: unjudged at rank 1, relevant at rank 2; B: relevant at rank 1, unjudged at rank 3
    a = view("uA", 2, 0, grades=(2,))
    b = view(2, 0, "uB", grades=(2,))
    # recall@3: max Δ uA YES, uB NO: a = 2/2, b = 1/2 -> +0.5; min uB YES, uA NO: a = 1/2, b = 2/2 -> -0.5
    assert pair_range("recall", 3, a, b) == (-0.5, 0.5)
    # MRR: a is 1/2 or 1, b is 1: Δ in [-0.5, 0]
    assert pair_range("mrr", 10, a, b) == (-0.5, 0.0)


def test_pair_range_ndcg_exact_on_a_small_case():
    a = view("u1", 0, grades=(2,))
    b = view(0, "u1", grades=(2,))
    lo, hi = pair_range("ndcg", 10, a, b)
    # u1 NO: both 0; u1 YES: ideal 2 + 2/log2(3), a = 2/ideal, b = (2/log2(3))/ideal
    ideal = 2 + 2 / math.log2(3)
    assert lo == 0.0
    assert hi == pytest.approx((2 - 2 / math.log2(3)) / ideal)


def test_aggregates_and_the_line():
    a = {"c1": view(2, "u1", grades=(2, 2)), "c2": view(0, 0, grades=(2,))}
    b = {"c1": view(2, 0, grades=(2, 2)), "c2": view(2, 0, grades=(2,))}
    ra = run_bounds("recall_at_2", a)
    # c1: 1 of 2, or 2 of 3 with u1 YES; c2: 0
    assert (ra.value, ra.low, ra.high, ra.unjudged) == (0.25, 0.25, pytest.approx(1 / 3), 1)
    # the range is over the hits in the cut-off: a passage found relevant elsewhere lowers recall, said so
    assert ra.text() == ("recall@2 0.250, could be 0.25-0.33 with 1 hits unjudged (over this top 2: a passage found "
                         "relevant outside it lowers recall@2)")
    d = delta_bounds("recall_at_2", a, b)
    # c1: u1 NO -> 1/2 - 1/2 = 0; YES -> 2/3 - 1/3 (u1 joins b's denominator too); c2: 0 - 1
    assert (d.delta, d.low, d.high) == (-0.5, -0.5, pytest.approx((1 / 3 - 1) / 2))
    assert d.sign_fixed
    assert "B ahead whatever they turn out to be (the sign cannot flip; over the passages in these top 2: one " \
           "found relevant outside both can still move Δ)" in d.text()
    # why the note: c2 gets 4 more relevant units no run retrieved (another run's, deeper): c2's Δ 0 - 1/5,
    # c1's unchanged 0: the mean Δ -0.1, outside the range -0.5 to -0.33 printed for these passages
    later = delta_bounds("recall_at_2", {**a, "c2": view(0, 0, grades=(2,) * 5)}, {**b, "c2": view(2, 0, grades=(2,) * 5)})
    assert later.delta == pytest.approx(-0.1) and later.delta > d.high
    flips = delta_bounds("recall_at_2", {"c1": view(0, "u1", grades=(2,))}, {"c1": view(2, 0, grades=(2,))})
    # u1 NO: 0 - 1; YES: 1/2 - 1/2 (u1 is a second unit of the case, for b too): a tie at best
    assert (flips.low, flips.high) == (-1.0, 0.0) and not flips.sign_fixed
    can = delta_bounds("mrr_at_10", {"c1": view("u1", 0, grades=(2,))}, {"c1": view(0, 2, grades=(2,))})
    assert (can.low, can.high) == (-0.5, 0.5) and not can.sign_fixed and "can still flip" in can.text()
    # MRR reads no denominator: its ranges are whole, no note
    assert "outside" not in can.text() and "outside" not in run_bounds("mrr_at_10", {"c1": view("u1", 0)}).text()


def test_case_view_from_credit():
    span = Span("d1", "d1", 0, 10, "x" * 10, "h")
    no = Span("d1", "d1", 20, 30, "y" * 10, "h")
    case = EvalCase("c1", "q", "exact", "md", (Evidence(span, 2, "c1#0"), Evidence(no, 0, "j1")))

    def hit(s, e):
        return Hit(chunk_id=f"d1:{s}", doc_id="d1", source_uri="d1", doc_type="", start=s, end=e, score=1.0, rank=1)

    v = case_view(case, [hit(40, 50), hit(0, 10), hit(20, 30), hit(40, 50), hit(60, 70)], depth=5)
    # unjudged, credited YES, judged NO, a repeat of rank 1 (earns nothing, not unknown twice), unjudged
    assert v.slots == ("d1:40-50", 2, 0, 0, "d1:60-70")
    assert v.grades == (2,)


def test_a_delta_no_verdict_can_move_says_so_not_that_its_sign_can_flip():
    """Both runs find every relevant passage whatever the unjudged ones are (a sweep's mini points):
    Δ 0 with the range [0, 0] cannot flip; the line used to say 'the sign can still flip'."""
    from rag_experiments.evaluation.bounds import DeltaBounds

    text = DeltaBounds("recall_at_5", 0.0, 0.0, 0.0, unjudged=40, cases=20).text("B", "A")
    assert text == ("recall@5 Δ(B - A) +0.000, could be +0.000 to +0.000 with 40 passages unjudged: "
                    "no verdict on them can move it")
    assert DeltaBounds("recall_at_5", 0.0, -0.1, 0.1, unjudged=3, cases=2).text().endswith("the sign can still flip")
