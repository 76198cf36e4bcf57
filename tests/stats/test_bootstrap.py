"""stats.bootstrap: the percentile interval against an independent implementation (scipy's), the level it
is labelled with, and the exact interval of a proportion at the edge (every case a hit, or none)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest, bootstrap

from rag_experiments.stats.bootstrap import bootstrap_interval, proportion_at_edge


@pytest.mark.parametrize("level", [0.95, 0.9])
def test_percentile_interval_agrees_with_scipys_bootstrap(level):
    """scipy.stats.bootstrap(method="percentile") draws its own resamples: with 20,000 of each the two
    quantiles differ by Monte Carlo error only (sd of the mean here 0.034: a 2.5% quantile moves ~0.002)."""
    values = np.random.default_rng(4).random(80)
    ours = bootstrap_interval(values, samples=20_000, seed=1, level=level)
    theirs = bootstrap((values,), np.mean, n_resamples=20_000, method="percentile", confidence_level=level,
                       random_state=np.random.default_rng(2)).confidence_interval
    assert ours == pytest.approx((theirs.low, theirs.high), abs=0.006)


def test_a_95_interval_is_not_a_90_one():
    """50 hits of 100: resampled means spread with sd sqrt(0.25 / 100) = 0.05, so the 95% interval is
    0.5 ± 1.96 x 0.05 = ±0.098 and a 90% one ±0.082; the default level must give the first."""
    values = np.array([1.0] * 50 + [0.0] * 50)
    low, high = bootstrap_interval(values, samples=4000, seed=3)
    assert 0.090 <= (high - low) / 2 <= 0.106
    low90, high90 = bootstrap_interval(values, samples=4000, seed=3, level=0.9)
    assert 0.075 <= (high90 - low90) / 2 <= 0.089


@pytest.mark.parametrize("hits, n", [(33, 33), (0, 12), (12, 12), (1, 1), (0, 1), (230, 230)])
def test_every_case_or_none_gets_the_exact_interval_not_zero_width(hits, n):
    """The issue's case: hit@5 on 33 config cases, 33 of 33, was logged [1.0, 1.0]; Clopper-Pearson is
    [0.025^(1/33), 1] = [0.894, 1.0]. scipy's exact interval is the independent check."""
    values = np.array([1.0] * hits + [0.0] * (n - hits))
    exact = binomtest(hits, n).proportion_ci(confidence_level=0.95, method="exact")
    assert bootstrap_interval(values) == pytest.approx((exact.low, exact.high), abs=1e-12)
    low, high = bootstrap_interval(values)
    assert high - low > 0.01


def test_the_edge_by_hand_and_only_at_the_edge():
    assert bootstrap_interval(np.ones(33))[0] == pytest.approx(0.894237, abs=1e-6)  # exp(ln(0.025) / 33)
    assert bootstrap_interval(np.zeros(12))[1] == pytest.approx(0.264648, abs=1e-6)  # 1 - 0.025^(1/12)
    assert proportion_at_edge(np.ones(10), level=0.9)[0] == pytest.approx(0.05 ** 0.1)
    # 32 of 33 is not at the edge: the bootstrap's interval, and a constant that is not 0/1 is not a proportion
    assert proportion_at_edge(np.array([1.0] * 32 + [0.0])) is None
    assert proportion_at_edge(np.full(5, 0.5)) is None
    assert bootstrap_interval(np.full(5, 0.5)) == (0.5, 0.5)


def test_no_resamples_or_one_case_is_the_mean_with_no_width():
    assert bootstrap_interval(np.array([0.2, 0.4]), samples=0) == pytest.approx((0.3, 0.3))
    assert bootstrap_interval(np.array([0.25])) == (0.25, 0.25)
    assert all(np.isnan(bootstrap_interval(np.array([]))))  # no cases: (nan, nan)


@pytest.mark.parametrize("where", [0, 19])
def test_every_case_can_be_drawn_the_first_and_the_last(where):
    """One hit among 20 cases: resampled means are k/20 with k ~ Binomial(20, 1/20), so the 97.5th
    percentile is 3/20 = 0.15 (P(k >= 3) = 0.075, P(k >= 4) = 0.016); a resampler that never draws the
    first (or the last) case would give [0, 0] for that case's hit."""
    values = np.zeros(20)
    values[where] = 1.0
    low, high = bootstrap_interval(values, samples=4000, seed=13)
    assert low == 0.0 and high == pytest.approx(0.15)
