"""The confident stopping rule of `golden label --decide` (rag_experiments.golden.decide_stop):

* its vectorised values equal evaluation.bounds.value on random case views, for every bounded metric
  (a draw's verdicts scored the way compare scores them);
* a cold start is uncertain: with nothing judged it does not settle a decision that the unjudged
  passages could flip, and it does settle once the labels show they are rarely relevant;
* the stop line names the rule and its probability.

Before this change there was no decide_stop module and no confident rule: every test here fails."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest

from rag_experiments.evaluation.bounds import CaseView, value, with_verdict
from rag_experiments.golden.decide import favoured_side, in_tail, run_loop, same_passage
from rag_experiments.golden.decide_stop import (
    DISPERSION_FLOOR,
    CaseTable,
    Judged,
    RelevanceModel,
    cell_of,
    confidence,
    learning_values,
    paired_t,
    side_sign,
)
from rag_experiments.golden.relevance_logit import FeatureModel
from rag_experiments.tracking.decide_tracker import PairTracker, SweepTracker, decide_state


def random_view(rng: random.Random, keys: list[str], depth: int) -> CaseView:
    slots = [rng.choice([0, 0, 1, 2, rng.choice(keys)]) for _ in range(depth)]
    seen = set()
    for i, s in enumerate(slots):  # a passage appears once in a list
        if isinstance(s, str):
            if s in seen:
                slots[i] = 0
            seen.add(s)
    grades = tuple(rng.choice([1, 2]) for _ in range(rng.randint(0, 3)))
    return CaseView(tuple(slots), grades)


@pytest.mark.parametrize("metric", ["recall", "mrr", "hit", "ndcg"])
def test_draws_score_as_bounds_value(metric):
    rng = random.Random(7)
    k = 10
    for trial in range(60):
        keys = [f"p{i}" for i in range(6)]
        a, b = random_view(rng, keys, k), random_view(rng, keys, k)
        b = CaseView(b.slots, a.grades)  # one case: one set of relevant units
        units = list(dict.fromkeys(s for s in (*a.slots, *b.slots) if isinstance(s, str)))
        if not units:
            continue
        table = CaseTable(metric, k, a, b, units, {u: i for i, u in enumerate(units)})
        grades = np.array([[rng.choice([0, 1, 2]) for _ in units] for _ in range(8)])
        got = table.deltas(grades)
        for row, d in zip(grades, got):
            va, vb = a, b
            for u, g in zip(units, row):
                va, vb = with_verdict(va, u, int(g)), with_verdict(vb, u, int(g))
            # with_verdict adds a relevant verdict's unit once per list: both lists carry it
            va = CaseView(va.slots, a.grades + tuple(int(g) for g in row if g > 0))
            vb = CaseView(vb.slots, va.grades)
            want = value(metric, k, va) - value(metric, k, vb)
            assert d == pytest.approx(want, abs=1e-12), (trial, metric, row)


def open_pair(n_win: int, n_open: int):
    """``n_win`` cases A wins (Δ +1 on recall@5); ``n_open`` cases where only B ranks an unjudged
    passage first (Δ 0 if it is not relevant, -0.5 if it is)."""
    a, b = {}, {}
    for i in range(n_win):
        a[f"w{i}"], b[f"w{i}"] = CaseView((2, 0, 0, 0, 0), (2,)), CaseView((0, 0, 0, 0, 0), (2,))
    for i in range(n_open):
        a[f"o{i}"], b[f"o{i}"] = CaseView((0, 0, 0, 0, 0), (2,)), CaseView((f"d{i}", 0, 0, 0, 0), (2,))
    return a, b


def test_cold_start_is_uncertain_and_labels_that_say_no_settle_it():
    a, b = open_pair(6, 30)  # A ahead now (Δ +0.167); 30 open passages at B's rank 1 could make it B
    st = decide_state("recall_at_5", a, b, str)
    assert not st.settling.certain and st.settling.confidence is not None
    assert not st.settling.settled and st.settling.confidence.probability < 0.95
    assert "not settled: P(" in st.settling.text()

    # the truth: none of them relevant; the confident rule stops well before the worst-case one
    def replay(stop):
        tracker = PairTracker("recall_at_5", a, b, str, stop=stop)
        lines: list[str] = []

        def label(c):
            tracker.apply(c.case_id, (c.key, *c.copies), 0)
            return 1
        return run_loop(tracker.state, label, budget=None, say=lines.append), lines

    confident, lines = replay("confident")
    certain, _ = replay("certain")
    assert confident.stopped == certain.stopped == "settled"
    assert confident.last.settling.declared == certain.last.settling.declared == "A"
    assert confident.labels < certain.labels
    assert lines[-1].startswith(f"stop: the decision is settled after {confident.labels} label(s) (rule confident: "
                                "A ahead with probability 0.9")


def test_labels_that_say_yes_keep_it_open():
    """The rate is learned from the labels: when the first labels all come back relevant, the rule
    must not declare A ahead, which the unjudged-as-miss reading shows (most remaining passages
    relevant give B the lead)."""
    a, b = open_pair(6, 30)
    judged = [Judged(None, 1, 2)] * 10
    st = decide_state("recall_at_5", a, b, str, judged=judged)
    assert st.settling.now.winner == "A"
    assert st.settling.declared != "A" and st.settling.confidence.winner == "B"


def test_model_cells_and_prior():
    assert cell_of(1, None) == 0 and cell_of(None, 1) == 1 and cell_of(1, 4) == 2 and cell_of(None, 7) == 10
    assert cell_of(12, 30) == 14
    cold = RelevanceModel([])
    assert np.allclose(cold.mean(), 0.5)
    warm = RelevanceModel([Judged(1, None, 0)] * 40 + [Judged(1, None, 2)] * 2)
    assert warm.mean()[0] < 0.1 and 0.05 < warm.mean()[9] < 0.15  # an unseen cell shrinks to the overall rate


def test_spread_order_puts_the_uncertain_side_first():
    """With B's own passages judged NO ten times and nothing known of A's, ``order_by="spread"`` offers
    A's passage first (its verdict is the uncertain one), although B's weighs as much; it is the
    confident rule's default, the certain rule's is the weight order."""
    a = {"d": CaseView(("pa", 0, 0, 0, 0), (2,)), "c": CaseView((0, 0, 0, 0, 0), (2,))}
    b = {"d": CaseView((0, 0, 0, 0, 0), (2,)), "c": CaseView(("pb", 0, 0, 0, 0), (2,))}
    judged = [Judged(None, 1, 0)] * 10
    by_weight = decide_state("mrr_at_10", a, b, str, judged=judged, order_by="weight")
    by_spread = decide_state("mrr_at_10", a, b, str, judged=judged, order_by="spread")
    assert by_weight.candidates[0].weight == by_weight.candidates[1].weight
    assert [c.key for c in by_spread.candidates] == ["pa", "pb"]
    assert [c.key for c in by_weight.candidates] == ["pb", "pa"]  # equal weights: case c before d
    assert [c.key for c in decide_state("mrr_at_10", a, b, str, judged=judged).candidates] == ["pa", "pb"]
    assert [c.key for c in decide_state("mrr_at_10", a, b, str, judged=judged, stop="certain").candidates] == ["pb", "pa"]


def test_judged_in_pool_reads_the_verdicts_given_since_the_start():
    """The CLI learns the rates from the golden file: a passage unjudged in the start views (no
    judgement) and judged now is a judged pool passage, with where each run ranks it and its grade."""
    from rag_experiments.tracking.decide_tracker import judged_in_pool

    start_a = {"c": CaseView(("p1", "p2", 0), (2,))}
    start_b = {"c": CaseView(("p2", 0, "p3"), (2,))}
    now_a = {"c": CaseView((0, 2, 0), (2, 2))}  # p1 judged NO, p2 YES
    now_b = {"c": CaseView((2, 0, "p3"), (2, 2))}  # p3 still unjudged
    judged, known = judged_in_pool(start_a, start_b, now_a, now_b, 3, lambda key: f"text of {key}")
    assert judged == [Judged(1, None, 0, "c"), Judged(2, 1, 2, "c")]
    assert known == {("c", "text of p1"): 0, ("c", "text of p2"): 2}


def clustered_pool(n_win: int, n_open: int, n_zero: int):
    """``n_win`` cases A wins (Δ +1 on recall@5), ``n_open`` cases where only B ranks an unjudged passage
    first (Δ -0.5 if it is relevant), ``n_zero`` cases alike in both (Δ 0)."""
    a, b = open_pair(n_win, n_open)
    for i in range(n_zero):
        a[f"z{i}"] = b[f"z{i}"] = CaseView((2, 0, 0, 0, 0), (2,))
    return a, b


def test_relevance_that_clusters_by_question_keeps_it_open():
    """Relevance clusters by question: every judged passage of the open questions was relevant, every
    one of 60 other questions was not. An independent draw per passage reads the overall rate (about
    0.2) and declared "A ahead" with P 0.994 (settled even at 0.99); if the open passages are
    relevant, as their questions' labels say, the truth is a tie (Δ +0.073, p about 0.4). The
    per-question factor keeps the decision open."""
    a, b = clustered_pool(9, 12, 20)
    judged = [Judged(None, 1, 2, f"o{i}") for i in range(12) for _ in range(4)]
    judged += [Judged(None, 1, 0, f"x{j}") for j in range(60) for _ in range(4)]
    st = decide_state("recall_at_5", a, b, str, judged=judged)
    assert st.settling.now.winner == "A" and not st.settling.certain
    assert st.settling.confidence.probability < 0.9 and not st.settling.settled
    truth = decide_state("recall_at_5", *[{c: with_verdict(v, f"d{c[1:]}", 2) if c.startswith("o") else v
                                          for c, v in side.items()} for side in (a, b)], str)
    assert truth.settling.now.winner == "tie"


def test_dispersion_is_measured_from_the_questions():
    """Labels spread evenly over questions leave the factor at its floor; clustered ones raise it."""
    even = [Judged(None, 1, g, f"q{i}") for i in range(40) for g in (2, 0, 0, 0)]
    clustered = [Judged(None, 1, 2 if i < 10 else 0, f"q{i}") for i in range(40) for _ in range(4)]
    assert RelevanceModel(even).dispersion() == DISPERSION_FLOOR
    assert RelevanceModel(clustered).dispersion() > 2


def test_the_pools_last_tenth_is_labelled_not_modelled():
    """At the end of a pool the confident rule does not settle: its decision would rest on a few
    passages' modelled rates (the git-doc pair's random order 2 declared "hybrid ahead" with P 0.996
    after 149 of 160 labels, the full pool a tie at p=0.058). 30 open passages after 300 judged NO:
    the draws say A ahead with P ~1, but 30 of 330 is the pool's last 10%."""
    assert in_tail(16, 144) and not in_tail(17, 143) and not in_tail(0, 100)  # 10% of 160 = 16
    a, b = open_pair(6, 30)
    judged = [Judged(None, 1, 0)] * 300
    st = decide_state("recall_at_5", a, b, str, judged=judged)
    assert st.settling.confidence.winner == "A" and st.settling.confidence.settled  # the model alone would stop
    assert st.settling.tail == 30 and not st.settling.settled
    assert "only 30 passage(s) are left, the pool's last 10%: they are labelled, not modelled" in st.settling.text()
    # with 200 judged the 30 are 13% of the pool: the model settles it
    st = decide_state("recall_at_5", a, b, str, judged=[Judged(None, 1, 0)] * 200)
    assert st.settling.tail == 0 and st.settling.settled and st.settling.declared == "A"


def test_near_duplicates_are_one_unit_as_the_loop_offers_them():
    """The loop offers a case's near-duplicate passages once and applies the verdict to all of them
    (decide.one_per_text); the rule's draws must give them one verdict too, not one each."""
    words = "the planner estimates the cost of each path and keeps the cheapest one for the query".split()
    body = " ".join(words * 4)
    texts = {"d": body + " today", "e": body + " now"}
    assert same_passage(texts["d"], texts["e"]) and texts["d"] != texts["e"]
    a = {"c": CaseView(("d", 0, 0, 0, 0), (2,))}
    b = {"c": CaseView(("e", 0, 0, 0, 0), (2,))}
    tracker = PairTracker("recall_at_5", a, b, texts.get)
    table, cells, units, _ = tracker.cases["c"][5]
    assert len(units) == len(cells) == 1 and cells == [cell_of(1, 1)]
    (offer,) = tracker.state().candidates
    tracker.apply("c", (offer.key, *offer.copies), 0)
    assert tracker.cases["c"][5] is None and set(tracker.known.values()) == {0} and len(tracker.known) == 2


def test_the_drawn_t_is_the_paired_t_statistic_by_hand():
    """paired_t by hand: differences 1, 2, 3 have mean 2, sd 1, so t = 2 / (1 / sqrt 3) = 3.4641; all 0 is
    nan (no direction), a constant non-zero row inf. confidence() reports the drawn t's mean and sd: with
    every case fixed (no unjudged passage) every draw is the same, so the sd is 0 and the mean that t."""
    t = paired_t(np.array([[1.0, 2.0, 3.0], [-1.0, -2.0, -3.0], [0.0, 0.0, 0.0], [0.5, 0.5, 0.5]]))
    assert t[0] == pytest.approx(3.4641016, abs=1e-6)
    assert t[1] == pytest.approx(-3.4641016, abs=1e-6)
    assert np.isnan(t[2]) and np.isinf(t[3])
    c = confidence([1.0, 2.0, 3.0], [(), (), ()], [(), (), ()], RelevanceModel([]), alpha=0.05, draws=20)
    assert c.t_mean == pytest.approx(3.4641016, abs=1e-6) and c.t_sd == pytest.approx(0.0)
    assert (c.winner, c.probability) == ("tie", 1.0)  # t 3.46 on 2 degrees of freedom: p = 0.074


def test_learning_values_by_hand():
    """Cold cell model: every cell's rate Beta(2, 2) (mean 0.5, q = 0.25), its log-odds' variance
    v = 2 trigamma(2) = 2 (pi^2 / 6 - 1) = 1.289868; one label takes it to 1 / (1 / v + q) = 0.975350,
    so a label teaches 0.314518. Cell 0 (only A, rank 1) holds weights 0.1, 0.1, 0.2: it carries
    G = 0.25 x 0.4 = 0.1 of Δ per unit of log-odds; cell 1 (only B) one of 0.3: G = -0.075.
    Values sqrt(w^2 q + G^2 x 0.314518): 0.075134, 0.075134, 0.114652, 0.155786."""
    model = RelevanceModel([])
    assert np.allclose(model.cell_variance(), 2 * (np.pi**2 / 6 - 1))
    got = learning_values(model, [0, 0, 0, 1], [()] * 4, [0.1, 0.1, 0.2, 0.3], [1, 1, 1, -1])
    assert np.allclose(got, [0.075134, 0.075134, 0.114652, 0.155786], atol=1e-6)
    # the signs of one cell cancel: A's and B's passages at equal weight carry nothing about the cell
    assert np.allclose(learning_values(model, [2, 2], [(), ()], [0.1, 0.1], [1, -1]), [0.05, 0.05])
    assert side_sign(1, None) == 1 and side_sign(None, 3) == -1 and side_sign(4, 2) == -1 and side_sign(2, 2) == 0
    assert learning_values(model, [], [], [], []).shape == (0,)


def test_learning_order_labels_a_big_unjudged_cell_before_a_heavier_known_passage():
    """200 labels in cell 1 (only B, rank 1), half relevant: its rate is known (log-odds variance
    ~0.02). Cell 9 (only A, ranks 6-10) has none and 50 unjudged passages of weight 0.01. The spread
    order (its own verdict alone) offers the cell-1 passage of weight 0.05 first (0.025 against 0.005);
    the learning order offers a cell-9 passage first: its verdict teaches the rate of 50 passages
    (0.0703 against 0.0250)."""
    model = RelevanceModel([Judged(None, 1, g) for g in (0, 2) for _ in range(100)])
    cells, weights, signs = [1] + [9] * 50, [0.05] + [0.01] * 50, [-1] + [1] * 50
    p = model.means(cells, [()] * 51)
    spread = np.array(weights) * np.sqrt(p * (1 - p))
    assert spread[0] > spread[1:].max()
    learn = learning_values(model, cells, [()] * 51, weights, signs)
    assert learn[1:].min() > learn[0]
    assert learn[0] == pytest.approx(0.0250, abs=1e-4) and learn[1] == pytest.approx(0.0703, abs=1e-3)


def test_learning_sampled_gives_a_cells_teaching_to_one_random_passage_not_the_heaviest():
    """The same two cells with cell 9's weights rising (0.01 ... 0.0149): the learning order gives what
    a cell-9 label teaches to every cell-9 passage, so the heaviest comes first; the sampled form gives
    it to one passage of the cell drawn at random: the others keep their own verdict's part (the spread
    value), the draw is the same for the same seed and number of labels, and another number of labels
    draws another passage (over 20 draws, at least 5 different ones: not always the heaviest)."""
    model = RelevanceModel([Judged(None, 1, g) for g in (0, 2) for _ in range(100)])
    cells, weights, signs = [1] + [9] * 50, [0.05] + [0.01 + 0.0001 * i for i in range(50)], [-1] + [1] * 50
    p = model.means(cells, [()] * 51)
    spread = np.array(weights) * np.sqrt(p * (1 - p))
    learn = learning_values(model, cells, [()] * 51, weights, signs)
    assert int(np.argmax(learn)) == 50
    sampled = learning_values(model, cells, [()] * 51, weights, signs, sample_seed=57)
    assert sampled[0] == pytest.approx(learn[0])  # the only passage of its cell is its cell's draw
    taught = np.flatnonzero(~np.isclose(sampled[1:], spread[1:])) + 1
    assert len(taught) == 1
    assert sampled[taught[0]] == pytest.approx(learn[taught[0]]) and sampled.argmax() == taught[0]
    assert np.array_equal(sampled, learning_values(model, cells, [()] * 51, weights, signs, sample_seed=57))
    picks = set()
    for n in range(20):
        grown = RelevanceModel([Judged(None, 1, g) for g in (0, 2) for _ in range(100)] + [Judged(None, 1, 0)] * n)
        picks.add(int(np.argmax(learning_values(grown, cells, [()] * 51, weights, signs, sample_seed=57))))
    assert len(picks) >= 5 and picks <= set(range(1, 51))


def test_feature_model_cell_variance_falls_with_the_cells_labels():
    """The feature model's cell uncertainty is its intercept's posterior variance: labels in a cell
    shrink it, a cell without labels keeps about its prior (CELL_SD^2 plus the shared mean's)."""
    few = FeatureModel([Judged(1, None, g, "q", (0.5,)) for g in (0, 2) for _ in range(2)], 1)
    many = FeatureModel([Judged(1, None, g, "q", (0.5,)) for g in (0, 2) for _ in range(50)], 1)
    assert many.cell_variance()[0] < few.cell_variance()[0] / 5
    assert many.cell_variance()[9] > 2.0 and few.cell_variance()[9] > 2.0


def test_the_orders_by_rule_and_an_unknown_order_refused():
    """The confident rule's default order is learn-sampled, the certain rule's the weight; spread (the
    default before) and learn are there to be measured (tools/label_replay.py --order-by). Spread offers
    the heavier known passage first; learn and learn-sampled a passage of the big unjudged cell, and
    learn-sampled only one of them (drawn), then spread's; an unknown order is refused by name."""
    a, b = open_pair(3, 4)
    assert PairTracker("recall_at_5", a, b, str).order_by == "learn-sampled"
    assert PairTracker("recall_at_5", a, b, str, stop="certain").order_by == "weight"
    with pytest.raises(ValueError, match="order 'random': one of spread, weight, learn, learn-sampled"):
        PairTracker("recall_at_5", a, b, str, order_by="random")
    # 50 questions where only A ranks an unjudged passage at rank 7 (a cell never judged), 50 where only
    # B ranks one first (a cell judged 200 times, half relevant): the same weights, the same rate at the mode
    a = {f"q{i}": CaseView((0,) * 6 + (f"a{i}", 0, 0, 0), (2,)) for i in range(50)}
    b = {f"q{i}": CaseView((0,) * 10, (2,)) for i in range(50)}
    for i in range(50):
        a[f"d{i}"], b[f"d{i}"] = CaseView((0,) * 10, (2,)), CaseView((f"b{i}",) + (0,) * 9, (2,))
    judged = [Judged(None, 1, g) for g in (0, 2) for _ in range(100)]
    spread = decide_state("recall_at_10", a, b, str, judged=judged, order_by="spread")
    assert spread.candidates[0].key.startswith("b")  # the better rank breaks the tie
    learn = decide_state("recall_at_10", a, b, str, judged=judged, order_by="learn")
    assert learn.candidates[0].key.startswith("a")
    sampled = decide_state("recall_at_10", a, b, str, judged=judged)  # the default
    assert sampled.candidates[0].key.startswith("a") and sampled.candidates[1].key.startswith("b")
    # the export's why column says which cell the passage was drawn from; the others say nothing of it
    assert sampled.candidates[0].learns == 9 and sampled.candidates[0].why("A", "B", "recall@10").endswith(
        "; drawn at random from the passages only A ranks, at ranks 6-10, to learn how often they are relevant")
    assert all(c.learns is None for c in sampled.candidates[1:]) and all(c.learns is None for c in spread.candidates)
    # a sweep offers by weight across its pairs, so no row claims it was drawn to learn a cell
    sweep = SweepTracker({("A", "B"): PairTracker("recall_at_10", a, b, str, judged=judged)}).state()
    assert len(sweep.candidates) == 100 and all(c.learns is None for c in sweep.candidates)


def test_on_mrr_the_confident_rule_offers_by_value_not_the_open_ends_side():
    """A ahead now and at the high end; only "every unjudged passage of B's relevant" makes it a tie, so
    the certain rule offers B's passages first (each NO closes that end), and so does the confident rule
    on recall, where the passages only B ranks are the ones whose YES counts for B. On MRR the confident
    rule offers by its value alone: B's cell (only B, rank 1) is judged NO 30 times and A's same-weight
    cell never, so A's passages, whose verdicts are the uncertain ones, come first. On MRR a passage both
    rank counts for the run that ranks it higher, and B's own passages first left those cells unlearnt
    (the demo's MRR@10 vector vs hybrid: 300 labels, all on passages only vector ranks, 858 to settle
    against 61 by value; docs/how-to/golden-growth.md, "One side first")."""
    zero = (0,) * 10
    a, b = {}, {}
    for i in range(4):
        a[f"w{i}"], b[f"w{i}"] = CaseView((2,) + zero[1:], (2,)), CaseView(zero, (2,))
    for i in range(10):
        a[f"o{i}"], b[f"o{i}"] = CaseView(zero, (2,)), CaseView((f"d{i}",) + zero[1:], (2,))
        a[f"a{i}"], b[f"a{i}"] = CaseView((f"pa{i}",) + zero[1:], (2,)), CaseView(zero, (2,))
    judged = [Judged(None, 1, 0)] * 30
    for metric in ("mrr_at_10", "recall_at_10"):
        certain = decide_state(metric, a, b, str, judged=judged, stop="certain")
        s = certain.settling
        assert (s.now.winner, s.low.winner, s.high.winner) == ("A", "tie", "A")
        assert {c.key[0] for c in certain.candidates[:10]} == {"d"}
        confident = decide_state(metric, a, b, str, judged=judged)
        assert not confident.settling.settled and favoured_side(confident.settling) == "B"
        first = {c.key[0] for c in confident.candidates[:10]}
        assert first == ({"p"} if metric == "mrr_at_10" else {"d"}), metric


def test_the_replays_known_rates_rule_learns_nothing_from_labels():
    """tools/label_replay.py --model known: the model is fitted once on every pool passage with the
    truth's verdict (here: A's passages at rank 7 all relevant, B's at rank 1 none) and labels do not
    change it; no per-question factor."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    from label_replay import KnownRates

    a = {f"q{i}": CaseView((0,) * 6 + (f"a{i}", 0, 0, 0), (2,)) for i in range(30)}
    b = {f"q{i}": CaseView((f"b{i}",) + (0,) * 9, (2,)) for i in range(30)}
    tracker = KnownRates("recall_at_10", a, b, str, queries={f"q{i}": "q" for i in range(30)})
    tracker.know({(f"q{i}", f"a{i}"): 2 for i in range(30)})
    known = tracker.model()
    rate_a, rate_b = known.means([cell_of(7, None), cell_of(None, 1)], [tracker._features(c) for c in
                                                                          tracker.cases["q0"][4][:2]])
    assert rate_a > 0.8 and rate_b < 0.2 and known.dispersion() == 0.0
    tracker.apply("q0", ["b0"], 0)
    assert tracker.model() is known and len(tracker.judged) == 1


def test_on_mrr_shared_passages_get_a_rate_by_which_run_ranks_them_higher():
    """A passage both runs rank, at different ranks, has a cell by which run ranks it higher when the
    metric reads ranks (MRR); at the same rank, and on recall, it stays in the one "both" cell. Judged:
    20 passages A ranks 1st and B 2nd, all relevant, and 20 that B ranks 1st and A 2nd, none. One rate
    for both (the cells before) draws them alike, 20 of 40 (shrunk to the overall rate); split, A's
    are likely and B's are not, which is what makes A the better run on MRR."""
    from rag_experiments.golden.decide_stop import CELLS, cell_text

    assert cell_of(1, 4, by_rank=True) == CELLS and cell_of(4, 1, by_rank=True) == CELLS + 1
    assert cell_of(3, 2, by_rank=True) == CELLS + 2 * 1 + 1 and cell_of(2, 2, by_rank=True) == cell_of(2, 2) == 5
    assert cell_of(1, 4) == cell_of(4, 1) == 2 and cell_of(1, None, by_rank=True) == 0
    assert cell_text(CELLS + 3, "hybrid", "keyword") == "the passages both rank, keyword higher, at ranks 2-3"
    judged = [Judged(1, 2, 2, f"a{i}") for i in range(20)] + [Judged(2, 1, 0, f"b{i}") for i in range(20)]
    a_higher, b_higher = cell_of(1, 2, by_rank=True), cell_of(2, 1, by_rank=True)
    split = RelevanceModel(judged, by_rank=True).mean()
    assert split[a_higher] > 0.8 and split[b_higher] < 0.2
    one = RelevanceModel(judged).mean()
    assert 0.4 < one[cell_of(1, 2)] < 0.6
    a = {"c": CaseView(("x", "y", 0), (2,))}
    b = {"c": CaseView(("y", "x", 0), (2,))}
    assert PairTracker("mrr_at_10", a, b, str).by_rank and not PairTracker("recall_at_10", a, b, str).by_rank
    assert PairTracker("mrr_at_10", a, b, str, judged=judged).model().n_cells == len(split)


def test_mrr_effects_are_the_expected_change_of_the_cases_delta():
    """Reciprocal rank reads a list's first relevant passage: a YES counts only as often as nothing above
    it is relevant, and it hides everything below. Hand-worked (k 3): A ranks x 1st, a NO 2nd, y 3rd; B
    ranks z 1st, y 2nd; rates x 0.5, y 0.2, z 0.4. x: A's expected RR 1 with x YES, 0.2/3 with x NO:
    +0.9333. y: A 0.5 + 0.5/3 against 0.5 (+0.1667), B 0.4 + 0.6/2 against 0.4 (+0.3): -0.1333. z: B 1
    against 0.2/2: -0.9. A passage both rank first, with a judged YES at A's rank 3, sets Δ to 0 when
    YES and leaves 1/3 when NO: -1/3, though its ranks alone give it no weight. A copy shares the
    verdict: x at rank 1 and its copy at rank 2, B empty: +1."""
    from rag_experiments.golden.decide import Candidate
    from rag_experiments.tracking.decide_tracker import mrr_effects

    cands = [Candidate("q", "x", 1.0, 1, None), Candidate("q", "y", 1.0, 3, 2), Candidate("q", "z", 1.0, None, 1),
             Candidate("r", "w", 0.0, 1, 1), Candidate("s", "v", 1.0, 1, None, copies=("v2",))]
    a = {"q": CaseView(("x", 0, "y"), (2,)), "r": CaseView(("w", 0, 2), (2,)), "s": CaseView(("v", "v2", 0), (2,))}
    b = {"q": CaseView(("z", "y", 0), (2,)), "r": CaseView(("w", 0, 0), (2,)), "s": CaseView((0, 0, 0), (2,))}
    effects = mrr_effects(cands, np.array([0.5, 0.2, 0.4, 0.3, 0.1]), a, b, 3)
    assert effects == pytest.approx([1 - 0.2 / 3, 1 / 6 - 0.3, -0.9, -1 / 3, 1.0])
    # in the order: a passage at rank 6 under five unjudged ones goes after one alone at rank 6, although
    # both weigh the same by their ranks (without the expectation, the tie put it first)
    a = {"c": CaseView(("u1", "u2", "u3", "u4", "u5", "pa", 0, 0, 0, 0), (2,)), "d": CaseView((0,) * 10, (2,))}
    b = {"c": CaseView((0,) * 10, (2,)), "d": CaseView((0,) * 5 + ("pb",) + (0,) * 4, (2,))}
    state = decide_state("mrr_at_10", a, b, str, order_by="spread")
    keys = [c.key for c in state.candidates]
    weight = {c.key: c.weight for c in state.candidates}
    assert weight["pa"] == weight["pb"] and keys.index("pb") < keys.index("pa")
