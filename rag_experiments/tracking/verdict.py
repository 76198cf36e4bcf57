"""Which runs are best, or statistically tied with the best, per metric and segment.

A comparison (:mod:`.compare`) tests every run against its *baseline*; a sweep's reader asks
something else: "which points could be the best?". For each headline column (every metric, and
the primary metric on each segment) the best run is the one with the highest value; every other
run is paired with it over cases (the same two-sided randomization test, resamples and seed as the
table) and the p-values are Holm-corrected across the runs of that column. A run is *tied with
the best* when its adjusted p-value is at least alpha: the data cannot tell it from the best. A
run that cannot be paired with the best (no per-case table, another golden set) is neither.

Label-coverage columns (judged@k) are not a verdict: more judged is not better retrieval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from ..stats.paired import holm, paired_permutation_test, test_settings
from ..stats.power import POWER, estimate


@dataclass(frozen=True)
class ColumnVerdict:
    key: str  # recall_at_5, recall_at_5.exact
    title: str  # recall@5, recall@5 (exact)
    best: str  # the best run's label
    best_run_id: str
    best_value: float
    tied: list[tuple[str, float]] = field(default_factory=list)  # (label, Holm-adjusted p vs the best)
    worse: int = 0  # runs significantly below the best
    unpaired: list[str] = field(default_factory=list)  # runs that could not be paired with the best
    mde: dict[str, float | None] = field(default_factory=dict)  # label -> MDE of its pairing with the best


def verdicts(cmp, n_resamples: int | None = None, seed: int | None = None) -> list[ColumnVerdict]:
    """One :class:`ColumnVerdict` per quality column of ``cmp`` (a :class:`.compare.Comparison`)."""
    from .compare import Pairing
    from .coverage import JUDGED_PREFIX

    n_resamples, seed = test_settings(n_resamples, seed)
    out = []
    pairings: dict[tuple[int, int], Pairing] = {}  # (best row, row): joined once for every column
    for col in cmp.columns:
        name = col.key.mlflow_name
        if col.key.column.startswith(JUDGED_PREFIX):
            continue
        scored = [(i, row.cells[name].value) for i, row in enumerate(cmp.rows)
                  if row.cells[name].value is not None and not math.isnan(row.cells[name].value)]
        if not scored:
            continue
        best_i = max(scored, key=lambda iv: (iv[1], -iv[0]))[0]  # equal values: the earlier row
        best = cmp.rows[best_i]
        others, pvalues, unpaired, mdes = [], [], [], {}
        for i, _ in scored:
            if i == best_i:
                continue
            row = cmp.rows[i]
            p = None
            if (best.run.per_case is not None and row.run.per_case is not None and row.run.golden == best.run.golden
                    and col.key.column in row.run.per_case and col.key.column in best.run.per_case):
                pairing = pairings.get((best_i, i))
                if pairing is None:
                    pairing = pairings[(best_i, i)] = Pairing(best.run.per_case, row.run.per_case)
                a, b = pairing.values(col.key.column, col.key.segment)
                if len(a):
                    p = paired_permutation_test(a, b, n_resamples=n_resamples, seed=seed)
                    mdes[row.label] = estimate(a, b, cmp.alpha).mde
            if p is None:
                unpaired.append(row.label)
            else:
                others.append(row)
                pvalues.append(p)
        adjusted = holm(pvalues) if pvalues else []
        tied = [(row.label, q) for row, q in zip(others, adjusted) if q >= cmp.alpha]
        out.append(ColumnVerdict(name, col.title, best.label, best.run.id, float(best.cells[name].value),
                                 sorted(tied, key=lambda t: -t[1]), len(others) - len(tied), unpaired,
                                 {label: mdes.get(label) for label, _ in tied}))
    return out


def verdict_lines(found: Sequence[ColumnVerdict], alpha: float, max_names: int = 4) -> list[str]:
    """The verdicts as Markdown bullets, one per column (the parent run's description)."""
    if not found:
        return []
    lines = ["", f"Best per metric, and the runs **statistically tied** with it (paired randomization test "
             f"against the best, Holm-corrected, α={alpha:g}; MDE: the smallest difference from the best "
             f"those paired cases could detect, power {POWER:g}):"]
    for v in found:
        tied = ", ".join(f"`{label}` (p={_p(q)}{_mde(v.mde.get(label))})" for label, q in v.tied[:max_names])
        if len(v.tied) > max_names:
            tied += f" and {len(v.tied) - max_names} more"
        text = f"- {v.title}: **`{v.best}`** {v.best_value:.4f}; "
        text += f"tied: {tied}" if v.tied else "no run tied"
        if v.worse:
            text += f"; {v.worse} significantly worse"
        if v.unpaired:
            text += f"; not paired: {len(v.unpaired)}"
        lines.append(text)
    return lines + [""]


def _mde(mde: float | None) -> str:
    """', MDE 0.094': the smallest difference from the best these paired cases could detect."""
    return "" if mde is None else f", MDE {mde:.3f}"


def _p(q: float) -> str:
    return "<0.001" if q < 0.001 else f"{q:.3f}"
