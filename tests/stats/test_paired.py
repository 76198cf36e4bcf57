"""Paired tests: hand-worked values, known answers, reproducibility, agreement with ranx."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from rag_experiments.stats.paired import (
    WinTieLoss,
    holm,
    paired_bootstrap_delta_ci,
    paired_permutation_test,
    win_tie_loss,
)


# -- permutation test: exact enumeration, hand-worked ---------------------------------------------
@pytest.mark.parametrize("d, expected", [
    # 2**3 sign vectors; only all-plus and all-minus reach |sum| = 3
    ([1, 1, 1], 2 / 8),
    # sums 3, 1, -1, -3: |sum| >= 3 twice out of 4
    ([1, 2], 2 / 4),
    # zero differences cannot change the statistic and are left out: same as [1, 1, 1]
    ([1, 1, 1, 0, 0], 2 / 8),
    # sums of +-3 +-1 +-1: |5| x2, |3| x4, |1| x2; observed |3 - 1 + 1| = 3 -> 6 of 8
    ([3, -1, 1], 6 / 8),
    # a single non-zero difference: both signs give the same |sum|
    ([0, 0, 0.5], 1.0),
])
def test_exact_p_values_hand_worked(d, expected):
    a = np.zeros(len(d))
    assert paired_permutation_test(a, np.asarray(d, float)) == pytest.approx(expected, abs=1e-15)


def test_identical_runs_give_p_one_on_both_paths():
    a = np.random.default_rng(3).random(200)
    assert paired_permutation_test(a, a.copy()) == 1.0
    assert paired_permutation_test(a, a.copy(), exact_max=0) == 1.0


def test_clearly_better_run_is_significant():
    rng = np.random.default_rng(5)
    a = rng.random(40) * 0.5
    b = a + 0.3 + rng.normal(0, 0.05, 40)
    assert paired_permutation_test(a, b) < 0.01  # Monte Carlo path (40 > EXACT_MAX)
    # exact path: 12 wins out of 12 -> p = 2 / 2**12
    assert paired_permutation_test(np.zeros(12), np.ones(12)) == pytest.approx(2 / 4096)


def test_monte_carlo_path_is_two_sided_against_the_exact_sign_test():
    """30 differences of ±1 (22 wins, 8 losses: more than EXACT_MAX, so sign flips are drawn). For ±1 the
    randomization test is the sign test: p = P(|2W - 30| >= 14), W ~ Binomial(30, 1/2) = 0.016125
    (scipy.stats.binomtest(22, 30), two-sided). A one-sided count would give half that. 50,000 draws:
    Monte Carlo standard error 0.00056; 0.003 is over 5 of them. Swapping the runs gives the same p."""
    from scipy.stats import binomtest

    d = np.array([1.0] * 22 + [-1.0] * 8)
    exact = binomtest(22, 30, 0.5).pvalue
    assert exact == pytest.approx(0.016125, abs=1e-6)
    for a, b in ((np.zeros(30), d), (d, np.zeros(30))):
        assert paired_permutation_test(a, b, n_resamples=50_000, seed=3, exact_max=0) == pytest.approx(exact, abs=0.003)
    # the exact path too (all 2^30 sign vectors, met in the middle)
    assert paired_permutation_test(np.zeros(30), d, exact_max=30) == pytest.approx(exact, abs=1e-12)


def test_monte_carlo_agrees_with_exact_enumeration():
    rng = np.random.default_rng(11)
    a = rng.random(16)
    b = a + rng.normal(0.08, 0.2, 16)
    exact = paired_permutation_test(a, b)
    mc = paired_permutation_test(a, b, n_resamples=200_000, seed=1, exact_max=0)
    # SE of a Monte Carlo p with 200k draws is <= 0.0011; 0.006 is > 5 SE
    assert abs(exact - mc) < 0.006


def test_reproducible_with_a_seed_and_never_zero():
    rng = np.random.default_rng(2)
    a, b = rng.random(80), rng.random(80) + 0.05
    p1 = paired_permutation_test(a, b, n_resamples=5000, seed=21)
    assert p1 == paired_permutation_test(a, b, n_resamples=5000, seed=21)
    assert p1 != paired_permutation_test(a, b, n_resamples=5000, seed=22)
    far = paired_permutation_test(np.zeros(100), np.ones(100), n_resamples=999)
    assert far == pytest.approx(1 / 1000)  # (0 + 1) / (999 + 1): a valid p-value, never 0


def test_input_validation():
    with pytest.raises(ValueError, match="length"):
        paired_permutation_test([1, 2], [1])
    with pytest.raises(ValueError, match="finite"):
        paired_permutation_test([1, np.nan], [1, 2])
    with pytest.raises(ValueError, match="no cases"):
        paired_permutation_test([], [])
    with pytest.raises(ValueError, match="n_resamples must be > 0"):  # the sampled path only (m > exact_max)
        paired_permutation_test(np.zeros(30), np.ones(30), n_resamples=0)


# -- paired bootstrap interval of the delta -------------------------------------------------------
def test_delta_interval_identical_runs_is_zero():
    a = np.random.default_rng(4).random(50)
    assert paired_bootstrap_delta_ci(a, a.copy()) == (0.0, 0.0)


def test_delta_interval_is_around_zero_for_noise_and_excludes_it_for_a_real_gain():
    rng = np.random.default_rng(6)
    a = rng.random(200)
    noise = a + rng.normal(0, 0.1, 200)
    lo, hi = paired_bootstrap_delta_ci(a, noise, samples=2000, seed=1)
    assert lo < 0 < hi and hi - lo < 0.05
    lo, hi = paired_bootstrap_delta_ci(a, a + 0.2 + rng.normal(0, 0.1, 200), samples=2000, seed=1)
    assert 0.17 < lo < 0.2 < hi < 0.23


def test_delta_interval_is_paired_and_agrees_with_scipys_paired_bootstrap():
    """The interval of mean(b) - mean(a) resamples cases (pairs). b = a + noise 0.05 with a spread 0.3:
    the paired interval is about ±1.96 x 0.05 / sqrt(100) = ±0.01 wide, where resampling a and b apart
    would give about ±1.96 x 0.3 sqrt(2) / 10 = ±0.083. scipy.stats.bootstrap(paired=True,
    method="percentile") is the independent implementation (its own draws: equal within Monte Carlo error)."""
    from scipy.stats import bootstrap

    rng = np.random.default_rng(8)
    a = rng.normal(0.5, 0.3, 100)
    b = a + 0.02 + rng.normal(0, 0.05, 100)
    lo, hi = paired_bootstrap_delta_ci(a, b, samples=20_000, seed=3)
    theirs = bootstrap((a, b), lambda x, y, axis=-1: np.mean(y, axis=axis) - np.mean(x, axis=axis), paired=True,
                       vectorized=True, n_resamples=20_000, method="percentile",
                       random_state=np.random.default_rng(4)).confidence_interval
    assert (lo, hi) == pytest.approx((theirs.low, theirs.high), abs=0.002)
    assert 0.007 < (hi - lo) / 2 < 0.013  # paired: ~0.0098 (not the ~0.083 of unpaired resampling)
    assert lo < (b - a).mean() < hi
    assert paired_bootstrap_delta_ci(a, b, samples=20_000, seed=3, level=0.9)[1] < hi  # the level is used


# -- Holm ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("raw, adjusted", [
    # sorted: 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1=0.04 -> running max keeps 0.06
    ([0.01, 0.04, 0.03, 0.005], [0.03, 0.06, 0.06, 0.02]),
    # 0.01*3=0.03, 0.02*2=0.04, 0.03*1=0.03 -> monotone: 0.04
    ([0.01, 0.02, 0.03], [0.03, 0.04, 0.04]),
    # capped at 1
    ([0.5, 0.6], [1.0, 1.0]),
    ([0.2], [0.2]),
    ([], []),
])
def test_holm_hand_worked(raw, adjusted):
    assert holm(raw) == pytest.approx(adjusted)


def test_holm_ignores_nan_and_keeps_order():
    out = holm([0.04, math.nan, 0.01])
    assert out[0] == pytest.approx(0.04) and math.isnan(out[1]) and out[2] == pytest.approx(0.02)


def test_holm_is_monotone_and_never_below_raw():
    p = np.random.default_rng(0).random(25) ** 3
    adj = np.array(holm(p))
    order = np.argsort(p)
    assert (np.diff(adj[order]) >= 0).all() and (adj >= p).all() and (adj <= 1).all()


def test_holm_rejects_out_of_range():
    with pytest.raises(ValueError):
        holm([0.5, 1.5])


# -- win / tie / loss -----------------------------------------------------------------------------
def test_win_tie_loss_with_float_noise():
    wtl = win_tie_loss([1.0, 0.0, 0.3, 1.0], [1.0, 1.0, 0.1 + 0.2, 0.5])
    assert wtl == WinTieLoss(1, 2, 1) and str(wtl) == "1/2/1"


# -- agreement with ranx --------------------------------------------------------------------------
def _synthetic(n_queries: int, seed: int):
    """A shared qrels and two runs (b a little better); per-query metric arrays from ranx."""
    import ranx  # a test dependency: missing means the cross-check fails, never skips
    rng = np.random.default_rng(seed)
    n_docs = 30
    qrels = {f"q{i}": {f"d{j}": int(rng.integers(1, 3)) for j in rng.choice(n_docs, 3, replace=False)}
             for i in range(n_queries)}

    def run(boost: float) -> dict:
        out = {}
        for q, rel in qrels.items():
            scores = {f"d{j}": float(rng.random()) for j in range(n_docs)}
            for d in rel:
                scores[d] += boost * float(rng.random())
            out[q] = scores
        return out

    return ranx.Qrels(qrels), ranx.Run(run(0.6), name="a"), ranx.Run(run(0.8), name="b")


@pytest.fixture
def numba_one_thread():
    """ranx's Fisher kernel is ``@njit(parallel=True)``: with several threads its float means are
    reduced in another order, and for discrete metrics (recall@5 in thirds) permutations that tie
    the observed statistic exactly are then counted or not by rounding noise. Measured here on
    14 queries: exact p = 0.1875, ranx 0.187 with one thread but 0.118 with two. Ties belong in
    the p-value (P(|T| >= t_obs)); ours counts them with a tolerance. Compare single-threaded."""
    numba = pytest.importorskip("numba")
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(before)


@pytest.mark.parametrize("n_queries, seed", [(60, 1), (14, 2)])
def test_p_values_agree_with_ranx_fisher(n_queries, seed, numba_one_thread):
    """Same per-query arrays (ranx's own per-query ndcg@10, mrr@10, recall@5 of a shared synthetic
    qrels and two runs); ranx draws 10k random swaps (its pure-Python path under the suite's
    NUMBA_DISABLE_JIT: ~1 ms a swap), ours 100k for 60 queries and enumerates all 2**m sign
    vectors for 14.

    Tolerance 0.03: the standard error of a Monte Carlo p-value from N draws is sqrt(p(1-p)/N),
    at most 0.005 for ranx's 10,000 and 0.0016 for our 100,000, so the two differ by more than
    0.03 (> 5.7 standard errors of the difference) with probability < 1e-8; our (hits+1)/(N+1)
    convention shifts p by at most 1e-5 more. The exact checks of our test are the enumeration
    tests above.
    """
    from ranx import compare, evaluate

    qrels, run_a, run_b = _synthetic(n_queries, seed)
    metrics = ["ndcg@10", "mrr@10", "recall@5"]
    report = compare(qrels, [run_a, run_b], metrics=metrics, stat_test="fisher", n_permutations=10_000,
                     random_seed=7)
    for m in metrics:
        a = evaluate(qrels, run_a, m, return_mean=False)
        b = evaluate(qrels, run_b, m, return_mean=False)
        theirs = report.comparisons[("a", "b")][m]["p_value"]
        ours = paired_permutation_test(a, b, n_resamples=100_000, seed=7)
        assert abs(ours - theirs) < 0.03, (m, ours, theirs)


def _p_by_enumerating_every_sign_vector(a, b) -> float:
    """The definition, written out: every one of the 2**m sign vectors, one by one."""
    d = np.asarray(b, float) - np.asarray(a, float)
    d = d[d != 0]
    observed, tol = abs(d.sum()), 1e-9 * np.abs(d).sum()
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(d))))
    return float(np.count_nonzero(np.abs(signs @ d) >= observed - tol) / len(signs))


def test_exact_path_counts_what_enumerating_every_sign_vector_counts():
    """The exact path splits the sign vectors in two halves (meet in the middle); on metric-like
    values (0/1, fifths, reciprocal ranks, free floats) it gives the very same p-values."""
    rng = np.random.default_rng(11)
    makers = (lambda m: (rng.integers(0, 2, m).astype(float), rng.integers(0, 2, m).astype(float)),
              lambda m: (rng.integers(0, 6, m) / 5, rng.integers(0, 6, m) / 5),
              lambda m: (1 / rng.integers(1, 11, m), 1 / rng.integers(1, 11, m)),
              lambda m: (rng.random(m), rng.random(m)))
    for trial in range(240):
        a, b = makers[trial % 4](int(rng.integers(1, 13)))
        assert paired_permutation_test(a, b) == _p_by_enumerating_every_sign_vector(a, b), (a, b)


# -- the resamples and seed every command uses ----------------------------------------------------
def test_settings_from_arguments_environment_and_defaults(monkeypatch):
    from rag_experiments.errors import UserError
    from rag_experiments.stats.paired import test_settings

    monkeypatch.delenv("RAG_EXP_RESAMPLES", raising=False)
    monkeypatch.delenv("RAG_EXP_SEED", raising=False)
    assert test_settings() == (10000, 13)
    monkeypatch.setenv("RAG_EXP_RESAMPLES", "2000")
    monkeypatch.setenv("RAG_EXP_SEED", "7")
    assert test_settings() == (2000, 7) and test_settings(500, 0) == (500, 0)
    monkeypatch.setenv("RAG_EXP_RESAMPLES", "lots")
    with pytest.raises(UserError, match="RAG_EXP_RESAMPLES='lots' is not an integer"):
        test_settings()
    with pytest.raises(UserError, match="the paired test's resamples: 0 is below 1"):
        test_settings(0, 1)
