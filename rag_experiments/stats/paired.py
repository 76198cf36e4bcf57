"""Paired comparisons of two runs over the same golden cases (pure functions, seeded).

Every function takes two arrays of per-case metric values aligned by case id: ``a`` is the
baseline (control, champion), ``b`` the candidate (treatment). Differences are ``b - a``, so
a positive delta means the candidate is better.

Why these tests. Retrieval metrics per case are bounded, discrete and far from normal (recall@5
of a one-evidence case is 0 or 1), and golden sets are small, so we avoid Student's t. The
paired randomization test (Fisher's, the "permutation test" of Smucker, Allan & Carterette,
*A Comparison of Statistical Significance Tests for Information Retrieval Evaluation*, CIKM
2007; ``ranx.compare(..., stat_test="fisher")``; trec_tools' randomization test) assumes only
that, under the null hypothesis "the two systems are interchangeable", the label of each case's
pair of scores can be swapped: each per-case difference is equally likely to carry either sign.
Several metrics or several runs compared with one baseline are a family of tests: correct them
with :func:`holm`.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import NamedTuple, Sequence

import numpy as np

from ..errors import UserError
from .bootstrap import bootstrap_interval

#: Above this many non-zero differences the test samples sign flips instead of enumerating
#: all ``2**m`` of them (2**20 = 1,048,576 sign vectors: well under a second).
EXACT_MAX = 20

#: The one place the paired tests' resamples and seed are set: every command (compare, promote,
#: gate) and the sweep parent's summary use these unless told otherwise, so the parent's table and
#: ``rag-exp compare --sweep`` print the same p-values. ``RAG_EXP_RESAMPLES`` / ``RAG_EXP_SEED``
#: change them for every command at once; the sweep parent records what it used
#: (tags ``paired_test.resamples`` / ``paired_test.seed``) and ``compare --sweep`` reads them back.
DEFAULT_RESAMPLES = 10000
DEFAULT_SEED = 13
RESAMPLES_ENV, SEED_ENV = "RAG_EXP_RESAMPLES", "RAG_EXP_SEED"


def test_settings(resamples: int | None = None, seed: int | None = None) -> tuple[int, int]:
    """(resamples, seed) of the paired tests: the arguments when given, else the environment's
    ``RAG_EXP_RESAMPLES`` / ``RAG_EXP_SEED``, else 10000 and 13."""
    def read(value, env, default, minimum):
        source = "the paired test's " + ("resamples" if env == RESAMPLES_ENV else "seed")
        if value is None:
            raw = os.environ.get(env, "").strip()
            if not raw:
                return default
            source = env
            try:
                value = int(raw)
            except ValueError:
                raise UserError(f"{env}={raw!r} is not an integer", hint=f"unset it or give e.g. {env}={default}")
        if value < minimum:
            raise UserError(f"{source}: {value} is below {minimum}", hint=f"e.g. {default}")
        return int(value)

    return read(resamples, RESAMPLES_ENV, DEFAULT_RESAMPLES, 1), read(seed, SEED_ENV, DEFAULT_SEED, 0)


test_settings.__test__ = False  # a function named test_*: not a pytest test

#: random sign vectors are drawn in column blocks: block ``k`` (the signs of differences
#: ``64k .. 64k+63``) comes from ``default_rng([seed, k])``, so the signs a case gets do not depend
#: on how many cases the test has, and the blocks are cached (float64, what the product needs) up
#: to a budget: a sweep summary runs ~1,000 tests with the same seed and resamples, and drawing
#: the signs was ~95% of a test's time (10 ms of 10.4 ms at 230 cases, 10,000 resamples)
BLOCK = 64
_BLOCK_CACHE: OrderedDict[tuple[int, int, int], np.ndarray] = OrderedDict()
_BLOCK_CACHE_BYTES = 96 << 20


def _paired(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError("per-case values must be one-dimensional arrays")
    if x.shape != y.shape:
        raise ValueError(f"paired arrays differ in length: {len(x)} vs {len(y)} (align them by case id)")
    if len(x) == 0:
        raise ValueError("no cases to compare")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("per-case values must be finite (a NaN usually means a case missing from one run)")
    return y - x


def paired_permutation_test(a: Sequence[float], b: Sequence[float], n_resamples: int = DEFAULT_RESAMPLES,
                            seed: int = DEFAULT_SEED, exact_max: int = EXACT_MAX) -> float:
    """Two-sided p-value of Fisher's paired randomization test for ``mean(b) - mean(a)``.

    Statistic: ``|sum(d)|`` with ``d = b - a`` per case (equivalently ``|mean(b) - mean(a)|``, the
    statistic of ranx's ``fisher_randomization_test``). Under the null hypothesis every ``d_i`` is
    as likely to be ``-d_i``: the p-value is the share of sign assignments whose statistic is at
    least the observed one.

    * Cases with ``d_i = 0`` cannot change the statistic and are left out of the enumeration.
    * With ``m <= exact_max`` non-zero differences every one of the ``2**m`` sign vectors is
      enumerated: the p-value is exact (and at least ``2 / 2**m``).
    * Otherwise ``n_resamples`` random sign vectors are drawn (seeded: ``default_rng([seed, k])``
      for the k-th block of 64 differences, so the result is reproducible) and ``p = (hits + 1) / (n_resamples + 1)`` (the observed
      assignment counts as one of the draws: a valid p-value, never 0; Phipson & Smyth 2010).
      ranx reports ``hits / n_permutations``; the two differ by at most ``1 / n_resamples``.
    * Identical runs (all differences zero) give exactly ``1.0``.

    Ties with the observed statistic count as "at least as extreme" with a tolerance of
    ``1e-9 * sum|d|`` so that floating-point summation order never decides a tie.
    """
    d = _paired(a, b)
    d = d[d != 0.0]
    m = len(d)
    if m == 0:
        return 1.0
    observed = abs(d.sum())
    tol = 1e-9 * float(np.abs(d).sum())
    if m <= exact_max:
        return float(min(1.0, _exact_hits(d, observed - tol) / (1 << m)))
    if n_resamples <= 0:
        raise ValueError(f"n_resamples must be > 0, got {n_resamples}")
    sums = np.zeros(n_resamples)
    for k in range(0, (m + BLOCK - 1) // BLOCK):
        part = d[k * BLOCK:(k + 1) * BLOCK]
        sums += sign_block(seed, n_resamples, k)[:, :len(part)] @ part
    hits = int(np.count_nonzero(np.abs(sums) >= observed - tol))
    return float(min(1.0, (hits + 1) / (n_resamples + 1)))


def sign_block(seed: int, n_resamples: int, k: int) -> np.ndarray:
    """``n_resamples`` x 64 random signs (+1.0 / -1.0) of column block ``k``, cached (LRU within
    ``_BLOCK_CACHE_BYTES``)."""
    key = (seed, n_resamples, k)
    block = _BLOCK_CACHE.get(key)
    if block is not None:
        _BLOCK_CACHE.move_to_end(key)
        return block
    rng = np.random.default_rng([seed, k])
    block = (rng.integers(0, 2, size=(n_resamples, BLOCK), dtype=np.int8) * 2 - 1).astype(np.float64)
    block.setflags(write=False)
    if block.nbytes <= _BLOCK_CACHE_BYTES:
        _BLOCK_CACHE[key] = block
        while sum(b.nbytes for b in _BLOCK_CACHE.values()) > _BLOCK_CACHE_BYTES:
            _BLOCK_CACHE.popitem(last=False)
    return block


def _signed_sums(x: np.ndarray) -> np.ndarray:
    """All ``2**len(x)`` sums ``sum(±x_i)``."""
    sums = np.zeros(1)
    for v in x:
        sums = np.concatenate((sums + v, sums - v))
    return sums


def _exact_hits(d: np.ndarray, threshold: float) -> int:
    """How many of the ``2**m`` sign vectors ``s`` give ``|s · d| >= threshold``.

    Meet in the middle: the signed sums of each half of ``d`` (``2**(m/2)`` each), one half
    sorted, and for every sum ``a`` of the other half a binary search counts the ``b`` with
    ``a + b >= threshold`` or ``a + b <= -threshold``. That is ``O(2**(m/2) m)`` instead of the
    ``O(2**m m)`` of enumerating every vector (m = 20: ~1 ms instead of 0.2-0.5 s, a cost a
    100-point sweep's summary paid per run and metric). The counts equal the enumeration's: the
    caller's threshold carries a tolerance of 1e-9 of ``sum|d|``, far above the float rounding
    in which the two ways of summing differ (checked on random and metric-like arrays)."""
    if threshold <= 0:
        return 1 << len(d)
    half = len(d) // 2
    left = _signed_sums(d[:half])
    right = np.sort(_signed_sums(d[half:]))
    at_least = len(right) - np.searchsorted(right, threshold - left, side="left")
    at_most = np.searchsorted(right, -threshold - left, side="right")
    return int(at_least.sum() + at_most.sum())


def paired_bootstrap_delta_ci(a: Sequence[float], b: Sequence[float], samples: int = 1000, seed: int = 13,
                              level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of ``mean(b) - mean(a)``, resampling *cases* (pairs).

    Resampling pairs, not each run separately, keeps the per-case correlation of the two runs
    (the same hard question is hard for both), which is what makes a paired interval much
    narrower than two independent intervals. Same conventions as
    :func:`rag_experiments.stats.bootstrap.bootstrap_interval`: ``samples`` resamples of all
    cases with replacement, 2.5th/97.5th percentiles for a 95% interval, seeded. Identical runs
    give ``(0.0, 0.0)``.
    """
    d = _paired(a, b)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if not d.any():
        return (0.0, 0.0)
    return bootstrap_interval(d, samples, seed, level)  # the per-case differences, resampled


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni step-down adjusted p-values, in the input order.

    Sort the ``m`` p-values ascending, ``p_(1) <= ... <= p_(m)``; the adjusted value of the
    ``i``-th is ``max_{j <= i} min(1, (m - j + 1) * p_(j))`` (the running maximum keeps the
    adjusted values monotone in the raw ones). Rejecting every hypothesis whose adjusted p is
    below ``alpha`` controls the family-wise error rate at ``alpha`` under any dependence between
    the tests, and is uniformly more powerful than plain Bonferroni. NaN entries (tests that
    could not be run) stay NaN and do not count towards ``m``.
    """
    p = np.asarray(list(pvalues), dtype=float)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    if len(valid) == 0:
        return out.tolist()
    if ((p[valid] < 0) | (p[valid] > 1)).any():
        raise ValueError(f"p-values must lie in [0, 1], got {list(pvalues)}")
    m = len(valid)
    order = valid[np.argsort(p[valid], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out.tolist()


class WinTieLoss(NamedTuple):
    """Per-case outcome counts of the candidate ``b`` against the baseline ``a``."""

    wins: int
    ties: int
    losses: int

    def __str__(self) -> str:
        return f"{self.wins}/{self.ties}/{self.losses}"


def win_tie_loss(a: Sequence[float], b: Sequence[float], eps: float = 1e-12) -> WinTieLoss:
    """Cases where ``b`` beats ``a`` by more than ``eps``, ties within ``eps``, and losses.

    The same counts as ranx's report (there seen from the control's side); ``eps`` keeps
    floating-point noise (0.1 + 0.2 vs 0.3) from being counted as a win or a loss.
    """
    d = _paired(a, b)
    wins = int(np.count_nonzero(d > eps))
    losses = int(np.count_nonzero(d < -eps))
    return WinTieLoss(wins, len(d) - wins - losses, losses)
