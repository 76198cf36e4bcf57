"""The IPW (Horvitz-Thompson) estimator of metrics on sampled labels, against hand-worked values and
against exact enumeration of every possible sample."""

from __future__ import annotations

import itertools
import math

import pytest

from rag_experiments.stats.ipw import (Stratum, Term, allocate, case_ratio, ht_total, ratio_mean, ratio_mean_bootstrap,
                                       stratified_variance)


def test_stratum_weight_and_inclusion():
    s = Stratum(population=8, sampled=2)
    assert s.inclusion == 0.25 and s.weight == 4.0
    with pytest.raises(ValueError):
        Stratum(population=3, sampled=0)
    with pytest.raises(ValueError):
        Stratum(population=3, sampled=4)


def test_one_case_by_hand():
    # a case with its own evidence (certain, not in the top k) and a stratum of N=4 pool pairs of which
    # n=2 were judged: one relevant and credited in the top k, one not relevant (no term).
    strata = {"1-5": Stratum(4, 2)}
    terms = [Term(x=0), Term(x=1, stratum="1-5")]
    # weight 4/2 = 2: X^ = 2, Y^ = 1 + 2 = 3
    assert ht_total(terms, strata) == 2.0
    assert case_ratio(terms, strata) == pytest.approx(2 / 3)
    est = ratio_mean([terms], strata)
    assert est.value == pytest.approx(2 / 3)
    # z of the relevant pair = (1 - 2/3 * 1) / (1 case * 3) = 1/9; the other judged pair z = 0
    # s^2 = ((1/9)^2 - (1/9)^2 / 2) / (2 - 1) = 1/162; V = 4^2 (1 - 2/4) / 2 * 1/162 = 2/81
    assert est.se == pytest.approx(math.sqrt(2 / 81))
    assert est.low == pytest.approx(2 / 3 - 1.959964 * math.sqrt(2) / 9, abs=1e-6)
    assert est.high == pytest.approx(2 / 3 + 1.959964 * math.sqrt(2) / 9, abs=1e-6)


def test_all_certain_is_the_plain_recall_with_no_width():
    cases = [[Term(1), Term(0)], [Term(1)], [Term(0), Term(0), Term(1)]]
    est = ratio_mean(cases, {})
    assert est.value == pytest.approx((0.5 + 1 + 1 / 3) / 3)
    assert est.se == 0 and est.low == est.high == est.value


def test_a_fully_judged_stratum_adds_no_variance():
    strata = {"a": Stratum(3, 3)}
    est = ratio_mean([[Term(1), Term(0, stratum="a")], [Term(1, stratum="a")]], strata)
    assert est.value == pytest.approx((0.5 + 1) / 2) and est.se == 0


def test_two_cases_two_strata_by_hand():
    strata = {"top": Stratum(2, 1), "low": Stratum(6, 3)}
    a = [Term(1), Term(1, stratum="top")]  # weight 2: X^ = 1 + 2 = 3, Y^ = 3 -> 1
    b = [Term(0), Term(0, stratum="low"), Term(1, stratum="low")]  # weight 2: X^ = 2, Y^ = 1 + 2 + 2 = 5 -> 0.4
    est = ratio_mean([a, b], strata)
    assert est.value == pytest.approx(0.7)
    # z (n = 2 cases): top: (1 - 1*1) / (2*3) = 0 -> one judged pair, z^2 = 0 -> no variance
    # low: (0 - 0.4) / (2*5) = -0.04 and (1 - 0.4) / (2*5) = 0.06, the third judged pair 0:
    # s^2 = (0.0016 + 0.0036 - 0.02^2/3) / 2 = (0.0052 - 0.000133333) / 2 = 0.002533333
    # V = 36 * (1 - 1/2) / 3 * 0.002533333 = 0.0152
    assert est.se == pytest.approx(math.sqrt(0.0152))


def test_ht_total_is_unbiased_and_its_variance_estimate_too_by_enumeration():
    # population of one stratum: x values of N=6 pairs (relevant and credited, relevant not credited, 0)
    xs = [1, 0, 1, 1, 0, 0]
    N, n = len(xs), 3
    truth = sum(xs)
    st = {"h": Stratum(N, n)}
    estimates, variances = [], []
    for sample in itertools.combinations(range(N), n):
        terms = [Term(xs[i], stratum="h") for i in sample if xs[i]]
        estimates.append(ht_total(terms, st))
        variances.append(stratified_variance({"h": [t.x for t in terms]}, st))
    mean = sum(estimates) / len(estimates)
    true_var = sum((e - mean) ** 2 for e in estimates) / len(estimates)
    assert mean == pytest.approx(truth)  # Horvitz-Thompson: exactly unbiased
    assert sum(variances) / len(variances) == pytest.approx(true_var)  # and so is its variance estimate
    # and the textbook value: N^2 (1 - f) S^2 / n, S^2 the population variance (n - 1 denominator)
    s_sq = sum((x - truth / N) ** 2 for x in xs) / (N - 1)
    assert true_var == pytest.approx(N ** 2 * (1 - n / N) * s_sq / n)


def _ratio_by_counting(pool, own, sample, big_n, n):
    """An independent ratio estimator and its linearised variance, written out from the definitions:
    a sampled relevant pair counts N/n times; per case X^ = credited count, Y^ = relevant count;
    z = (x - theta y) / (cases Y^) for a sampled relevant pair, 0 for a sampled non-relevant one;
    V = N^2 (1 - n/N) s^2 / n with s^2 the sample variance of z over the n sampled pairs."""
    w = big_n / n
    xs = {c: float(x) for c, x in own.items()}
    ys = {c: 1.0 for c in own}
    for i in sample:
        c, x, rel = pool[i]
        if rel:
            xs[c] += w * x
            ys[c] += w
    theta = {c: xs[c] / ys[c] for c in own}
    value = sum(theta.values()) / len(own)
    z = [((pool[i][1] - theta[pool[i][0]]) / (len(own) * ys[pool[i][0]])) if pool[i][2] else 0.0 for i in sample]
    mean_z = sum(z) / n
    s_sq = sum((v - mean_z) ** 2 for v in z) / (n - 1)
    return value, math.sqrt(big_n ** 2 * (1 - n / big_n) * s_sq / n)


def test_ratio_estimate_and_its_interval_by_enumeration_against_an_independent_count():
    """3 cases, 8 pool pairs in one stratum, 4 judged: every one of the C(8, 4) = 70 samples. Each sample's
    value and standard error equal the count written out above. The truth (every pair judged):
    a: own 1 + pairs (1, rel) (0, rel): 2/3; b: own 0 + (1, rel): 1/2; c: own 1 + (0, rel) (1, rel): 2/3;
    mean 11/18 = 0.611111. Over the 70 samples the estimator averages 187/315 = 0.593651 (a ratio: not exactly
    unbiased, 0.017 low), and its 95% interval holds the truth in 38 of the 70: 4 judged pairs of 8 are too few
    for the normal interval (tools/sampled_labels.py measures it on the demo's pool; the run says so)."""
    pool = [("a", 1, 1), ("a", 0, 1), ("b", 1, 1), ("b", 0, 0), ("c", 0, 1), ("c", 1, 0), ("a", 0, 0), ("c", 1, 1)]
    own = {"a": 1, "b": 0, "c": 1}
    truth_cases = [[Term(own[c])] + [Term(x) for cc, x, rel in pool if cc == c and rel] for c in own]
    truth = ratio_mean(truth_cases, {}).value
    assert truth == pytest.approx(11 / 18)
    st = {"h": Stratum(len(pool), 4)}
    values, covered = [], 0
    for sample in itertools.combinations(range(len(pool)), 4):
        per = {c: [Term(own[c])] for c in own}
        for i in sample:
            c, x, rel = pool[i]
            if rel:
                per[c].append(Term(x, stratum="h"))
        est = ratio_mean(list(per.values()), st)
        value, se = _ratio_by_counting(pool, own, sample, len(pool), 4)
        assert est.value == pytest.approx(value, abs=1e-12) and est.se == pytest.approx(se, abs=1e-12), sample
        assert (est.low, est.high) == pytest.approx((value - 1.959964 * se, value + 1.959964 * se), abs=1e-6)
        values.append(est.value)
        covered += est.low <= truth <= est.high
    assert len(values) == 70
    assert sum(values) / 70 == pytest.approx(187 / 315, abs=1e-12)
    assert covered == 38


def test_allocate():
    assert allocate({"a": 10, "b": 10}, 6) == {"a": 3, "b": 3}
    # priority 1 : 0.5, each stratum 2 first, then 16 left at rates r and r/2 over 18 and 18 pairs -> 10.67/5.33
    got = allocate({"1-5": 20, "6-10": 20}, 20, {"1-5": 1.0, "6-10": 0.5})
    assert got == {"1-5": 13, "6-10": 7}
    # a small stratum is taken whole; what it cannot take goes to the others
    assert allocate({"a": 2, "b": 100}, 50, {"a": 1.0, "b": 1.0}) == {"a": 2, "b": 48}
    assert allocate({"a": 3, "b": 4}, 100) == {"a": 3, "b": 4}
    assert allocate({"a": 5, "b": 0}, 3) == {"a": 3, "b": 0}
    assert sum(allocate({"a": 7, "b": 9, "c": 11}, 10).values()) == 10
    # at least 2 pairs per stratum when n allows (a variance needs two): proportional would give b 6 x 3/103 = 0
    assert allocate({"a": 100, "b": 3}, 6) == {"a": 4, "b": 2}
    assert allocate({"a": 5}, 0) == {"a": 0}  # nothing asked, nothing judged
    # fewer than 2 per stratum asked (4 for 3 strata): no floor, proportional with largest remainders
    assert allocate({"a": 10, "b": 10, "c": 10}, 4) == {"a": 2, "b": 1, "c": 1}


def test_difference_mean_by_hand():
    from rag_experiments.stats.ipw import difference_mean

    # 4 cases scored; 2 of 3 eligible cases drawn, corrections -0.5 and 0.1
    base = [1.0, 0.5, 1.0, 0.0]
    est = difference_mean(base, {"all": [-0.5, 0.1]}, {"all": Stratum(3, 2)})
    # mean(base) = 0.625; + (3/2) * (-0.4) / 4 = -0.15 -> 0.475
    assert est.value == pytest.approx(0.475)
    # s^2 = ((-0.5 + 0.2)^2 + (0.1 + 0.2)^2) / 1 = 0.18; V = 9 * (1/3) * 0.18 / 2 / 16 = 0.016875
    assert est.se == pytest.approx(math.sqrt(0.016875))
    # every eligible case drawn: exact, no width
    full = difference_mean(base, {"all": [-0.5, 0.1, 0.0]}, {"all": Stratum(3, 3)})
    assert full.value == pytest.approx(0.625 - 0.1) and full.se == 0


def test_difference_mean_is_unbiased_with_an_unbiased_variance_by_enumeration():
    from rag_experiments.stats.ipw import difference_mean

    base = [0.5, 1.0, 0.0, 1.0, 0.25]
    delta = [0.0, -0.5, 0.5, -0.25, 0.1]  # what full judging changes per case
    truth = sum(b + d for b, d in zip(base, delta)) / 5
    st = {"h": Stratum(5, 2)}
    vals, vars_ = [], []
    for s in itertools.combinations(range(5), 2):
        e = difference_mean(base, {"h": [delta[i] for i in s]}, st)
        vals.append(e.value)
        vars_.append(e.se ** 2)
    mean = sum(vals) / len(vals)
    assert mean == pytest.approx(truth)
    assert sum(vars_) / len(vars_) == pytest.approx(sum((v - mean) ** 2 for v in vals) / len(vals))


def test_design_bootstrap_spread_matches_the_linearised_variance():
    """Rao-Wu's rescaled bootstrap (ratio_mean_bootstrap, pair samples) and the delta method (ratio_mean)
    estimate the same design variance: 40 cases, one stratum of 80 pool pairs of which 40 judged
    (f = 1/2), 20 of them relevant. The rescaling factor sqrt(m (1 - f) / (n_h - 1)) = sqrt(1/2) makes the
    replicate spread match; without the (1 - f) it would be twice as wide (found by tools/mutation_pass.py)."""
    import numpy as np

    rng = np.random.default_rng(3)
    cases = []
    for c in range(40):
        terms = [Term(float(rng.integers(0, 2)))]  # the case's own evidence, certain
        if c % 2 == 0:
            terms.append(Term(float(rng.integers(0, 2)), stratum="h"))
        cases.append(terms)
    strata = {"h": Stratum(80, 40)}
    linear = ratio_mean(cases, strata)
    boot, _ = ratio_mean_bootstrap(cases, strata, samples=4000, seed=5, method="normal")
    assert boot.value == pytest.approx(linear.value)
    # 0.0144 against 0.0125 here (a ratio: the two agree to first order); without the (1 - f): about 0.029
    assert boot.se == pytest.approx(linear.se, rel=0.3)
    assert (boot.low, boot.high) == pytest.approx((boot.value - 1.959964 * boot.se, boot.value + 1.959964 * boot.se))
    # the quantile methods: a 95% interval around the value, about as wide as the normal one
    for method in ("basic", "percentile"):
        q, _ = ratio_mean_bootstrap(cases, strata, samples=4000, seed=5, method=method)
        assert q.low < q.value < q.high and (q.high - q.low) == pytest.approx(boot.high - boot.low, rel=0.2), method


def test_difference_mean_of_one_case():
    from rag_experiments.stats.ipw import difference_mean

    one = difference_mean([0.5], {}, {})
    assert one.value == 0.5 and one.se == 0.0 and one.low == one.high == 0.5
