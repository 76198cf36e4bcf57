"""Promote and the gate on a golden set with a frozen dev/test split: which cases decide, and both sides shown.

``promote --sweep`` chooses its point on the **dev** cases (:func:`.held_out.best_on_dev`); the test
against the champion then runs on the **test** cases only: no choice was made on them, so one
uncorrected paired test is honest there (the max-T test over every point, which pays for the
choice, is shown on dev). The gate decides on every case unless ``--decide-on test``; it prints
both sides either way. Values come from the runs' per-case tables: nothing is re-run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Sequence

import numpy as np

from ..evaluation.metric_key import MetricKey
from ..golden.split import DEV, TEST, FrozenSplit
from ..stats.bootstrap import bootstrap_interval
from ..stats.maxt import all_pairs
from ..stats.paired import paired_bootstrap_delta_ci
from . import held_out
from .compare import Pairing, in_segment, paired_values
from .runs import RunView
from .verdict import common_values
from .versioned import quality_metrics


def side_ids(runs: Iterable[RunView], split: FrozenSplit, side: str) -> frozenset[str]:
    """The case ids of ``runs``' per-case tables that fall on ``side`` (``dev`` or ``test``) of ``split``
    (a case added after the split falls by the split's rule)."""
    ids = {str(i) for r in runs if r.per_case is not None for i in r.per_case["case_id"]}
    return frozenset(i for i in ids if split.side(i) == side)


def on_cases(run: RunView, ids: Iterable[str]) -> RunView:
    """The run restricted to the cases ``ids``: its per-case table cut to them and its metrics
    recomputed from that table (as :func:`.versioned.align` rebases a run), so a value read off the
    run is the value on those cases."""
    pc = run.per_case
    if pc is None:
        return run
    keep = pc[pc["case_id"].astype(str).isin(set(ids))].reset_index(drop=True)
    return replace(run, per_case=keep, metrics=quality_metrics(keep) if len(keep) else {})


def _fmt_delta(v: float) -> str:
    return f"{v:+.3f}".replace("-", "−")


def promote_line(candidate: RunView, pair: Sequence[RunView], metric: str, split: FrozenSplit, p: float | None,
                 samples: int = 1000, seed: int = 13) -> str:
    """``recall_at_5 dev 0.791 (chose it) · test 0.777 [0.70, 0.85] vs champion 0.781 on the same 69 test
    cases, Δ −0.004 [−0.03, +0.02], p 0.81``: the chosen point's dev value beside the held-out comparison
    the decision reads. ``pair``: (champion, candidate) as the decision paired them; ``p``: its test's."""
    key = MetricKey.parse(metric)
    champ, cand = pair
    test = side_ids(pair, split, TEST)
    dev_values = _column(on_cases(candidate, side_ids([candidate], split, DEV)), key)
    a, b = (paired_values(on_cases(champ, test).per_case, on_cases(cand, test).per_case, key.column, key.segment)
            if champ.per_case is not None and cand.per_case is not None else (np.array([]), np.array([])))
    dev = f"{metric} dev {dev_values.mean():.3f} ({len(dev_values)} cases, chose it)" if len(dev_values) \
        else f"{metric} dev: no cases"
    if not len(b):
        return f"{dev} · test: no held-out test case shared with the champion (split {split.id})"
    lo, hi = bootstrap_interval(b, samples, seed)
    dlo, dhi = paired_bootstrap_delta_ci(a, b, samples, seed)
    return (f"{dev} · test {b.mean():.3f} [{lo:.3f}, {hi:.3f}] vs champion {a.mean():.3f} on the same {len(b)} "
            f"held-out test cases, Δ {_fmt_delta(b.mean() - a.mean())} [{_fmt_delta(dlo)}, {_fmt_delta(dhi)}]"
            + (f", p {p:.3f}" if p is not None else "") + f" (split {split.id}; the decision reads the test side)")


def _column(run: RunView, key: MetricKey) -> np.ndarray:
    pc = run.per_case
    if pc is None or key.column not in pc:
        return np.array([])
    if key.segment is not None:
        pc = pc[in_segment(pc, key.segment)]
    return pc[key.column].to_numpy(dtype=float)


def side_lines(pair: Sequence[RunView], keys: Sequence[str], split: FrozenSplit, labels: Sequence[str],
               decided_on: str) -> list[str]:
    """For the gate: each of ``keys`` (the decision's checks) on dev and on test for both runs of
    ``pair`` (paired on their shared cases), and which cases the verdict reads (``decided_on``)."""
    out = []
    for name in keys:
        key = MetricKey.parse(name)
        cells = []
        for side in (DEV, TEST):
            ids = side_ids(pair, split, side)
            a, b = paired_values(on_cases(pair[0], ids).per_case, on_cases(pair[1], ids).per_case, key.column,
                                 key.segment) if all(r.per_case is not None for r in pair) else ([], [])
            cells.append(f"{side} ({len(a)} cases): {labels[0]} {np.mean(a):.3f}, {labels[1]} {np.mean(b):.3f}, "
                         f"Δ {_fmt_delta(float(np.mean(b) - np.mean(a)))}" if len(a) else f"{side}: no cases")
        out.append(f"{key.title} " + " · ".join(cells))
    if out:
        out.append(f"(split {split.id}: dev and test columns are the same two runs on each side; the gate's "
                   f"verdict reads {decided_on})")
    return out


def shared_ids(*runs: RunView) -> set[str]:
    """The case ids every one of ``runs`` has in its per-case table (none when one has no table)."""
    sets = [set(r.per_case["case_id"].astype(str)) if r.per_case is not None else set() for r in runs]
    return set.intersection(*sets) if sets else set()


@dataclass(frozen=True)
class DevTestRow:
    """One sweep point's objective on each side of the split, and the dev verdict against the chosen point."""

    label: str
    run_id: str
    dev: float
    dev_n: int
    test: float
    test_n: int
    test_interval: tuple[float, float]
    chosen: bool
    # max-T adjusted p (all pairs of points, on the dev cases all share) of this point against the chosen
    # one, where the choice was made; None for the chosen point or a point with no shared dev case
    p_dev: float | None = None


def dev_test_rows(runs: Sequence[RunView], labels: Sequence[str], objective: str, split: FrozenSplit, chosen_id: str,
                  n_resamples: int = 10000, seed: int = 13) -> list[DevTestRow]:
    """Every point's ``objective`` on dev (where the point was chosen) and on test (held out, with its
    95% bootstrap interval), with the dev verdict against the chosen point (:func:`.stats.maxt.all_pairs`
    over the points, valid although the chosen one was picked on those very cases). Runs without a
    per-case table are left out; rows in the order given."""
    key = MetricKey.parse(objective)
    dev_ids = side_ids(runs, split, DEV)
    values = {r.id: held_out.sides(r, key, split) for r in runs}
    chosen = next((r for r in runs if r.id == chosen_id), None)
    p_dev: dict[str, float] = {}
    if chosen is not None and chosen.per_case is not None:
        base = on_cases(chosen, dev_ids).per_case
        others = {r.id: Pairing(base, on_cases(r, dev_ids).per_case) for r in runs
                  if r.id != chosen_id and r.per_case is not None}
        ref, matrix, names = common_values(others, key)
        if names:
            adjusted = all_pairs(np.column_stack([ref, matrix]), n_resamples=n_resamples, seed=seed)[0, 1:]
            p_dev = {name: float(q) for name, q in zip(names, adjusted)}
    return [DevTestRow(label, r.id, s.dev, s.dev_n, s.test, s.test_n, s.test_interval, r.id == chosen_id,
                       p_dev.get(r.id)) for r, label in zip(runs, labels) if (s := values[r.id]) is not None]
