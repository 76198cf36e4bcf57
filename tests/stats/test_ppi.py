"""Judge-corrected means (rag_experiments.stats.ppi) against hand-worked values, and their coverage.

The hand-worked example (N = 6 cases under machine labels, people on the first 3):
M_all = [1, 0, 1, 0, 1, 0], M_sample = [1, 0, 1], H = [1, 1, 0].

Plain PPI (lam = 1): estimate = mean(M_all) + mean(H - M) = 0.5 + mean([0, 1, -1]) = 0.5.
var(Y = H - M) = 1 (ddof 1); cov(M_s, Y) = ((1/3)(0) + (-2/3)(1) + (1/3)(-1)) / 2 = -0.5;
var(M_all) = 6 * 0.25 / 5 = 0.3; var(H) = 0.3 + 1 + 2(-0.5) = 0.3.
Case part a = 0.3 / 6 = 0.05; judge part b = (1/3 - 1/6) * 1 = 1/6; se = sqrt(0.05 + 1/6) = 0.465475.
Welch-Satterthwaite df = (a + b)^2 / (a^2 / 5 + b^2 / 2) = 0.0469444 / 0.0143889 = 3.26255.

PPI++: cov(H, M_s) = -1/6, var(M_s) = 1/3, lam = -0.5 -> clipped to 0: the people-only mean
2/3, var(Y) = var(H_s) = 1/3, var(H) = 1/3: a = 1/18, b = (1/6)(1/3) = 1/18, se = 1/3.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t

from rag_experiments.golden.spotcheck import halve_judge_part
from rag_experiments.stats.ppi import MIN_CASES, cases_to_halve, ppi_mean, ppi_paired

M_ALL = [1, 0, 1, 0, 1, 0]
M_S = [1, 0, 1]
H = [1, 1, 0]


def test_plain_ppi_hand_worked():
    c = ppi_mean(M_ALL, H, M_S, tune=False)
    assert c.lam == 1.0
    assert c.estimate == pytest.approx(0.5)
    assert c.uncorrected == pytest.approx(0.5) and c.mean_error == pytest.approx(0.0)
    assert c.se_cases == pytest.approx(math.sqrt(0.05))
    assert c.se_judge == pytest.approx(math.sqrt(1 / 6))
    assert c.se == pytest.approx(0.4654747, abs=1e-6)
    assert c.df == pytest.approx(0.0469444 / 0.0143889, rel=1e-5)
    q = t.ppf(0.975, c.df)
    assert (c.low, c.high) == pytest.approx((0.5 - q * c.se, 0.5 + q * c.se))


def test_ppi_plus_plus_clips_a_judge_that_runs_against_people_to_the_people_only_mean():
    c = ppi_mean(M_ALL, H, M_S, tune=True)
    assert c.lam == 0.0
    assert c.estimate == pytest.approx(2 / 3)
    assert c.se_cases == pytest.approx(math.sqrt(1 / 18)) and c.se_judge == pytest.approx(math.sqrt(1 / 18))
    assert c.se == pytest.approx(1 / 3)


def test_ppi_plus_plus_lambda_between_0_and_1():
    # M_s = [0, .5, 1], H = [0, 0, .5]: cov = ((-1/6)(-.5) + 0 + (1/3)(.5)) / 2 = 1/8, var(M_s) = 1/4 -> lam 0.5
    # estimate = 0.5 * mean([0, .5, 1, 1]) + mean([0, -.25, 0]) = 0.3125 - 0.083333
    c = ppi_mean([0, 0.5, 1, 1], [0, 0, 0.5], [0, 0.5, 1], tune=True)
    assert c.lam == pytest.approx(0.5)
    assert c.estimate == pytest.approx(0.3125 - 0.25 / 3)


def test_ppi_plus_plus_clips_lambda_at_one():
    # M_s = [0, .5, 1], H = [0, 1, 2]: cov = ((-1)(-.5) + 0 + (1)(.5)) / 2 = 0.5, var(M_s) = 0.25 -> lam 2 -> 1:
    # 0.625 + mean([0, .5, 1]) = 1.125 (unclipped, 2 x 0.625 + mean([0, 0, 0]) = 1.25)
    c = ppi_mean([0, 0.5, 1, 1], [0, 1, 2], [0, 0.5, 1], tune=True)
    assert c.lam == 1.0 and c.estimate == pytest.approx(1.125)


def test_ppi_plus_plus_falls_back_to_plain_ppi_when_the_machine_sample_is_constant():
    # var(M_s) = 0: no slope to estimate, lam = 1: 0.5 + mean([1 - 1, 0 - 1]) = 0 (lam 2 would give -0.5)
    c = ppi_mean([1, 1, 0, 0], [1, 0], [1, 1], tune=True)
    assert c.lam == 1.0 and c.estimate == pytest.approx(0.0)


def test_a_judge_people_agree_with_changes_nothing_but_the_case_part_remains():
    rng = np.random.default_rng(1)
    m = rng.random(50)
    c = ppi_mean(m, m[:10], m[:10])
    assert c.estimate == pytest.approx(m.mean()) and c.lam == pytest.approx(1.0)
    assert c.se_judge == pytest.approx(0.0, abs=1e-12)
    assert c.se == pytest.approx(m.std(ddof=1) / math.sqrt(50))


def test_every_case_checked_gives_the_people_mean_exactly():
    rng = np.random.default_rng(2)
    m, h = rng.random(40), rng.random(40)
    c = ppi_mean(m, h, m, tune=False)
    assert c.estimate == pytest.approx(h.mean())
    assert c.se_judge == 0.0  # 1/n - 1/N = 0: the sample is the golden set
    assert c.se == pytest.approx(h.std(ddof=1) / math.sqrt(40))


def test_paired_difference_by_hand_on_a_sample_that_is_not_the_first_cases():
    """People checked cases 4, 1 and 5 (in that order) of N = 6; a sample index, not the first n cases.

    Machine per-case differences d = mb - ma = [0, 1, 0, 0, -1, 0]: mean 0, var (ddof 1) 2/5 = 0.4.
    On the sample: d_s = d[[4, 1, 5]] = [-1, 1, 0]; people's differences d_h = hb - ha = [-1, 1, 1];
    Y = d_h - d_s = [0, 0, 1]: estimate = 0 + mean(Y) = 1/3.
    var(Y) = ((1/3)^2 + (1/3)^2 + (2/3)^2) / 2 = 1/3; cov(d_s, Y) = ((-1)(-1/3) + (1)(-1/3) + 0) / 2 = 0;
    var(H) = 0.4 + 1/3 + 0 = 11/15. Case part a = (11/15) / 6 = 11/90; judge part b = (1/3 - 1/6)(1/3) = 1/18.
    se = sqrt(11/90 + 5/90) = sqrt(16/90) = 0.421637; df = (16/90)^2 / ((11/90)^2 / 5 + (1/18)^2 / 2) = 6.975477.
    (Reading the first three cases instead, d_s = [0, 1, 0], gives Y = [-1, 0, 1] and 0.)"""
    ma, mb = np.array([1, 0, 1, 0, 1, 0.5]), np.array([1, 1, 1, 0, 0, 0.5])
    p = ppi_paired(ma, mb, [1, 0, 0], [0, 1, 1], [4, 1, 5], tune=False)
    assert p.estimate == pytest.approx(1 / 3) and p.uncorrected == pytest.approx(0.0)
    assert p.mean_error == pytest.approx(1 / 3) and p.human_mean == pytest.approx(1 / 3)
    assert p.se_cases == pytest.approx(math.sqrt(11 / 90)) and p.se_judge == pytest.approx(math.sqrt(1 / 18))
    assert p.se == pytest.approx(math.sqrt(16 / 90))
    assert p.df == pytest.approx((16 / 90) ** 2 / ((11 / 90) ** 2 / 5 + (1 / 18) ** 2 / 2))
    q = t.ppf(0.975, p.df)  # 2.366311
    assert (p.low, p.high) == pytest.approx((1 / 3 - q * math.sqrt(16 / 90), 1 / 3 + q * math.sqrt(16 / 90)))


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="aligned"):
        ppi_mean([1, 0], [1, 0], [1])
    with pytest.raises(ValueError, match="at least 2"):
        ppi_mean([1, 0], [1], [1])
    with pytest.raises(ValueError, match="larger"):
        ppi_mean([1, 0], [1, 0, 1], [1, 0, 1])
    with pytest.raises(ValueError, match="finite"):
        ppi_mean([1, float("nan")], [1, 0], [1, 0])


def test_how_many_cases_halve_the_interval():
    # judge part: (1/n' - 1/N) = (1/10 - 1/100) / 4 -> n' = 1 / (0.0225 + 0.01) = 30.77 -> 31 (about 3x more)
    h = cases_to_halve(10, 100, se_cases=0.0, se_judge=0.2)
    assert h["judge"] == 31 and h["more_judge"] == 21
    assert h["total"] == 31  # no case part: halving the whole is halving the judge part
    assert halve_judge_part(10, 100) == 31  # the spot-check report says the same
    # a case part over half the total: no number of labels halves the whole interval
    h = cases_to_halve(10, 100, se_cases=0.2, se_judge=0.1)
    assert h["total"] is None and h["judge"] == 31
    # the same rule in both modules, everywhere
    for n in (2, 5, 30, 99):
        for big_n in (n + 1, 230, 5000):
            assert cases_to_halve(n, big_n, 0.0, 0.1)["judge"] == halve_judge_part(n, big_n)


def test_coverage_on_a_biased_judge_is_near_nominal_and_the_uncorrected_is_not():
    """300 seeded repetitions of a golden set of 200 cases from a population whose machine metric
    is biased (a judge that misses a relevant passage 30% of the time), people on 40 of them."""
    rng = np.random.default_rng(7)
    pop_h = rng.binomial(1, 0.6, 20000).astype(float)  # recall@5 of one-evidence cases, people's labels
    truth = pop_h.mean()
    covered = uncorrected = 0
    reps = 300
    for _ in range(reps):
        h = rng.choice(pop_h, 200)
        m = h * (rng.random(200) >= 0.3)  # the judge misses 30% of the hits
        s = rng.choice(200, 40, replace=False)
        c = ppi_mean(m, h[s], m[s])
        covered += c.low <= truth <= c.high
        half = 1.96 * m.std(ddof=1) / math.sqrt(200)
        uncorrected += m.mean() - half <= truth <= m.mean() + half
    assert covered / reps >= 0.91
    assert uncorrected / reps < 0.2
    assert MIN_CASES == 30


def _cranfield() -> Path | None:
    root = Path(__file__).resolve().parents[2]
    for p in (root / ".." / "shared" / "data" / "cranfield", Path("/work/shared/data/cranfield")):
        if (p / "cranqrel").exists():
            return p
    return None


@pytest.mark.skipif(_cranfield() is None, reason="Cranfield collection not found (../shared/data/cranfield)")
def test_the_cranfield_simulation_on_real_labels():
    """The parts tools/ppi_coverage.py rests on, on Cranfield itself, each able to fail (its coverage is
    the tool's measurement, 200 to 1,000 repetitions; a few here would only be a sanity bound):
    the truth it scores against equals ir_measures on Cranfield's qrels for both runs and all four metrics;
    a judge people agree with leaves the estimate at the people's mean with no judge part; and with every
    case checked the corrected estimate is the people's mean whatever the judge did."""
    import ir_measures
    from ir_measures import RR, R, nDCG

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    import ppi_coverage

    cases = ppi_coverage.load(5)
    assert len(cases) == 225 and 6 < np.mean([len(c["pool"]) for c in cases]) < 8
    human = np.stack([ppi_coverage.case_metrics(c, c["truth"]) for c in cases])  # [case, run, metric]
    qrels = [ir_measures.Qrel(c["id"], d, g) for c in cases for d, g in {**c["given"], **c["truth"]}.items() if g > 0]
    for r, name in enumerate(("bm25", "tfidf")):
        run = [ir_measures.ScoredDoc(c["id"], d, 20.0 - i) for c in cases for i, d in enumerate(c["runs"][name])]
        theirs = {(m.query_id, str(m.measure)): m.value
                  for m in ir_measures.iter_calc([R @ 5, R @ 20, RR @ 10, nDCG @ 10], qrels, run)}
        for ci, c in enumerate(cases):
            for m, measure in enumerate(("R@5", "R@20", "RR@10", "nDCG@10")):
                assert human[ci, r, m] == pytest.approx(theirs.get((c["id"], measure), 0.0), abs=1e-12), (name, measure)
    rng = np.random.default_rng(5)
    h = human[:, 0, 2]  # BM25 MRR@10 under people's labels
    s = rng.choice(225, 30, replace=False)
    exact = ppi_mean(h, h[s], h[s])
    assert exact.estimate == pytest.approx(h.mean()) and exact.se_judge == pytest.approx(0.0, abs=1e-12)
    m = np.array([ppi_coverage.case_metrics(c, ppi_coverage.judge(c, 0.7, 0.98, rng))[0, 2] for c in cases])
    assert abs(m.mean() - h.mean()) > 0.02  # the strict judge moves MRR@10 (measured: by 0.04-0.06)
    everyone = ppi_mean(m, h, m)
    assert everyone.estimate == pytest.approx(h.mean()) and everyone.se_judge == 0.0
    corrected = ppi_mean(m, h[s], m[s])
    assert corrected.estimate == pytest.approx(m.mean() + (h[s] - m[s]).mean())
