"""Metrics on sampled labels: inverse-probability-weighted (Horvitz-Thompson) estimates with intervals.

``rag-exp golden label --sample N`` judges a stratified random sample of a pool instead of every
pair (strata by rank; within stratum ``h`` a simple random sample of ``n_h`` of its ``N_h`` pairs,
drawn without replacement). A judged pair of stratum ``h`` then stands for ``N_h / n_h`` pairs
(its inclusion probability is ``pi_h = n_h / N_h``): a relevant pair found in the sample counts
``1 / pi_h`` times, an unjudged pair of the pool counts nothing itself. So each stratum's number
of relevant pairs is estimated from its sampled rate, ``N_h * (relevant sampled / n_h)``, which is
the Horvitz-Thompson estimate (statAP, Aslam, Pavlu & Yilmaz 2006; infAP, Yilmaz & Aslam 2006,
estimates the same quantity for AP). Labels not drawn by a sample (a case's own evidence, pairs
judged in full) have ``pi = 1``.

Recall@k of a case is a ratio, ``X_c / Y_c``: ``X_c`` = relevant units credited in the top k,
``Y_c`` = all relevant units of the case. Each is estimated by its weighted sum (:class:`Term`:
one relevant unit with its ``x`` and ``y`` contributions and its stratum); the reported value is
the mean over cases of ``X^_c / Y^_c`` (:func:`ratio_mean`). ``Y^_c >= 1`` always (a case's own
evidence is certain), and ``X^_c <= Y^_c`` (the top k is part of the pool).

**Interval** (the variance of the label sample; the cases are taken as given): the estimator is
linearised (Taylor / delta method). Its error is, to first order, the Horvitz-Thompson estimate of
``sum_i z_i`` minus its true value, with ``z_i = (x_i - theta_c y_i) / (n Y_c)`` for unit ``i`` of
case ``c`` (``n`` cases, ``theta_c = X_c / Y_c``) and ``z = 0`` for a judged non-relevant pair.
Under stratified sampling without replacement that has variance
``sum_h N_h^2 (1 - n_h / N_h) S_h^2 / n_h`` (Cochran, *Sampling Techniques*, 5.3), ``S_h^2`` the
variance of ``z`` over the stratum, estimated by its sample variance over the ``n_h`` judged pairs
(non-relevant ones as zeros) with the estimated ``theta_c`` and ``Y^_c`` plugged in. The interval
is ``value +- z_(1-alpha/2) * se`` (normal). A stratum with one judged pair has no sample variance:
its ``z^2`` is used (conservative). A stratum judged in full (``n_h = N_h``) adds nothing.

This interval says where the metric would lie had every pair of the pool been judged (what the
validation checks: ``tools/sampled_labels.py``); the case-sampling interval (the bootstrap of
:mod:`.bootstrap`) is a separate question and is reported beside it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from statistics import NormalDist
from typing import Hashable, Mapping, Sequence


@dataclass(frozen=True)
class Stratum:
    """One stratum of a sampling design: ``population`` pairs (N_h), ``sampled`` of them judged (n_h)."""

    population: int
    sampled: int

    def __post_init__(self) -> None:
        if not 0 < self.sampled <= self.population:
            raise ValueError(f"a stratum needs 0 < sampled <= population, got {self.sampled} of {self.population}")

    @property
    def inclusion(self) -> float:
        """pi_h = n_h / N_h, the probability that a pair of the stratum was judged."""
        return self.sampled / self.population

    @property
    def weight(self) -> float:
        """1 / pi_h: how many pairs of the stratum one judged pair stands for."""
        return self.population / self.sampled


@dataclass(frozen=True)
class Term:
    """One relevant labelled unit of a case: its contribution to the numerator (``x``; recall@k: 1
    when a hit in the top k is credited with it) and to the denominator (``y``; recall: 1), and the
    stratum that sampled it (``None``: judged with certainty, pi = 1)."""

    x: float
    y: float = 1.0
    stratum: Hashable | None = None


@dataclass(frozen=True)
class Estimate:
    value: float
    se: float
    low: float
    high: float
    level: float = 0.95
    df: float | None = None  # the t interval's degrees of freedom (None: a normal interval)

    def describe(self, digits: int = 3) -> str:
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def _weight(term: Term, strata: Mapping[Hashable, Stratum]) -> float:
    if term.stratum is None:
        return 1.0
    if term.stratum not in strata:
        raise KeyError(f"term of unknown stratum {term.stratum!r}")
    return strata[term.stratum].weight


def ht_total(terms: Sequence[Term], strata: Mapping[Hashable, Stratum]) -> float:
    """The Horvitz-Thompson estimate of ``sum x`` over the population: each ``x`` times 1 / pi."""
    return sum(t.x * _weight(t, strata) for t in terms)


def case_ratio(terms: Sequence[Term], strata: Mapping[Hashable, Stratum]) -> float:
    """``X^_c / Y^_c`` of one case (weighted sums). A case without terms is an error, as in evaluation."""
    y = sum(t.y * _weight(t, strata) for t in terms)
    if y <= 0:
        raise ValueError("case has no relevant evidence; every case needs at least one relevant unit")
    return sum(t.x * _weight(t, strata) for t in terms) / y


def stratified_variance(z_by_stratum: Mapping[Hashable, Sequence[float]], strata: Mapping[Hashable, Stratum]) -> float:
    """Variance estimate of the HT total of ``z`` under stratified sampling without replacement.
    ``z_by_stratum[h]``: the ``z`` of the judged pairs of ``h`` that have one (the others are 0)."""
    total = 0.0
    for key, st in strata.items():
        zs = list(z_by_stratum.get(key, ()))
        if len(zs) > st.sampled:
            raise ValueError(f"stratum {key!r}: {len(zs)} values for {st.sampled} sampled pairs")
        if st.sampled == st.population or not zs:
            continue  # judged in full, or nothing relevant was found in it: no spread to estimate
        s1, s2, n = sum(zs), sum(z * z for z in zs), st.sampled
        s_sq = (s2 - s1 * s1 / n) / (n - 1) if n > 1 else s2  # one judged pair: its z^2 (conservative)
        total += st.population ** 2 * (1 - st.sampled / st.population) * max(s_sq, 0.0) / n
    return total


def ratio_mean(cases: Sequence[Sequence[Term]], strata: Mapping[Hashable, Stratum], level: float = 0.95) -> Estimate:
    """The mean over cases of ``X^_c / Y^_c`` and its interval under the sampling design (see the
    module docstring). With no sampled term the value is the plain mean and the interval has width 0."""
    if not cases:
        nan = float("nan")
        return Estimate(nan, nan, nan, nan, level)
    n = len(cases)
    z_by: dict[Hashable, list[float]] = defaultdict(list)
    values = []
    for terms in cases:
        y = sum(t.y * _weight(t, strata) for t in terms)
        theta = case_ratio(terms, strata)
        values.append(theta)
        for t in terms:
            if t.stratum is not None:
                z_by[t.stratum].append((t.x - theta * t.y) / (n * y))
    value = sum(values) / n
    se = math.sqrt(stratified_variance(z_by, strata))
    q = NormalDist().inv_cdf(0.5 + level / 2)
    return Estimate(value, se, value - q * se, value + q * se, level)


def allocate(sizes: Mapping[Hashable, int], n: int, priority: Mapping[Hashable, float] | None = None) -> dict:
    """How many pairs to judge per stratum for a total of ``n``: sampling rates proportional to
    ``priority`` (default 1: proportional allocation), capped at the stratum's size (what a full
    stratum cannot take goes to the others), at least 2 pairs per non-empty stratum when ``n`` allows
    (a variance needs two), largest remainders for the rounding. Deterministic."""
    priority = priority or {}
    keys = [k for k in sizes if sizes[k] > 0]
    n = max(0, min(n, sum(sizes[k] for k in keys)))
    out = {k: 0 for k in sizes}
    if n == 0:
        return out
    floor = {k: min(2, sizes[k]) if n >= 2 * len(keys) else 0 for k in keys}
    left = n - sum(floor.values())
    open_keys = [k for k in keys if sizes[k] > floor[k]]
    share = {k: 0.0 for k in keys}
    while left > 1e-9 and open_keys:  # water-filling: rates prop. to priority, capped at the stratum size
        mass = sum(priority.get(k, 1.0) * (sizes[k] - floor[k]) for k in open_keys)
        rate = left / mass if mass > 0 else 0.0
        capped = [k for k in open_keys if priority.get(k, 1.0) * rate >= 1.0]
        if not capped:
            for k in open_keys:
                share[k] = priority.get(k, 1.0) * rate * (sizes[k] - floor[k])
            break
        for k in capped:
            share[k] = float(sizes[k] - floor[k])
            left -= share[k]
            open_keys.remove(k)
    whole = {k: floor[k] + int(math.floor(share[k] + 1e-9)) for k in keys}
    rest = n - sum(whole.values())
    order = sorted((k for k in keys if whole[k] < sizes[k]), key=lambda k: -(share[k] - math.floor(share[k] + 1e-9)))
    for k in order[:rest]:
        whole[k] += 1
    out.update(whole)
    return out


def ratio_mean_bootstrap(cases: Sequence[Sequence[Term]], strata: Mapping[Hashable, Stratum], *,
                         samples: int = 500, seed: int = 13, level: float = 0.95,
                         method: str = "basic") -> tuple[Estimate, dict]:
    """The mean over cases of ``X^_c / Y^_c`` with a design bootstrap interval (Rao & Wu's rescaled
    bootstrap for stratified sampling without replacement): in each replicate every stratum's judged
    pairs are drawn ``n_h - 1`` times with replacement and re-weighted so that the replicate variance
    matches the design's, finite-population correction included; the estimate is recomputed from
    the replicate weights. ``method``: ``basic`` (2 v - q_high, 2 v - q_low: corrects the ratio's
    small-sample bias as the replicates see it), ``percentile``, ``normal`` (v +- z sd)."""
    import numpy as np

    n_cases = len(cases)
    if not n_cases:
        nan = float("nan")
        return Estimate(nan, nan, nan, nan, level), {}
    point = ratio_mean(cases, strata, level)
    units = [(ci, t) for ci, terms in enumerate(cases) for t in terms]
    x = np.array([t.x for _, t in units], dtype=float)
    y = np.array([t.y for _, t in units], dtype=float)
    case_of = np.array([ci for ci, _ in units], dtype=int)
    w = np.ones((samples, len(units)))
    rng = np.random.default_rng(seed)
    by_stratum: dict[Hashable, list[int]] = defaultdict(list)
    for u, (_ci, t) in enumerate(units):
        if t.stratum is not None:
            by_stratum[t.stratum].append(u)
    for key, st in strata.items():
        cols = by_stratum.get(key, [])
        if not cols or st.sampled < 2 or st.sampled == st.population:
            for u in cols:
                w[:, u] = st.weight
            continue
        m = st.sampled - 1
        lam = math.sqrt(m * (1 - st.inclusion) / (st.sampled - 1))
        # the multiplicities of the judged pairs that hold a term (the others only count in n_h)
        counts = rng.multinomial(m, [1 / st.sampled] * st.sampled, size=samples)[:, :len(cols)]
        w[:, cols] = st.weight * (1 - lam + lam * (st.sampled / m) * counts)
    num = np.zeros((samples, n_cases))
    den = np.zeros((samples, n_cases))
    np.add.at(num.T, case_of, (w * x).T)
    np.add.at(den.T, case_of, (w * y).T)
    reps = (num / den).mean(axis=1)
    v = point.value
    alpha = (1 - level) / 2
    q_lo, q_hi = np.quantile(reps, [alpha, 1 - alpha])
    sd = float(reps.std(ddof=1)) if samples > 1 else 0.0
    if method == "basic":
        low, high = 2 * v - q_hi, 2 * v - q_lo
    elif method == "percentile":
        low, high = q_lo, q_hi
    elif method == "normal":
        z = NormalDist().inv_cdf(0.5 + level / 2)
        low, high = v - z * sd, v + z * sd
    else:
        raise ValueError(f"method must be basic, percentile or normal, got {method!r}")
    return Estimate(v, sd, float(low), float(high), level), {"replicate_mean": float(reps.mean())}


def t_quantile(level: float, df: float | None) -> float:
    """The two-sided ``level`` quantile of Student's t with ``df`` degrees of freedom (None: normal)."""
    if df is None or math.isinf(df):
        return NormalDist().inv_cdf(0.5 + level / 2)
    from scipy.special import stdtrit  # scipy comes with mlflow

    return float(stdtrit(df, 0.5 + level / 2))


def difference_mean(base: Sequence[float], deltas: Mapping[Hashable, Sequence[float]],
                    strata: Mapping[Hashable, Stratum], level: float = 0.95, interval: str = "t") -> Estimate:
    """Sampling whole cases (``--sample-unit case``): the mean over the ``n = len(base)`` cases of a
    metric, from ``base`` (each case's value on the labels every case has: the sampled judgements
    left out) plus the Horvitz-Thompson estimate of the total correction, ``deltas[h]`` the
    corrections (value with the sample's labels minus base) of the cases drawn in stratum ``h``, of
    which there are ``strata[h].sampled`` (cases drawn but not scored count as 0) out of
    ``strata[h].population``:

        value = mean(base) + (1/n) sum_h (N_h / n_h) sum_(c in s_h) delta_c

    Linear in the drawn cases, so exactly unbiased for the value with every case's pool judged, and
    its variance ``sum_h N_h^2 (1 - n_h/N_h) s_h^2 / n_h / n^2`` (``s_h^2`` the sample variance of
    the corrections, drawn-but-unscored cases as 0) is unbiased too (Cochran 5.3).

    ``interval``: ``t`` (the default) uses Student's t with Satterthwaite's degrees of freedom,
    ``(sum_h v_h)^2 / sum_h v_h^2 / (n_h - 1)`` with ``v_h`` stratum ``h``'s term of the variance
    (one stratum: ``n_h - 1``); ``normal`` uses z. The corrections are mostly 0 with a few of +-0.5,
    so with 57 drawn cases the normal interval covered hybrid's recall@5 in 92.6% of 1,000
    subsamples of the demo's pool where t covered 93.1% (tools/sampled_labels.py).

    Linear in its inputs: the paired difference of two metrics on the same sample is this estimate
    of ``base_a - base_b`` and ``delta_a - delta_b`` (:func:`rag_experiments.evaluation.sampled.estimate_recall_difference`);
    it equals the difference of the two estimates, and its variance sees how the two move together."""
    if interval not in ("t", "normal"):
        raise ValueError(f"interval must be t or normal, got {interval!r}")
    n = len(base)
    if n == 0:
        nan = float("nan")
        return Estimate(nan, nan, nan, nan, level)
    value = sum(base) / n
    terms: list[tuple[float, int]] = []  # per stratum: its variance term v_h and n_h - 1
    for key, st in strata.items():
        ds = list(deltas.get(key, ()))
        if len(ds) > st.sampled:
            raise ValueError(f"stratum {key!r}: {len(ds)} corrections for {st.sampled} sampled cases")
        ds += [0.0] * (st.sampled - len(ds))
        value += st.weight * sum(ds) / n
        if st.sampled < st.population and st.sampled > 1:
            mean = sum(ds) / st.sampled
            s_sq = sum((d - mean) ** 2 for d in ds) / (st.sampled - 1)
            terms.append((st.population ** 2 * (1 - st.inclusion) * s_sq / st.sampled / n ** 2, st.sampled - 1))
    var = sum(v for v, _ in terms)
    se = math.sqrt(var)
    df = None
    if interval == "t" and var > 0:
        df = var ** 2 / sum(v * v / d for v, d in terms)
    q = t_quantile(level, df)
    return Estimate(value, se, value - q * se, value + q * se, level, df)
