"""What a sweep's selection procedure delivers, estimated out of fold when no cases were held out.

Choosing the best of N points and reporting its value on the cases it was chosen on is optimistic:
the best of N is partly luck (Cawley & Talbot 2010, "On over-fitting in model selection and
subsequent selection bias in performance evaluation", JMLR 11). A frozen dev/test split
(:mod:`rag_experiments.golden.split`) is the cure; a small golden set cannot spare a third of its
cases, so this module gives the k-fold alternative, computed from the per-case values every sweep
point already logged (nothing is re-run):

* the cases are dealt into ``k`` folds (:func:`stratified_folds`);
* for each fold, the point is chosen on the **other** folds' cases with the caller's rule (the sweep's
  one tie rule, :func:`rag_experiments.tracking.sweep_parent.best_of`, passed in as ``choose``), and
  that point's per-case values on the held-out fold are kept;
* the kept values of all folds together (one value per case, each measured on a case that took no
  part in its choice) are the **out-of-fold** estimate of "choose the best point, then use it", with
  the project's bootstrap interval over cases (:func:`.bootstrap.bootstrap_interval`).

It estimates the procedure, not one point: different folds may choose different points, and how many
folds chose each point (:attr:`KFoldSelection.chosen`) says how stable the choice is. The in-sample
best (the point chosen on every case, its mean on those cases) minus the out-of-fold value is the
**optimism** of reporting the in-sample best. The interval treats the out-of-fold values as one
sample of cases; it leaves out the variation of the fold assignment itself (a known simplification
of cross-validated intervals: Bates, Hastie & Tibshirani 2023, "Cross-validation: what does it
estimate and how well does it do it?", JASA), so read it as a guide, not an exact 95%.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .bootstrap import bootstrap_interval

#: the number of folds when none is asked for
DEFAULT_FOLDS = 5
#: fewer held-out cases than this per fold leave a fold's value to one case: refused
MIN_PER_FOLD = 2


def stratified_folds(strata: Sequence[str], order: Sequence[float], k: int) -> np.ndarray:
    """Each case's fold in ``0..k-1``: the cases sorted by (stratum, ``order``, position) and dealt
    round-robin, the count running on across strata, so every stratum is spread over the folds as
    evenly as it can be and fold sizes differ by at most one. ``order`` is a seeded per-case number
    (the golden split's ``unit(seed, case id)``), which makes the folds a function of the case ids."""
    if k < 2:
        raise ValueError(f"k-fold needs at least 2 folds, got {k}")
    if len(strata) != len(order):
        raise ValueError(f"one stratum per case: {len(strata)} strata for {len(order)} cases")
    ranked = sorted(range(len(order)), key=lambda i: (str(strata[i]), float(order[i]), i))
    folds = np.empty(len(order), dtype=int)
    folds[ranked] = np.arange(len(ranked)) % k
    return folds


def first_best(maximize: bool = True) -> Callable[[np.ndarray], int]:
    """The default rule: the point with the highest (lowest) mean; a tie goes to the first point.
    (:func:`rag_experiments.tracking.sweep_parent.best_of` is the same rule for points in sweep order.)"""
    def choose(means: np.ndarray) -> int:
        top = means.max() if maximize else means.min()
        return int(np.flatnonzero(np.abs(means - top) <= 1e-12)[0])
    return choose


@dataclass(frozen=True)
class KFoldSelection:
    """The out-of-fold estimate of a selection procedure over ``points`` points on ``n_cases`` cases."""

    k: int
    n_cases: int
    points: int
    chosen: tuple[int, ...]  # the point each fold chose (on the other folds), fold 0 first
    out_of_fold: float  # the mean of the held-out values: what choosing-then-using delivers
    interval: tuple[float, float]  # its bootstrap interval over the cases
    in_sample_choice: int  # the point chosen on every case
    in_sample_best: float  # that point's mean on every case (the value a sweep reports without a split)
    maximize: bool = True

    @property
    def optimism(self) -> float:
        """How much better the in-sample best looks than what the procedure delivers out of fold
        (positive when the in-sample value flatters; for a minimised metric, the in-sample value lower)."""
        gap = self.in_sample_best - self.out_of_fold
        return gap if self.maximize else -gap

    def stability(self) -> list[tuple[int, int]]:
        """(point, number of folds that chose it), most chosen first, then in point order."""
        return sorted(Counter(self.chosen).items(), key=lambda pc: (-pc[1], pc[0]))


def out_of_fold_selection(values: np.ndarray, folds: Sequence[int],
                          choose: Callable[[np.ndarray], int] | None = None, maximize: bool = True,
                          samples: int = 1000, seed: int = 13) -> KFoldSelection:
    """The k-fold estimate for ``values`` (cases x points: each point's per-case metric on the same
    cases) and ``folds`` (each case's fold, ``0..k-1``, e.g. :func:`stratified_folds`). ``choose`` maps
    the points' means on some cases to the chosen point's index (default :func:`first_best`); the
    caller's tie rule goes here. Raises ValueError for a fold with fewer than :data:`MIN_PER_FOLD` cases."""
    v = np.asarray(values, dtype=float)
    f = np.asarray(folds, dtype=int)
    if v.ndim != 2 or v.shape[1] == 0 or v.shape[0] != len(f):
        raise ValueError(f"values must be cases x points with one fold per case, got {v.shape} and {len(f)} folds")
    if not np.isfinite(v).all():
        raise ValueError("per-case values must be finite (a NaN usually means a case missing from one point)")
    choose = choose or first_best(maximize)
    k = int(f.max()) + 1
    sizes = np.bincount(f, minlength=k)
    if k < 2 or sizes.min() < MIN_PER_FOLD:
        raise ValueError(f"every one of at least 2 folds needs {MIN_PER_FOLD} cases or more, got fold sizes "
                         f"{sizes.tolist()}")
    held = np.empty(len(f))
    chosen = []
    for fold in range(k):
        out = f == fold
        j = int(choose(v[~out].mean(axis=0)))
        chosen.append(j)
        held[out] = v[out, j]
    best = int(choose(v.mean(axis=0)))
    return KFoldSelection(k, len(f), v.shape[1], tuple(chosen), float(held.mean()),
                          bootstrap_interval(held, samples, seed), best, float(v[:, best].mean()), maximize)
