"""Percentile bootstrap confidence intervals over cases (seeded, so reproducible).

Resample the cases of a run with replacement ``samples`` times, take the metric's mean in
each resample, and report the 2.5th and 97.5th percentiles (a 95% interval). Segments are
resampled within the segment (evaluation.intervals names them as a run logs them).
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
    if len(values) == 1 or samples <= 0:
        v = float(values.mean())
        return (v, v)
    means = values[_resample_indices(len(values), samples, seed)].mean(axis=1)
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])  # one sort for both bounds; the same values
    return (float(low), float(high))
