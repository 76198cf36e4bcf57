"""Judge-corrected means: prediction-powered inference over cases (pure functions).

Most labels are a machine's (an LLM or agent judge). A metric computed with them, per case
``M_i``, can differ from the same metric under people's labels, ``H_i``. When people have
relabelled every machine-judged pair of a **random sample of cases**, the mean of ``H`` over the
whole golden set is estimated by prediction-powered inference (Angelopoulos, Bates, Fannjiang,
Jordan, Zrnic, *Science* 2023) with PPI++'s power tuning (Angelopoulos, Duchi, Zrnic 2023)::

    theta_hat(lam) = lam * mean_all(M) + mean_sample(H - lam * M)

``lam = 1`` is plain PPI: the machine's mean plus the mean error people found on the sample.
``lam = 0`` is the people-only mean of the sample. In between, PPI++ picks the ``lam`` that
minimises the variance, ``cov(H, M) / var(M)`` on the sample, clipped to [0, 1]: a judge that
tracks people closely gets ``lam`` near 1, a judge unrelated to people gets 0.

**Runs use plain PPI** (``tune=False``, the default). In the Cranfield simulation with 30 to 45
human-checked cases, estimating ``lam`` from the same few cases cost coverage (PPI++: lowest row
91.0%, mean 94.6%; PPI: lowest 92.5%, mean 95.3%, 48 rows of 200 repetitions) and the judges
there track people well enough that ``lam`` stays near 1. ``tune=True`` is there for a judge that
agrees poorly and a sample of a few hundred cases.

**Why cases, not pairs.** recall@k, RR@k and nDCG@k are non-linear functions of *all* the labels
of a case (recall divides by the case's number of relevant spans; RR is the first relevant rank),
so a correction must see a case's metric under people's labels, which needs every machine pair
of that case checked. A random sample of pairs leaves almost every case partly checked and gives
no unbiased per-case correction; a random sample of cases does (``rag-exp golden spotcheck
--cases N`` draws it in a seeded case order).

**Variance.** The sample ``S`` (n cases) is a simple random sample of the golden set's N cases,
and the N cases a sample of the population the bootstrap intervals are about. Writing
``Y = H - lam * M``, ``theta_hat = mean_N(H) + (mean_S(Y) - mean_N(Y))``: the first part is what
the case sampling gives (variance ``var(H) / N``), the second what the human sample adds
(``(1/n - 1/N) var(Y)``, the finite-population variance of a sample mean), and they are
uncorrelated. ``var(H)`` is estimated as ``var_N(lam M) + var_S(Y) + 2 cov_S(lam M, Y)``
(all N cases inform the machine part). The interval is ``theta_hat +- t * se`` with Welch-
Satterthwaite degrees of freedom for the two parts (N - 1 and n - 1): with few human-labelled
cases it widens instead of pretending to know ``var(Y)``. A paired difference between two runs is
the same estimator on per-case differences ``H_b - H_a`` and ``M_b - M_a`` over the same sample.

Coverage was checked by simulation on Cranfield (``tools/ppi_coverage.py``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

#: below this many human-checked cases a run logs no corrected interval: in the Cranfield
#: simulation (tools/ppi_coverage.py) a sample of 4 to 20 cases covered the truth in as few as
#: 67% to 88% of repetitions for MRR@10 under a lenient judge (a case's error is mostly 0 and
#: sometimes large, so a small sample misjudges its variance); from 30 cases every metric, run,
#: difference and judge covered 92% to 98% (200 repetitions: +-1.5 points of Monte Carlo error)
MIN_CASES = 30


@dataclass(frozen=True)
class Corrected:
    """A judge-corrected mean with its 95% interval (``level``), beside the uncorrected one."""

    estimate: float
    low: float
    high: float
    se: float
    lam: float  # the power-tuning weight used (1 = plain PPI)
    n_labelled: int  # cases with people's labels
    n_all: int  # cases with machine labels (the golden set's scored cases)
    uncorrected: float  # mean of M over all cases
    human_mean: float  # mean of H over the labelled cases
    mean_error: float  # mean of H - M over the labelled cases (the judge's bias on this metric)
    se_cases: float  # the case-sampling part of se
    se_judge: float  # the part the human sample adds
    df: float
    level: float = 0.95

    def to_dict(self) -> dict:
        return asdict(self)

    def cases_to_halve(self) -> dict:
        """How many labelled cases would halve the interval, from these data (variance of the
        judge part is ``(1/n - 1/N) var(Y)``): ``total`` to halve the whole interval (None when
        the case-sampling part alone is more than half: more labels cannot do it, more cases
        can), ``judge`` to halve the judge part; both capped at N, with ``more_*`` the extra."""
        return cases_to_halve(self.n_labelled, self.n_all, self.se_cases, self.se_judge)


def cases_to_halve(n: int, n_all: int, se_cases: float, se_judge: float) -> dict:
    def needed(target_judge_var: float) -> int | None:
        if se_judge <= 0:
            return n
        # (1/n' - 1/N) var_Y = target  ->  n' = 1 / (target / var_Y + 1/N)
        var_y = se_judge ** 2 / (1 / n - 1 / n_all) if n < n_all else 0.0
        if var_y <= 0:
            return n
        if target_judge_var <= 0:
            return n_all
        return min(n_all, math.ceil(1 / (target_judge_var / var_y + 1 / n_all) - 1e-9))

    judge = needed(se_judge ** 2 / 4)
    total_target = (se_cases ** 2 + se_judge ** 2) / 4 - se_cases ** 2
    total = needed(total_target) if total_target > 0 else None
    if total is not None and total >= n_all and total_target < 1e-15:
        total = None
    return {"judge": judge, "more_judge": None if judge is None else max(0, judge - n),
            "total": total, "more_total": None if total is None else max(0, total - n)}


def _t_quantile(level: float, df: float) -> float:
    from scipy.special import stdtrit  # Student's t quantile (scipy comes with mlflow)

    return float(stdtrit(df, 0.5 + level / 2))


def ppi_mean(machine_all: Sequence[float], human: Sequence[float], machine_sample: Sequence[float], *,
             tune: bool = False, level: float = 0.95) -> Corrected:
    """The judge-corrected mean of a per-case metric.

    ``machine_all``: the metric under machine labels for every scored case (N values, the
    sample's cases included). ``human`` / ``machine_sample``: the metric under people's labels and
    under machine labels for the n cases of the random sample, aligned. ``tune``: PPI++'s
    variance-minimising ``lam`` (default: plain PPI, ``lam = 1``). Raises ``ValueError`` on
    misaligned or empty input and when the sample has fewer than 2 cases."""
    m_all = np.asarray(machine_all, dtype=float)
    h = np.asarray(human, dtype=float)
    m_s = np.asarray(machine_sample, dtype=float)
    if h.shape != m_s.shape or h.ndim != 1:
        raise ValueError(f"human ({h.shape}) and machine_sample ({m_s.shape}) must be aligned 1-d arrays")
    n, big_n = len(h), len(m_all)
    if n < 2:
        raise ValueError(f"need at least 2 human-labelled cases, got {n}")
    if big_n < n:
        raise ValueError(f"the sample ({n} cases) cannot be larger than all cases ({big_n})")
    if not (np.isfinite(m_all).all() and np.isfinite(h).all() and np.isfinite(m_s).all()):
        raise ValueError("metric values must be finite")
    lam = 1.0
    if tune:
        var_m = float(np.var(m_s, ddof=1))
        lam = float(np.clip(np.cov(h, m_s, ddof=1)[0, 1] / var_m, 0.0, 1.0)) if var_m > 0 else 1.0
    y = h - lam * m_s
    estimate = float(lam * m_all.mean() + y.mean())
    var_y = float(np.var(y, ddof=1))
    cov_my = float(np.cov(lam * m_s, y, ddof=1)[0, 1])
    var_h = max(0.0, lam ** 2 * float(np.var(m_all, ddof=1)) + var_y + 2 * cov_my) if big_n > 1 else 0.0
    a = var_h / big_n  # case sampling
    b = max(0.0, 1 / n - 1 / big_n) * var_y  # the human sample
    se = math.sqrt(a + b)
    if a + b > 0:
        denom = (a * a / (big_n - 1) if big_n > 1 else 0.0) + b * b / (n - 1)
        df = (a + b) ** 2 / denom if denom > 0 else float("inf")
    else:
        df = float("inf")
    q = _t_quantile(level, min(df, 1e6))
    return Corrected(
        estimate=estimate, low=estimate - q * se, high=estimate + q * se, se=se, lam=lam,
        n_labelled=n, n_all=big_n, uncorrected=float(m_all.mean()), human_mean=float(h.mean()),
        mean_error=float((h - m_s).mean()), se_cases=math.sqrt(a), se_judge=math.sqrt(b), df=float(df),
        level=level,
    )


def ppi_paired(machine_a: Sequence[float], machine_b: Sequence[float], human_a: Sequence[float],
               human_b: Sequence[float], sample_index: Sequence[int], *, tune: bool = False,
               level: float = 0.95) -> Corrected:
    """The judge-corrected paired difference ``b - a`` over the same cases. ``machine_a`` /
    ``machine_b``: per-case machine-label metrics of the two runs, aligned by case (N values);
    ``human_a`` / ``human_b``: people's-label metrics for the sampled cases, whose positions in
    the N cases are ``sample_index``."""
    ma, mb = np.asarray(machine_a, dtype=float), np.asarray(machine_b, dtype=float)
    if ma.shape != mb.shape:
        raise ValueError(f"machine_a ({ma.shape}) and machine_b ({mb.shape}) must be aligned")
    idx = np.asarray(sample_index, dtype=int)
    d_all = mb - ma
    d_h = np.asarray(human_b, dtype=float) - np.asarray(human_a, dtype=float)
    return ppi_mean(d_all, d_h, d_all[idx], tune=tune, level=level)
