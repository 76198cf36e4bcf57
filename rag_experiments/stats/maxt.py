"""Tests that know how many points were tried: Westfall-Young single-step max-T, paired by case.

A sweep of N points selects the best one and then asks two questions: "does the best beat the
champion?" and "which points are worse than the best?". Testing the selected point as if it were
the only one is optimistic: under a null where no point differs from the champion, the best of 50
reaches p < 0.05 about a third of the time (tools/null_sweep_simulation.py). The single-step
max-T procedure (Westfall & Young 1993, *Resampling-Based Multiple Testing*, Wiley, ch. 2; the
"maxT" adjusted p-values of algorithm 2.8) compares each observed statistic with the
distribution of the **maximum** statistic over the whole family under the null:

    p_adj(k) = P( max_j |Z*_j| >= |z_k| )

which controls the family-wise error rate at alpha whatever point ends up selected: a selected
point is one of the family, and the family's max is what the threshold is taken from.

How the null is resampled. Column ``k`` of the family is a per-case difference (point - champion,
or point - point). Under the null each case's *vector* of differences is as likely to carry either
sign, so one sign per case is drawn and applied to every column at once (the same flips for every
point). That keeps the correlation between the points, which is large in real sweeps (neighbouring
``rrf_k`` values share most per-case values): the max of correlated statistics is smaller than the
max of independent ones, so the correction is milder than Bonferroni's when the points are alike.
Sign flips keep each case's covariance between the columns exactly; the mean's null distribution
then follows by the central limit theorem (the simulation measures the error rate it gives).

The statistic of a column is its sum of differences divided by ``sqrt(sum of squared
differences)``: the standard deviation of the sum under sign flips, the same for every flip, so
a column's scale is fixed and every point weighs the same in the max (a raw sum would let the
points that differ from the champion on many cases set the threshold for all). With one column
this is exactly :func:`.paired.paired_permutation_test`: the same sign vectors (``seed``'s
blocks), the same p-value.

Which family for "worse than the best". The best point is itself chosen from the data, so "X is
worse than the best" is tested within the family of *every pair of points*: each pair's difference
is a column, and ``p_adj`` of (best, X) is taken from the max over all N(N-1)/2 pairs. Whatever
point the data make best, the chance that any pair is called different when no point differs is
at most alpha (a Tukey-style all-pairs family; Westfall & Young 1993, section 2.7, pairwise
comparisons). A step-down refinement (algorithm 2.8's successive maxima) would be a little more
powerful; the single-step form is used because it is simple to check by enumeration and its
adjusted p-value of a pair does not depend on the order of the others.

Exactness. Cases where every column is 0 cannot change any statistic and are dropped. When the
``2**m`` sign vectors of the ``m`` remaining cases times the columns fit a budget, every vector is
enumerated and ``p_adj`` is exact (a share of ``2**m``); otherwise ``n_resamples`` random vectors
give ``(hits + 1) / (n_resamples + 1)`` (Phipson & Smyth 2010), as the single test does.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .paired import BLOCK, DEFAULT_RESAMPLES, DEFAULT_SEED, EXACT_MAX, sign_block

#: enumerate every sign vector when ``2**m * columns`` is at most this (2**24: well under a second)
EXACT_BUDGET = 1 << 24
#: columns of the family resampled at once (bounds the memory of ``resamples x columns`` sums)
_CHUNK = 512


def max_t_adjusted(diffs: np.ndarray, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                   exact_max: int = EXACT_MAX) -> np.ndarray:
    """Single-step max-T adjusted two-sided p-values, one per column of ``diffs`` (cases x columns
    of per-case differences), the same sign flip per case for every column. A column that is 0 on
    every case gets 1.0."""
    d = np.asarray(diffs, dtype=float)
    if d.ndim != 2 or d.shape[1] == 0:
        raise ValueError(f"per-case differences must be a cases x columns array, got shape {d.shape}")
    if not np.isfinite(d).all():
        raise ValueError("per-case differences must be finite (a NaN usually means a case missing from one run)")
    d = d[(d != 0.0).any(axis=1)]
    out = np.ones(d.shape[1])
    scale = np.sqrt((d * d).sum(axis=0))
    live = scale > 0
    if not live.any():
        return out
    d, scale = d[:, live], scale[live]
    observed = np.abs(d.sum(axis=0)) / scale
    # the tolerance of the single test (1e-9 of sum|d|), on this scale: float summation order never decides a tie
    threshold = observed - 1e-9 * np.abs(d).sum(axis=0) / scale
    m = d.shape[0]
    if m <= exact_max and (1 << m) * d.shape[1] <= EXACT_BUDGET:
        maxima = _null_maxima_exact(d, scale)
        hits = (maxima[:, None] >= threshold[None, :]).sum(axis=0)
        out[live] = np.minimum(1.0, hits / float(1 << m))
        return out
    if n_resamples <= 0:
        raise ValueError(f"n_resamples must be > 0, got {n_resamples}")
    maxima = _null_maxima_sampled(d, scale, n_resamples, seed)
    hits = (maxima[:, None] >= threshold[None, :]).sum(axis=0)
    out[live] = np.minimum(1.0, (hits + 1) / (n_resamples + 1))
    return out


def _null_maxima_exact(d: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """max_k |s . d_k| / scale_k for every one of the 2**m sign vectors s (vector ``v``'s bit ``i``
    is case ``i``'s sign), enumerated in chunks."""
    m = d.shape[0]
    bits = np.arange(m)
    out = np.empty(1 << m)
    step = 1 << 14
    for start in range(0, 1 << m, step):
        v = np.arange(start, min(start + step, 1 << m))
        signs = 1.0 - 2.0 * ((v[:, None] >> bits[None, :]) & 1)
        out[start:start + len(v)] = np.abs(signs @ d / scale).max(axis=1)
    return out


def _null_maxima_sampled(d: np.ndarray, scale: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The same maxima for ``n_resamples`` random sign vectors: the blocks of
    :func:`.paired.sign_block`, so one column gives the single test's resampled sums exactly."""
    m = d.shape[0]
    maxima = np.zeros(n_resamples)
    for start in range(0, d.shape[1], _CHUNK):
        cols = d[:, start:start + _CHUNK]
        sums = np.zeros((n_resamples, cols.shape[1]))
        for k in range(0, (m + BLOCK - 1) // BLOCK):
            part = cols[k * BLOCK:(k + 1) * BLOCK]
            sums += sign_block(seed, n_resamples, k)[:, :len(part)] @ part
        np.maximum(maxima, np.abs(sums / scale[start:start + _CHUNK]).max(axis=1), out=maxima)
    return maxima


def against_control(control: Sequence[float], points: np.ndarray, n_resamples: int = DEFAULT_RESAMPLES,
                    seed: int = DEFAULT_SEED, exact_max: int = EXACT_MAX) -> np.ndarray:
    """Adjusted p of every point against the control (the champion): ``points`` is cases x points,
    aligned by case with ``control``. "The best of N beats the champion" reads the best point's entry."""
    x = _matrix(points)
    c = np.asarray(control, dtype=float)
    if c.shape != (x.shape[0],):
        raise ValueError(f"control has {c.size} cases, the points {x.shape[0]} (align them by case id)")
    return max_t_adjusted(x - c[:, None], n_resamples, seed, exact_max)


def all_pairs(points: np.ndarray, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
              exact_max: int = EXACT_MAX) -> np.ndarray:
    """Points x points matrix of adjusted p-values, every pair's difference tested within the family
    of all N(N-1)/2 pairs (symmetric; 1.0 on the diagonal). "X is worse than the best" reads
    ``[best, X]``, valid although the best was chosen from the same data."""
    x = _matrix(points)
    n = x.shape[1]
    out = np.ones((n, n))
    if n < 2:
        return out
    left, right = np.triu_indices(n, k=1)
    rows = x[(x != x[:, :1]).any(axis=1)]  # a case where every point has the same value changes no pair
    if rows.shape[0] <= exact_max and (1 << rows.shape[0]) * len(left) <= EXACT_BUDGET:
        p = max_t_adjusted(x[:, left] - x[:, right], n_resamples, seed, exact_max)
    else:
        p = _all_pairs_sampled(rows, left, right, n_resamples, seed)
    out[left, right] = out[right, left] = p
    return out


def _all_pairs_sampled(rows: np.ndarray, left: np.ndarray, right: np.ndarray, n_resamples: int,
                       seed: int) -> np.ndarray:
    """:func:`max_t_adjusted` of the pair columns ``rows[:, left] - rows[:, right]`` on its sampled
    path (the same sign blocks, so the same p-values), without building the N(N-1)/2 columns: a flip's
    sum of a pair's differences is the difference of the two points' flipped sums, so one
    resamples x points product serves every pair (100 points: 4,950 pairs, ~10x faster)."""
    if n_resamples <= 0:
        raise ValueError(f"n_resamples must be > 0, got {n_resamples}")
    gram = rows.T @ rows
    sq = np.diag(gram)
    scale = np.sqrt(np.maximum(sq[left] + sq[right] - 2 * gram[left, right], 0.0))
    totals = rows.sum(axis=0)
    absolute = np.abs(rows).sum(axis=0)
    p = np.ones(len(left))
    live = scale > 0
    if not live.any():
        return p
    left, right, scale = left[live], right[live], scale[live]
    observed = np.abs(totals[left] - totals[right]) / scale
    threshold = observed - 1e-9 * (absolute[left] + absolute[right]) / scale
    m = rows.shape[0]
    sums = np.zeros((n_resamples, rows.shape[1]))
    for k in range(0, (m + BLOCK - 1) // BLOCK):
        part = rows[k * BLOCK:(k + 1) * BLOCK]
        sums += sign_block(seed, n_resamples, k)[:, :len(part)] @ part
    maxima = np.zeros(n_resamples)
    for start in range(0, len(left), _CHUNK):
        a, b = left[start:start + _CHUNK], right[start:start + _CHUNK]
        np.maximum(maxima, (np.abs(sums[:, a] - sums[:, b]) / scale[start:start + _CHUNK]).max(axis=1), out=maxima)
    hits = (maxima[:, None] >= threshold[None, :]).sum(axis=0)
    p[live] = np.minimum(1.0, (hits + 1) / (n_resamples + 1))
    return p


def _matrix(points) -> np.ndarray:
    x = np.asarray(points, dtype=float)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"points must be a cases x points array with both > 0, got shape {x.shape}")
    return x


def simultaneous_intervals(points: np.ndarray, level: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES,
                           seed: int = DEFAULT_SEED) -> list[tuple[float, float]]:
    """Each point's mean with an interval that holds for all points at once (so also for the one
    chosen as best): ``mean_j ± q * sqrt(sum_i (x_ij - mean_j)^2) / n``, where ``q`` is the ``level``
    quantile of the max over points of the centred sums' standardised values under the same sign flip
    per case (the max-T null of :func:`max_t_adjusted` applied to each point's deviations from its
    own mean). With one point ``q`` is about 1.96: the usual normal interval; with many, wider."""
    x = _matrix(points)
    n = x.shape[0]
    means = x.mean(axis=0)
    d = x - means
    scale = np.sqrt((d * d).sum(axis=0))
    live = scale > 0
    if not live.any():
        return [(float(m), float(m)) for m in means]
    rows = d[:, live]
    m = rows.shape[0]
    if m <= EXACT_MAX and (1 << m) * rows.shape[1] <= EXACT_BUDGET:
        maxima = _null_maxima_exact(rows, scale[live])
    else:
        maxima = _null_maxima_sampled(rows, scale[live], n_resamples, seed)
    q = float(np.quantile(maxima, level))
    half = q * scale / n
    return [(float(mu - h), float(mu + h)) for mu, h in zip(means, half)]
