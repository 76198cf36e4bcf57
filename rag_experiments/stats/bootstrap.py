"""Percentile bootstrap confidence intervals over cases (seeded, so reproducible).

Resample the cases of a run with replacement ``samples`` times, take the metric's mean in
each resample, and report the 2.5th and 97.5th percentiles (a 95% interval). Segments are
resampled within the segment (evaluation.intervals names them as a run logs them).

At the edge the bootstrap has nothing to resample: when every case scores 1 (or every case 0), as a
small or saturated segment's hit@k or recall@k does, every resample has the same mean and the
percentile interval is [1.0, 1.0], a claim of certainty 33 cases cannot make. There the interval is
the exact (Clopper-Pearson) one of a proportion: ``[(alpha/2)^(1/n), 1]`` for n hits of n (33 of 33:
[0.894, 1.0]) and ``[0, 1 - (alpha/2)^(1/n)]`` for none, what ``scipy.stats.binomtest(k, n)
.proportion_ci(method="exact")`` gives. Elsewhere the bootstrap's interval stands.
"""

from __future__ import annotations

import functools

import numpy as np


@functools.lru_cache(maxsize=32)
def _resample_indices(n: int, samples: int, seed: int) -> np.ndarray:
    """The same draws for every metric of a segment (and every sweep point): what
    ``default_rng(seed).integers`` gives, computed once (read-only, shared)."""
    idx = np.random.default_rng(seed).integers(0, n, size=(samples, n))
    idx.setflags(write=False)
    return idx


def bootstrap_interval(values: np.ndarray, samples: int = 1000, seed: int = 13,
                       level: float = 0.95) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return (float("nan"), float("nan"))
    edge = proportion_at_edge(values, level)
    if edge is not None:
        return edge
    if len(values) == 1 or samples <= 0:
        v = float(values.mean())
        return (v, v)
    means = values[_resample_indices(len(values), samples, seed)].mean(axis=1)
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])  # one sort for both bounds; the same values
    return (float(low), float(high))


def proportion_at_edge(values: np.ndarray, level: float = 0.95) -> tuple[float, float] | None:
    """The exact (Clopper-Pearson) interval of a proportion when every value is 1, or every value is 0;
    None otherwise (values that vary, or a constant that is not 0 or 1: the bootstrap's case)."""
    n = len(values)
    if n == 0 or not 0 < level < 1:
        return None
    tail = (1 - level) / 2
    if bool(np.all(values == 1.0)):
        return (float(tail ** (1 / n)), 1.0)
    if bool(np.all(values == 0.0)):
        return (0.0, float(1 - tail ** (1 / n)))
    return None
