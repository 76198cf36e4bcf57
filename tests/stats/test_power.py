"""stats.power: the MDE and the cases needed, against numbers worked by hand, and the prediction
against the tool's own test by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rag_experiments.stats.power import (estimate, lattice_step, mde, mde_signflip, n_needed,
                                         n_needed_signflip, predicted_power, predicted_power_signflip, simulated_power,
                                         tilt_weights)

# z_{0.975} = 1.959964, z_{0.8} = 0.841621: z_a + z_b = 2.801585
Z_SUM = 1.959964 + 0.841621


def test_mde_by_hand():
    # sd 0.5, 100 cases: 2.801585 * 0.5 / 10 = 0.140079
    assert mde(0.5, 100) == pytest.approx(0.140079, abs=1e-6)
    # sd 0.3, 230 cases: 2.801585 * 0.3 / 15.165751 = 0.055420
    assert mde(0.3, 230) == pytest.approx(Z_SUM * 0.3 / math.sqrt(230), abs=1e-6)
    assert mde(0.3, 230) == pytest.approx(0.055420, abs=1e-6)
    # four times the cases halve it
    assert mde(0.3, 920) == pytest.approx(mde(0.3, 230) / 2)
    # the sign-flip variant (not used): 0.5 * (10 * 0.841621 + 1.959964 * sqrt(100 + 0.708326 - 3.841459))
    #   / (100 - 3.841459) = 0.5 * 27.70637 / 96.158541 = 0.144066
    assert mde_signflip(0.5, 100) == pytest.approx(0.144066, abs=1e-5)
    assert mde(0.5, 0) is None and mde_signflip(0.5, 3) is None


def test_cases_needed_by_hand():
    # (2.801585 * 0.5 / 0.1)^2 = 14.007925^2 = 196.22 -> 197 cases
    assert n_needed(0.5, 0.1) == 197
    # the demo's hybrid vs hybrid_rerank on MRR@10: sd 0.25, Δ 0.02: (2.801585 * 12.5)^2 = 1226.4 -> 1227
    assert n_needed(0.25, 0.02) == 1227 and n_needed(0.25, -0.02) == 1227
    # sign-flip variant: ((0.841621 * 0.5 + 1.959964 * sqrt(0.26)) / 0.1)^2 = 14.2020^2 = 201.7 -> 202
    assert n_needed_signflip(0.5, 0.1) == 202
    assert n_needed(0.5, 0.0) is None
    # sd 0.31, Δ 0.06: (2.801585 * 0.31 / 0.06)^2 = 14.474856^2 = 209.52 -> 210 (209 would fall short)
    assert n_needed(0.31, 0.06) == 210
    # sd 0.2, Δ 0.0742: (2.801585 * 0.2 / 0.0742)^2 = 7.551442^2 = 57.02 -> 58
    assert n_needed(0.2, 0.0742) == 58
    # power at the MDE of 100 cases, sd 0.5 (0.140079, above): Phi(2.801585 - 1.959964) + Phi(-4.761549)
    #   = Phi(0.841621) + 0.000001 = 0.800001
    assert predicted_power(0.140079, 0.5, 100) == pytest.approx(0.800001, abs=2e-6)
    # and below it, Δ 0.1: s = 0.1 * 10 / 0.5 = 2: Phi(0.040036) + Phi(-3.959964) = 0.515968 + 0.000037 = 0.516005
    assert predicted_power(0.1, 0.5, 100) == pytest.approx(0.516005, abs=2e-6)


def test_estimate_of_two_runs_by_hand():
    # 10 cases: d = [1, 1, 0.5, -1, 0 x 6], mean 0.15; squared deviations 2 x 0.7225 + 0.1225 + 1.3225
    # + 6 x 0.0225 = 3.025, sd (ddof 1) = sqrt(3.025 / 9) = 0.579751
    a = np.array([0, 0, 0, 1, 1, 1, 0, 0, 1, 0], dtype=float)
    b = np.array([1, 1, 0.5, 0, 1, 1, 0, 0, 1, 0], dtype=float)
    est = estimate(a, b)
    assert est.n == 10 and est.differing == 4 and est.delta == pytest.approx(0.15) and est.step == 0
    assert est.sd == pytest.approx(0.579751, abs=1e-6)
    # MDE: 2.801585 * 0.579751 / sqrt(10) = 1.624222 / 3.162278 = 0.513624
    assert est.mde == pytest.approx(0.513624, abs=1e-5)
    # cases for the Δ 0.15 observed: (1.624222 / 0.15)^2 = 10.82815^2 = 117.25 -> 118
    assert est.n_for_delta == 118
    assert est.short() == "MDE 0.514, n≈118 for Δ"
    assert "these 10 cases could detect |Δ| >= 0.514" in est.sentence()


def test_a_sign_test_gets_the_continuity_step():
    # d = [1, 1, 1, -1, 0 x 6]: every non-zero difference is ±1 (a sign test), step 1;
    # sd = sqrt((3 x 0.64 + 1.44 + 6 x 0.04) / 9) = sqrt(0.4) = 0.632456
    a = np.array([0, 0, 0, 1, 1, 1, 0, 0, 1, 0], dtype=float)
    b = np.array([1, 1, 1, 0, 1, 1, 0, 0, 1, 0], dtype=float)
    assert lattice_step(b - a) == 1.0 and lattice_step([0.5, -0.5, 0.25]) == 0.0
    est = estimate(a, b)
    # MDE = 2.801585 * 0.632456 / sqrt(10) + 1 / 10 = 0.560317 + 0.1 = 0.660317
    assert est.mde == pytest.approx(0.660317, abs=1e-5)
    # n: sqrt(n) = x solves 0.2 x^2 - 1.771866 x - 1 = 0: x = (1.771866 + sqrt(3.139509 + 0.8)) / 0.4
    #   = (1.771866 + 1.984819) / 0.4 = 9.391712, n = 88.20 -> 89
    assert est.n_for_delta == 89
    assert predicted_power(est.mde, est.sd, 10, step=1.0) == pytest.approx(0.8, abs=1e-4)


def test_identical_runs_have_no_mde():
    est = estimate([1.0, 0.0, 0.5], [1.0, 0.0, 0.5])
    assert est.mde is None and est.n_for_delta is None and est.differing == 0
    assert est.short() == "MDE n/a (no case differs)"


@pytest.mark.parametrize("pool", [
    # a hit@5-like comparison: win 18%, loss 9%, tie 73% (Δ 0.09, a sign test: continuity step 1)
    [1.0] * 18 + [-1.0] * 9 + [0.0] * 73,
    # an nDCG-like one: mixed magnitudes (step 0)
    [0.6, 0.3, 0.25, 0.1, 0.05, -0.2, -0.4, -0.05] + [0.0] * 12,
])
def test_measured_power_matches_the_prediction_at_three_sizes(pool):
    """A small version of tools/power_simulation.py: samples of the pool at the sizes the formula gives
    power 0.5, 0.8 and 0.95, the tool's own randomization test on each (seeded: the same shares every run;
    400 samples: a standard error of 2.5 points at power 0.5)."""
    pool = np.array(pool)
    mu, sd, step = pool.mean(), pool.std(), lattice_step(pool)
    for target in (0.5, 0.8, 0.95):
        n = n_needed(sd, mu, power=target, step=step)
        measured = simulated_power(pool, n, reps=400, seed=1, n_resamples=500)
        assert abs(measured - predicted_power(mu, sd, n, step=step)) <= 0.06, (target, n, measured)


def test_power_at_no_difference_is_at_most_alpha_and_grows_with_the_difference_by_hand():
    """The issue's case: sd 0.3, 24 cases, a sign test's step 1. c = 1 / (sqrt(24) 0.3) = 0.680414.
    Δ 0: 2 Phi(-0.680414 - 1.959964) = 2 Phi(-2.640378) = 0.008281 (the old code: 0.1045, above alpha).
    Δ 0.1: s = 0.1 sqrt(24) / 0.3 = 1.632993; Phi(1.632993 - 0.680414 - 1.959964) = Phi(-1.007385) = 0.156875,
    plus Phi(-4.273371) = 0.0000096: 0.156885 (the old code: 0.158667)."""
    assert predicted_power(0.0, 0.3, 24, step=1.0) == pytest.approx(0.008281, abs=1e-6)
    assert predicted_power(0.1, 0.3, 24, step=1.0) == pytest.approx(0.156885, abs=1e-5)
    assert predicted_power(-0.1, 0.3, 24, step=1.0) == predicted_power(0.1, 0.3, 24, step=1.0)
    # no step: exactly alpha at Δ 0 (2 Phi(-1.959964))
    assert predicted_power(0.0, 0.3, 24) == pytest.approx(0.05, abs=1e-6)
    for step in (0.0, 0.5, 1.0):
        powers = [predicted_power(mu, 0.3, 24, step=step) for mu in np.linspace(0, 0.4, 41)]
        assert powers[0] <= 0.05 + 1e-12
        assert all(later > earlier for earlier, later in zip(powers, powers[1:])), step


def test_tilted_weights_have_the_mean_asked_for_and_keep_the_values():
    d = np.array([1.0] * 3 + [-1.0] * 2 + [0.0] * 19)  # 24 cases, mostly tied, mean 1/24
    assert tilt_weights(d, d.mean()) == pytest.approx(np.full(24, 1 / 24))  # theta 0: the plain draw
    w = tilt_weights(d, 0.2)
    assert w @ d == pytest.approx(0.2) and w.sum() == pytest.approx(1.0)
    # by hand: w ∝ e^{theta d}; a win weighs e^theta, a tie 1, a loss e^-theta; mean 0.2 solves
    # (3 e^t - 2 e^-t) / (3 e^t + 19 + 2 e^-t) = 0.2 -> 2.4 e^t - 2.4 e^-t = 3.8; with x = e^t:
    # 2.4 x^2 - 3.8 x - 2.4 = 0, x = (3.8 + sqrt(14.44 + 23.04)) / 4.8 = 2.067102
    x = (3.8 + math.sqrt(3.8 ** 2 + 4 * 2.4 * 2.4)) / 4.8
    assert w[0] / w[-1] == pytest.approx(x, rel=1e-6) and w[3] / w[-1] == pytest.approx(1 / x, rel=1e-6)
    assert tilt_weights(d, 1.0) is None and tilt_weights(d, -1.5) is None



def test_one_case_has_no_mde_and_the_signflip_power_by_hand():
    # one paired case: no spread to estimate, so no MDE (not the step of its one difference)
    one = estimate([0.0], [1.0])
    assert one.mde is None and one.n_for_delta is None and one.short() == "MDE n/a (1 cases)"
    # the sign-flip variant (reference only): mu 0.1, sd 0.5, n 100: half = 1.959964 sqrt(0.26) = 0.999389;
    # Phi((1 - 0.999389) / 0.5) + Phi((-1 - 0.999389) / 0.5) = Phi(0.001222) + Phi(-3.998778) = 0.500519
    assert predicted_power_signflip(0.1, 0.5, 100) == pytest.approx(0.500519, abs=2e-6)


def test_continuity_step_other_than_one_and_a_unit_spread_by_hand():
    # step 0.5 (recall of two-evidence cases, every difference ±0.5), sd 0.3, Δ 0.1: k = 2.801585 x 0.3 = 0.840476;
    # x = (k + sqrt(k^2 + 4 x 0.1 x 0.5)) / (2 x 0.1) = (0.840476 + 0.952050) / 0.2 = 8.962627, n = 80.33 -> 81
    assert n_needed(0.3, 0.1, step=0.5) == 81
    # sd exactly 1: Phi(1 - 1.959964) + Phi(-1 - 1.959964) = Phi(-0.959964) + Phi(-2.959964) = 0.170075
    assert predicted_power(0.1, 1.0, 100) == pytest.approx(0.170075, abs=2e-6)
