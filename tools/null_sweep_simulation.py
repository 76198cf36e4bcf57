"""How often does a sweep of N equal points promote its best, or call a point worse than the best?

    .venv/bin/python tools/null_sweep_simulation.py                  # both models, 1000 / 500 sweeps
    .venv/bin/python tools/null_sweep_simulation.py --reps 200 --ns 1,5,10   # a quick look

Issue 56's null model: the champion's per-case recall@5 is the committed champion of record's
(experiments/promoted/default.record.json, 230 demo cases); each sweep point copies it and
redraws each case with probability 0.3 from the champion's values (a random case's value), so
no point is better than the champion or than another point. Two models of the points:

* independent: each point redraws its own cases;
* correlated: the sweep first makes one "base" point that way, then every point copies the base
  and redraws only 5% of the cases again (neighbouring rrf_k values share most per-case values).

For N = 1, 5, 10, 20, 50 it counts, over ``--reps`` sweeps:

* false promotion, before: the best point (highest mean; ties: the first) has Δ > 0 and the single
  paired randomization test's p < 0.05 (what promote --sweep did); after: its max-T adjusted p
  against the champion (stats.maxt.against_control, what promote --sweep does now) < 0.05;
* false "worse than the best", before: some point's Holm-corrected p against the best < 0.05 (the sweep
  parent's verdict before); after: some pair's max-T adjusted p over all pairs (stats.maxt.all_pairs) < 0.05;
* power at a real +0.03: one point gets +0.03 on top of the null (cases below 1 set to 1 with the
  probability that adds 0.03 on average) among N-1 null points; promoted (best is that point, Δ > 0,
  p < 0.05) before and after.

The tests use ``--resamples`` sign flips (default 1000, not the product's 10,000: a Monte Carlo p of
(hits+1)/(R+1) is valid for any R; only its resolution changes). ± is the 95% binomial half-width.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag_experiments.stats.maxt import against_control, all_pairs  # noqa: E402 - after the path
from rag_experiments.stats.paired import holm, paired_permutation_test  # noqa: E402
from rag_experiments.tracking.runs import parse_per_case  # noqa: E402

ALPHA = 0.05
RECORD = ROOT / "experiments" / "promoted" / "default.record.json"


def champion_table() -> pd.DataFrame:
    """The champion of record's per-case table (the one the null models redraw), as the tool parses it."""
    return parse_per_case(json.loads(RECORD.read_text())["per_case"])


def champion_values() -> np.ndarray:
    return champion_table()["recall_at_5"].to_numpy(dtype=float)


def null_points(champion: np.ndarray, n: int, model: str, rng: np.random.Generator) -> np.ndarray:
    cases = len(champion)

    def redraw(base: np.ndarray, p: float, k: int) -> np.ndarray:
        fresh = champion[rng.integers(0, cases, size=(cases, k))]
        return np.where(rng.random((cases, k)) < p, fresh, base[:, None] if base.ndim == 1 else base)

    if model == "independent":
        return redraw(champion, 0.3, n)
    base = redraw(champion, 0.3, 1)[:, 0]
    return redraw(base, 0.05, n)


def improve(point: np.ndarray, delta: float, rng: np.random.Generator) -> np.ndarray:
    room = 1.0 - point
    q = min(1.0, delta / max(room.mean(), 1e-9))
    return np.where(rng.random(len(point)) < q, 1.0, point)


def best_index(points: np.ndarray) -> int:
    means = points.mean(axis=0)
    return int(np.flatnonzero(np.abs(means - means.max()) <= 1e-12)[0])  # the tie rule: the first point


def one_sweep(champion, points, resamples: int) -> tuple[bool, bool, bool, bool, int]:
    """(promoted before, after, some point worse than the best before, after, best index)."""
    b = best_index(points)
    delta = points[:, b].mean() - champion.mean()
    raw = paired_permutation_test(champion, points[:, b], n_resamples=resamples)
    adjusted = against_control(champion, points, n_resamples=resamples)[b]
    promoted_before = delta > 0 and raw < ALPHA
    promoted_after = delta > 0 and adjusted < ALPHA
    n = points.shape[1]
    if n < 2:
        return promoted_before, promoted_after, False, False, b
    others = [j for j in range(n) if j != b]
    ps = [paired_permutation_test(points[:, b], points[:, j], n_resamples=resamples) for j in others]
    worse_before = min(holm(ps)) < ALPHA
    worse_after = float(np.delete(all_pairs(points, n_resamples=resamples)[b], b).min()) < ALPHA
    return promoted_before, promoted_after, worse_before, worse_after, b


def rate(hits: int, reps: int) -> str:
    p = hits / reps
    return f"{100 * p:5.1f}% ±{100 * 1.96 * np.sqrt(max(p * (1 - p), 1e-12) / reps):.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1000, help="sweeps per cell, independent model (default 1000)")
    ap.add_argument("--reps-correlated", type=int, default=500, help="sweeps per cell, correlated model (500)")
    ap.add_argument("--resamples", type=int, default=1000, help="sign flips per test (default 1000)")
    ap.add_argument("--ns", default="1,5,10,20,50", help="sweep sizes (default 1,5,10,20,50)")
    ap.add_argument("--power-reps", type=int, default=500, help="sweeps per power cell (default 500)")
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    ns = [int(x) for x in args.ns.split(",")]
    champion = champion_values()
    print(f"champion: {RECORD.relative_to(ROOT)}, {len(champion)} cases, recall@5 {champion.mean():.3f}; "
          f"alpha {ALPHA}; {args.resamples} sign flips per test")
    started = time.time()
    for model, reps in (("independent", args.reps), ("correlated", args.reps_correlated)):
        print(f"\nnull model: {model} points, {reps} sweeps per row")
        print("| N | false promotion, before (uncorrected) | after (max-T) | false 'worse than the best', "
              "before (Holm vs best) | after (max-T, all pairs) |")
        print("|---:|---:|---:|---:|---:|")
        for n in ns:
            rng = np.random.default_rng([args.seed, n, len(model)])
            counts = np.zeros(4, dtype=int)
            for _ in range(reps):
                counts += np.array(one_sweep(champion, null_points(champion, n, model, rng), args.resamples)[:4])
            cells = [rate(int(c), reps) for c in counts]
            if n == 1:
                cells[2] = cells[3] = "n/a"
            print(f"| {n} | " + " | ".join(cells) + " |", flush=True)
    print(f"\npower at a real +0.03 (one improved point among N-1 null ones, independent model), "
          f"{args.power_reps} sweeps per row: promoted = that point is the best and passes")
    print("| N | before (uncorrected) | after (max-T) |")
    print("|---:|---:|---:|")
    for n in [x for x in ns if x <= 20]:
        rng = np.random.default_rng([args.seed, n, 99])
        hits = np.zeros(2, dtype=int)
        for _ in range(args.power_reps):
            points = null_points(champion, n, "independent", rng)
            points[:, 0] = improve(points[:, 0], 0.03, rng)
            before, after, _, _, b = one_sweep(champion, points, args.resamples)
            hits += np.array([before and b == 0, after and b == 0])
        print(f"| {n} | {rate(int(hits[0]), args.power_reps)} | {rate(int(hits[1]), args.power_reps)} |", flush=True)
    print(f"\n{time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
