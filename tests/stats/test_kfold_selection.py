"""The k-fold estimate of a sweep's selection procedure (stats.kfold_selection): hand-worked values and
a null simulation where the truth is known."""

from __future__ import annotations

import numpy as np
import pytest

from rag_experiments.stats.bootstrap import bootstrap_interval
from rag_experiments.stats.kfold_selection import first_best, out_of_fold_selection, stratified_folds

# 6 cases x 3 points (A, B, C), folds [0, 0, 1, 1, 2, 2]:
#   case  A  B  C  fold
#     0   1  0  1   0
#     1   1  1  0   0
#     2   0  1  1   1
#     3   1  1  0   1
#     4   0  0  1   2
#     5   0  1  1   2
VALUES = np.array([[1, 0, 1], [1, 1, 0], [0, 1, 1], [1, 1, 0], [0, 0, 1], [0, 1, 1]], dtype=float)
FOLDS = [0, 0, 1, 1, 2, 2]


def test_hand_worked_three_points_six_cases():
    # all cases: A 3/6, B 4/6, C 4/6 -> B and C tie, the first (B) wins: in-sample best 4/6.
    # fold 0 out (train cases 2-5): A 1/4, B 3/4, C 3/4 -> B; B on cases 0, 1: 0, 1
    # fold 1 out (train 0, 1, 4, 5): A 2/4, B 2/4, C 3/4 -> C; C on cases 2, 3: 1, 0
    # fold 2 out (train 0-3): A 3/4, B 3/4, C 2/4 -> A (tie with B: the first); A on cases 4, 5: 0, 0
    # out of fold: [0, 1, 1, 0, 0, 0] -> 2/6; optimism 4/6 - 2/6 = 1/3; each point chosen once
    r = out_of_fold_selection(VALUES, FOLDS)
    assert r.chosen == (1, 2, 0)
    assert r.in_sample_choice == 1 and r.in_sample_best == pytest.approx(4 / 6)
    assert r.out_of_fold == pytest.approx(2 / 6)
    assert r.optimism == pytest.approx(1 / 3)
    assert r.stability() == [(0, 1), (1, 1), (2, 1)]
    assert (r.k, r.n_cases, r.points) == (3, 6, 3)
    assert r.interval == bootstrap_interval(np.array([0, 1, 1, 0, 0, 0], dtype=float), 1000, 13)


def test_hand_worked_minimised_and_the_callers_tie_rule():
    # minimised: all cases A 3/6 is lowest -> A, 0.5.
    # fold 0 out: A 1/4 lowest -> A on cases 0, 1: 1, 1
    # fold 1 out: A 2/4, B 2/4 tie -> A on cases 2, 3: 0, 1
    # fold 2 out: C 2/4 lowest -> C on cases 4, 5: 1, 1
    # out of fold [1, 1, 0, 1, 1, 1] -> 5/6; optimism (lower is better) 5/6 - 3/6 = 1/3
    r = out_of_fold_selection(VALUES, FOLDS, maximize=False)
    assert r.chosen == (0, 0, 2) and r.in_sample_choice == 0
    assert r.out_of_fold == pytest.approx(5 / 6) and r.in_sample_best == pytest.approx(0.5)
    assert r.optimism == pytest.approx(1 / 3)
    assert r.stability() == [(0, 2), (2, 1)]
    # a tie rule that prefers the last point: fold 0 (B, C tie) -> C on cases 0, 1: 1, 0; fold 1 -> C: 1, 0;
    # fold 2 (A, B tie) -> B on cases 4, 5: 0, 1; all cases (B, C tie) -> C. Out of fold 3/6.
    def last(means):
        return int(np.flatnonzero(means == means.max())[-1])
    r = out_of_fold_selection(VALUES, FOLDS, choose=last)
    assert r.chosen == (2, 2, 1) and r.in_sample_choice == 2
    assert r.out_of_fold == pytest.approx(0.5) and r.stability() == [(2, 2), (1, 1)]


def test_stratified_folds_by_hand():
    # sorted by (stratum, order): a/0.1 (case 1), a/0.2 (case 2), a/0.3 (case 0), b/0.5 (case 4), b/0.9 (case 3),
    # dealt 0, 1, 0, 1, 0 -> case 0: 0, 1: 0, 2: 1, 3: 0, 4: 1
    folds = stratified_folds(["a", "a", "a", "b", "b"], [0.3, 0.1, 0.2, 0.9, 0.5], 2)
    assert folds.tolist() == [0, 0, 1, 0, 1]
    # 11 cases, 3 folds: sizes 4, 4, 3 and each stratum spread evenly
    strata = ["x"] * 6 + ["y"] * 5
    folds = stratified_folds(strata, np.linspace(0, 1, 11)[::-1], 3)
    assert np.bincount(folds).tolist() == [4, 4, 3]
    assert sorted(np.bincount(folds[:6]).tolist()) == [2, 2, 2]
    with pytest.raises(ValueError, match="at least 2 folds"):
        stratified_folds(["a"] * 4, [0.1, 0.2, 0.3, 0.4], 1)


def test_a_fold_with_fewer_than_two_cases_is_refused():
    with pytest.raises(ValueError, match=r"fold sizes \[2, 2, 1\]"):
        out_of_fold_selection(VALUES[:5], FOLDS[:5])
    with pytest.raises(ValueError, match="finite"):
        out_of_fold_selection(np.where(VALUES == 1, np.nan, VALUES), FOLDS)
    assert first_best()(np.array([0.2, 0.5, 0.5])) == 1 and first_best(False)(np.array([0.2, 0.1, 0.1])) == 1


def test_null_out_of_fold_is_unbiased_and_the_in_sample_best_is_not():
    """20 points that are all Bernoulli(0.5) on 60 cases (no point better than another; truth 0.5), 200
    sweeps: the out-of-fold mean stays at the truth (its standard error over 200 sweeps is ~0.005), the
    in-sample best is above it by about the expected max of 20 means (~ +0.12)."""
    rng = np.random.default_rng(7)
    folds = stratified_folds(["s"] * 60, rng.random(60), 5)
    oof, best = [], []
    for _ in range(200):
        values = (rng.random((60, 20)) < 0.5).astype(float)
        r = out_of_fold_selection(values, folds, samples=0)
        oof.append(r.out_of_fold)
        best.append(r.in_sample_best)
    assert abs(np.mean(oof) - 0.5) < 0.015, np.mean(oof)
    assert np.mean(best) - 0.5 > 0.08, np.mean(best)


def test_two_folds_and_one_point_by_hand():
    # folds [0, 0, 0, 1, 1, 1]. Fold 0 out (train 3-5): A 1/3, B 2/3, C 2/3 -> B; B on cases 0-2: 0, 1, 1.
    # Fold 1 out (train 0-2): A, B, C all 2/3 -> A; A on cases 3-5: 1, 0, 0. Out of fold 3/6;
    # in-sample B 4/6: optimism 1/6
    r = out_of_fold_selection(VALUES, [0, 0, 0, 1, 1, 1])
    assert r.chosen == (1, 0) and r.k == 2
    assert r.out_of_fold == pytest.approx(0.5) and r.optimism == pytest.approx(1 / 6)
    # one point (a sweep of one): nothing is chosen, so nothing is flattered: out of fold = in sample = 3/6
    one = out_of_fold_selection(VALUES[:, :1], FOLDS)
    assert one.chosen == (0, 0, 0) and one.out_of_fold == one.in_sample_best == pytest.approx(0.5)
    assert one.optimism == 0.0


def test_shapes_and_folds_that_cannot_work_are_refused():
    with pytest.raises(ValueError, match="cases x points"):
        out_of_fold_selection(VALUES[:, 0], FOLDS)  # one value per case, no points axis
    with pytest.raises(ValueError, match="cases x points"):
        out_of_fold_selection(VALUES, FOLDS[:5])  # a case without a fold
    with pytest.raises(ValueError, match="cases x points"):
        out_of_fold_selection(np.empty((6, 0)), FOLDS)  # no point
    with pytest.raises(ValueError, match="at least 2 folds"):
        out_of_fold_selection(VALUES, [0] * 6)  # one fold: nothing left to choose on
