"""Which runs are best, or statistically tied with the best, per metric and segment.

A comparison (:mod:`.compare`) tests every run against its *baseline*; a sweep's reader asks
something else: "which points could be the best?". For each headline column (every metric, and
the primary metric on each segment) the best run is the one with the highest value (a tie: the
earliest point, :func:`.sweep_parent.best_of`); every other run is paired with it over the cases
they all share. The best is chosen from the same values, so its difference from a point is not one
test but the largest of many: each pair's difference is judged within the family of *every pair
of points* by the single-step max-T test (:mod:`rag_experiments.stats.maxt`, Westfall & Young
1993; the same sign flips, resamples and seed as the table). A run is *tied with the best* when
its adjusted p-value is at least alpha: the data cannot tell it from the best. With Holm across
"best vs each" (the rule before), a sweep of 20 equal points called some point worse than the
best 22.5% of the time instead of 5% (tools/null_sweep_simulation.py). A run that cannot be
paired with the best (no per-case table, another golden set) is neither.

Label-coverage columns (judged@k) are not a verdict: more judged is not better retrieval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..stats.maxt import all_pairs
from ..stats.paired import test_settings
from ..stats.shown import p_digits
from ..stats.power import POWER, estimate
from .compare import Pairing, column_values, in_segment
from .coverage import JUDGED_PREFIX
from .sweep_parent import best_of


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
    n_resamples, seed = test_settings(n_resamples, seed)
    out = []
    pairings: dict[tuple[int, int], Pairing] = {}  # (best row, row): joined once for every column
    for col in cmp.columns:
        name = col.key.mlflow_name
        if col.key.column.startswith(JUDGED_PREFIX):
            continue
        scored = {i: row.cells[name].value for i, row in enumerate(cmp.rows)
                  if row.cells[name].value is not None and not math.isnan(row.cells[name].value)}
        if not scored:
            continue
        by_run = {cmp.rows[i].run.id: i for i in scored}
        best_i = by_run[best_of([cmp.rows[i].run for i in scored], lambda r: scored[by_run[r.id]]).id]
        best = cmp.rows[best_i]
        paired: dict[int, Pairing] = {}
        unpaired = []
        for i in scored:
            if i == best_i:
                continue
            row = cmp.rows[i]
            if (best.run.per_case is not None and row.run.per_case is not None and row.run.golden == best.run.golden
                    and col.key.column in row.run.per_case and col.key.column in best.run.per_case):
                if (best_i, i) not in pairings:
                    pairings[(best_i, i)] = Pairing(best.run.per_case, row.run.per_case)
                paired[i] = pairings[(best_i, i)]
            else:
                unpaired.append(row.label)
        others, adjusted, mdes = _against_best(cmp, col.key, best_i, paired, n_resamples, seed)
        unpaired += [cmp.rows[i].label for i in paired if i not in others]
        tied = [(cmp.rows[i].label, q) for i, q in zip(others, adjusted) if q >= cmp.alpha]
        out.append(ColumnVerdict(name, col.title, best.label, best.run.id, float(best.cells[name].value),
                                 sorted(tied, key=lambda t: -t[1]), len(others) - len(tied), unpaired,
                                 {label: mdes.get(label) for label, _ in tied}))
    return out


def _against_best(cmp, key, best_i: int, paired: dict[int, Pairing], n_resamples: int,
                  seed: int) -> tuple[list[int], list[float], dict[str, float | None]]:
    """(rows, adjusted p of each against the best, MDE by label): every row paired with the best on
    the cases all of them share, each pair's difference tested within the family of all pairs of
    these points (:func:`rag_experiments.stats.maxt.all_pairs`: valid although the best was chosen
    from the same values). Rows with no shared case are left out."""
    base, matrix, rows = common_values(paired, key)
    if not rows:
        return [], [], {}
    mdes = {cmp.rows[i].label: estimate(base, matrix[:, j], cmp.alpha).mde for j, i in enumerate(rows)}
    adjusted = all_pairs(np.column_stack([base, matrix]), n_resamples=n_resamples, seed=seed)[0, 1:]
    return rows, [float(q) for q in adjusted], mdes


def common_values(paired: Mapping[Any, Pairing], key) -> tuple[np.ndarray, np.ndarray, list]:
    """The base run's values and each other run's (a cases x runs matrix) on the cases of ``key``'s
    segment that every pairing shares, in the base run's order; ``paired`` maps a name to the pairing of
    the base run (the same table in every pairing) with that run. Runs with no case there are left
    out of the names returned."""
    shared: set[int] | None = None
    picked: dict[Any, tuple[np.ndarray, np.ndarray]] = {}
    base_table = None
    for name, pairing in paired.items():
        if key.column not in pairing.base or key.column not in pairing.other:
            continue
        ia, ib = pairing.ia, pairing.ib
        if key.segment is not None:
            keep = in_segment(pairing.base, key.segment)[ia]
            ia, ib = ia[keep], ib[keep]
        if not len(ia):
            continue
        base_table = pairing.base
        picked[name] = (ia, column_values(pairing.other, key.column)[ib])
        shared = set(ia.tolist()) if shared is None else shared & set(ia.tolist())
    if not picked or not shared:
        return np.array([]), np.empty((0, 0)), []
    common = np.array(sorted(shared))
    columns = []
    for ia, vals in picked.values():
        at = dict(zip(ia.tolist(), vals.tolist()))
        columns.append([at[i] for i in common.tolist()])
    return column_values(base_table, key.column)[common], np.array(columns).T, list(picked)


def verdict_lines(found: Sequence[ColumnVerdict], alpha: float, max_names: int = 4,
                  all_cases: int | None = None) -> list[str]:
    """The verdicts as Markdown bullets, one per column (the parent run's description). ``all_cases``
    (a golden set with a dev/test split): the heading says the verdicts are computed on all those cases,
    so they are not read as the best point chosen on dev."""
    if not found:
        return []
    on = ("" if all_cases is None else
          f" **on all {all_cases} cases** (dev and test together; not the dev-only choice of the best point)")
    lines = ["", f"Best per metric{on}, and the runs **statistically tied** with it (paired randomization test, "
             f"max-T over every pair of points: it counts every point tried, α={alpha:g}; MDE: the smallest "
             f"difference from the best those paired cases could detect, power {POWER:g}):"]
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
    return p_digits(q)  # four places near α
