"""How large a difference a golden set can detect (pure functions).

A comparison that is "not significant" means either "no difference" or "too few cases to tell".
These functions say which, from the paired per-case differences ``d = b - a`` of the two runs:

* the **minimum detectable effect** (MDE): the smallest true mean difference the paired test would
  find significant (two-sided, level ``alpha``) with probability ``power``, on this many cases with
  this spread of per-case differences;
* the **cases needed** to detect a given difference (the one observed, or one the user names).

Which formula, and why. The paired z-test's:

    MDE = (z_{1-alpha/2} + z_{power}) * sd(d) / sqrt(n),     n = ((z_{1-alpha/2} + z_{power}) * sd(d) / delta)^2

and its power ``Phi(|mu| sqrt(n) / sd - z_{1-alpha/2})`` (plus the negligible other tail). The tool's
test is the paired randomization test (sign flips of the ``d_i``,
:func:`rag_experiments.stats.paired.paired_permutation_test`), not a z-test, so the formula was checked
against that test by simulation (``tools/power_simulation.py``: samples of the demo's real per-case
differences, five pairs, at the sizes the formula gives power 0.5, 0.8 and 0.95, 2,000 samples each,
the tool's own test on each): the measured power was within 4.2 points of this formula at all 15
sizes, most within 2. A version that models the sign-flip test's null spread
``sum(d_i^2) = n (sd^2 + mu^2)`` widening with the effect (:func:`mde_signflip`,
:func:`predicted_power_signflip`) was conservative (the measured power up to 6 points higher): the
correlation between the sum and its permutation spread gives that power back. So the tool reports the z-test formula, with one correction: when every non-zero
difference has the same size (hit@k; recall of one-evidence cases) the test is a sign test on a
coarse lattice and the MDE grows by ``step / n`` (:func:`lattice_step`; without it such a pool's
prediction was 8 points too high at 125 cases, with it within 1).

Assumptions: the cases are a random sample of the cases the system will meet, and a shift of the
mean leaves the spread of the per-case differences as observed. Holm's correction across several
runs compared at once makes the first test stricter (alpha / k): its MDE is larger than the one
given here at ``alpha``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np

from .paired import paired_permutation_test

ALPHA = 0.05
POWER = 0.8

_N = NormalDist()


def _z(alpha: float, power: float) -> tuple[float, float]:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power}")
    return _N.inv_cdf(1 - alpha / 2), _N.inv_cdf(power)


def mde(sd: float, n: int, alpha: float = ALPHA, power: float = POWER, step: float = 0.0) -> float | None:
    """The paired z-test's MDE ``(z_{1-alpha/2} + z_power) sd / sqrt(n)`` (+ ``step / n``, the continuity
    correction of a sign test: see :func:`lattice_step`); None without cases."""
    za, zb = _z(alpha, power)
    if n <= 0:
        return None
    return (za + zb) * sd / math.sqrt(n) + step / n


def mde_signflip(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The sign-flip test's MDE ``sd (sqrt(n) z_b + z_a sqrt(n + z_b^2 - z_a^2)) / (n - z_a^2)``:
    the smallest true mean difference found significant at ``alpha`` with probability ``power``.
    None when ``n <= z_a^2`` (about 4 cases at alpha 0.05). Conservative against the tool's test in the
    simulation (measured power 1 to 6 points above its prediction): kept for reference, not used."""
    za, zb = _z(alpha, power)
    if n <= za * za:
        return None
    return sd * (math.sqrt(n) * zb + za * math.sqrt(n + zb * zb - za * za)) / (n - za * za)


def n_needed(sd: float, delta: float, alpha: float = ALPHA, power: float = POWER, step: float = 0.0) -> int | None:
    """Cases the paired z-test needs to detect ``delta``: ``ceil(((z_a + z_b) sd / delta)^2)``; with a
    continuity ``step`` the root ``x = sqrt(n)`` of ``|delta| x^2 - (z_a + z_b) sd x - step = 0``."""
    za, zb = _z(alpha, power)
    if delta == 0:
        return None
    delta = abs(delta)
    if step:
        k = (za + zb) * sd
        x = (k + math.sqrt(k * k + 4 * delta * step)) / (2 * delta)
        return max(1, math.ceil(x * x - 1e-9))
    return max(1, math.ceil(((za + zb) * sd / delta) ** 2 - 1e-9))


def lattice_step(d: Sequence[float]) -> float:
    """The continuity correction of the randomization test on these differences: when every non-zero
    ``|d_i|`` is the same ``c`` (a hit@k, or recall of one-evidence cases: wins and losses of 1), the test
    is a sign test whose sum moves in steps of ``2c``, and counting ties as extreme raises its threshold by
    about half a step; the MDE then grows by ``c / n``. In the simulation this took a ±1 pool's prediction
    from 8 points above the measured power (at 125 cases) to within 1. Mixed magnitudes (nDCG, MRR, recall
    of several spans): 0, the lattice is fine enough."""
    x = np.abs(np.asarray(d, dtype=float))
    x = x[x > 1e-12]
    if len(x) == 0 or not np.allclose(x, x[0], rtol=0, atol=1e-9):
        return 0.0
    return float(x[0])


def n_needed_signflip(sd: float, delta: float, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """Cases the sign-flip test needs to detect a true mean difference ``delta`` with probability
    ``power``: ``ceil(((z_b sd + z_a sqrt(sd^2 + delta^2)) / delta)^2)``. None for ``delta == 0``."""
    za, zb = _z(alpha, power)
    if delta == 0:
        return None
    delta = abs(delta)
    return max(1, math.ceil(((zb * sd + za * math.sqrt(sd * sd + delta * delta)) / delta) ** 2 - 1e-9))


def predicted_power_signflip(mu: float, sd: float, n: int, alpha: float = ALPHA) -> float:
    """Probability that the sign-flip test finds a true mean difference ``mu`` significant on ``n``
    cases whose differences spread with ``sd`` (normal approximation, both tails)."""
    za = _N.inv_cdf(1 - alpha / 2)
    if n <= 0:
        return 0.0
    if sd == 0:
        return 1.0 if mu != 0 else 0.0
    half = za * math.sqrt(sd * sd + mu * mu)
    root = math.sqrt(n)
    return _N.cdf((mu * root - half) / sd) + _N.cdf((-mu * root - half) / sd)


def predicted_power(mu: float, sd: float, n: int, alpha: float = ALPHA, step: float = 0.0) -> float:
    """Probability that a true mean difference ``mu`` is found significant on ``n`` cases whose
    differences spread with ``sd`` (the paired z-test's, with a sign test's continuity ``step``; checked
    against the tool's test by simulation).

    The test rejects when ``|mean d| > z sd / sqrt(n) + step / n`` (``z = z_{1-alpha/2}``): the step
    raises the threshold on *both* tails, so with ``s = |mu| sqrt(n) / sd`` and ``c = step / (sqrt(n) sd)``
    the power is ``Phi(s - c - z) + Phi(-s - c - z)``. (Subtracting ``c`` on the far tail, as before,
    gave 0.1045 at ``mu = 0``, sd 0.3, n 24, step 1, above alpha, and a power that fell as ``mu`` grew.)
    At ``mu = 0`` this is ``2 Phi(-c - z) <= alpha``, and it grows with ``|mu|``."""
    za = _N.inv_cdf(1 - alpha / 2)
    if n <= 0:
        return 0.0
    if sd == 0:
        return 1.0 if mu != 0 else 0.0
    shift = abs(mu) * math.sqrt(n) / sd
    continuity = step / (math.sqrt(n) * sd)
    return _N.cdf(shift - continuity - za) + _N.cdf(-shift - continuity - za)


@dataclass(frozen=True)
class PowerEstimate:
    """What one pair of runs on these cases could detect (see the module docstring)."""

    n: int  # paired cases
    delta: float  # observed mean difference b - a
    sd: float  # sample standard deviation of the per-case differences (ddof 1)
    mde: float | None  # smallest detectable |delta| at alpha/power; None: no case differs, or too few cases
    n_for_delta: int | None  # cases that would detect the observed delta; None when it is 0
    alpha: float = ALPHA
    power: float = POWER
    differing: int = 0  # cases whose values differ
    step: float = 0.0  # the sign test's continuity correction (lattice_step); 0 for mixed magnitudes

    def n_for(self, delta: float) -> int | None:
        """Cases that would detect ``delta`` with this spread (None: ``delta`` 0 or no spread known)."""
        if self.differing == 0:
            return None
        return n_needed(self.sd, delta, self.alpha, self.power, self.step)

    def short(self) -> str:
        """'MDE 0.047, n≈1,900 for Δ' (a table cell) or 'MDE n/a (no case differs)'."""
        if self.mde is None:
            return "MDE n/a (no case differs)" if self.differing == 0 else f"MDE n/a ({self.n} cases)"
        text = f"MDE {self.mde:.3f}"
        if self.n_for_delta is not None:
            text += f", n≈{_count(self.n_for_delta)} for Δ"
        return text

    def sentence(self) -> str:
        """One plain sentence for a refusal or a gate line."""
        if self.mde is None:
            if self.differing == 0:
                return "no case differs, so the smallest detectable difference cannot be estimated"
            return f"{self.n} cases are too few to detect any difference"
        text = (f"these {self.n} cases could detect |Δ| >= {self.mde:.3f} (α {self.alpha:g}, power "
                f"{self.power:g})")
        if self.n_for_delta is not None:
            text += f"; about {_count(self.n_for_delta)} cases would detect the Δ{self.delta:+.3f} observed"
        return text


def _count(n: int) -> str:
    return f"{n:,}" if n < 100_000 else f"{n:.1e}"


def estimate(a: Sequence[float], b: Sequence[float], alpha: float = ALPHA, power: float = POWER) -> PowerEstimate:
    """The :class:`PowerEstimate` of two aligned per-case arrays (``a`` baseline, ``b`` candidate)."""
    d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    n = len(d)
    differing = int(np.count_nonzero(np.abs(d) > 1e-12))
    delta = float(d.mean()) if n else 0.0
    sd = float(d.std(ddof=1)) if n > 1 else 0.0
    if differing == 0 or n < 2:
        return PowerEstimate(n, delta, sd, None, None, alpha, power, differing)
    step = lattice_step(d)
    n_obs = n_needed(sd, delta, alpha, power, step) if abs(delta) > 1e-12 else None
    return PowerEstimate(n, delta, sd, mde(sd, n, alpha, power, step), n_obs, alpha, power, differing, step)


def simulated_power(d_pool: Sequence[float], n: int, reps: int = 1000, seed: int = 0, alpha: float = ALPHA,
                    n_resamples: int = 2000, test_seed: int = 13, weights: Sequence[float] | None = None) -> float:
    """Share of ``reps`` samples of ``n`` per-case differences drawn with replacement from ``d_pool``
    that the tool's own test (:func:`.paired.paired_permutation_test`) finds significant at ``alpha``:
    the measured power, to hold against :func:`predicted_power` with the pool's mean and spread
    (``np.std(d_pool)``: the resampled population's). Seeded, so the same call gives the same share.
    ``weights``: draw the pool's values with these probabilities (:func:`tilt_weights`) instead of
    uniformly."""
    pool = np.asarray(d_pool, dtype=float)
    if len(pool) == 0 or n <= 0 or reps <= 0:
        raise ValueError("simulated_power needs a non-empty pool, n > 0 and reps > 0")
    rng = np.random.default_rng(seed)
    zeros = np.zeros(n)
    hits = 0
    for _ in range(reps):
        pick = rng.integers(0, len(pool), size=n) if weights is None else rng.choice(len(pool), size=n, p=weights)
        d = pool[pick]
        hits += paired_permutation_test(zeros, d, n_resamples=n_resamples, seed=test_seed) < alpha
    return hits / reps


#: below this many cases that differ, the normal approximation of :func:`predicted_power` is not to be
#: trusted: the randomization test only sees the differing cases, and on few of them (n = 24, most tied)
#: it moves in coarse steps (the demo's recall@5: 0.314 predicted, 0.228 measured by simulated_power)
FEW_DIFFERING = 30


def tilt_weights(d: Sequence[float], target: float) -> np.ndarray | None:
    """Probabilities ``w_i ∝ exp(theta d_i)`` over the observed differences whose weighted mean is
    ``target`` (an exponential tilt: the draw closest to the observed one, same values, same ties
    possible, that has the mean asked for). ``theta = 0`` when ``target`` is the observed mean. None when
    ``target`` lies outside ``(min d, max d)``: no reweighting of these values reaches it."""
    x = np.asarray(d, dtype=float)
    lo_d, hi_d = float(x.min()), float(x.max())
    if not lo_d < target < hi_d:
        return None

    def tilted(theta: float) -> tuple[float, np.ndarray]:
        w = np.exp(theta * (x - (hi_d if theta > 0 else lo_d)))  # shifted: no overflow
        w /= w.sum()
        return float(w @ x), w

    lo, hi = -1.0, 1.0
    while tilted(lo)[0] > target:
        lo *= 2
    while tilted(hi)[0] < target:
        hi *= 2
    for _ in range(200):  # bisection: the tilted mean grows with theta
        mid = (lo + hi) / 2
        if tilted(mid)[0] < target:
            lo = mid
        else:
            hi = mid
    return tilted((lo + hi) / 2)[1]
