"""How often does ``promote --sweep`` with a dev/test split promote the best of N equal points, and how
often a real +0.03 winner? The decision on the held-out test cases beside the max-T decision on all cases.

    .venv/bin/python tools/held_out_promotion_simulation.py                 # 500 sweeps per cell
    .venv/bin/python tools/held_out_promotion_simulation.py --reps 200 --ns 1,20

The null model of tools/null_sweep_simulation.py (its ``null_points`` and ``improve``: the champion of
record's 230 per-case recall@5 values, each point redraws a case with probability 0.3; independent or
correlated points). Each sweep draws a fresh split, 30% of the cases test (about what ``rag-exp golden
split`` holds out), and counts:

* all cases, max-T: the best point on all cases, Δ > 0 and its max-T adjusted p against the champion
  (stats.maxt.against_control) < 0.05 (what promote --sweep does without a split);
* held out: the best point on the dev cases, Δ > 0 on the test cases and the single paired
  randomization test's p on the test cases < 0.05 (what promote --sweep does with a split);
* power at a real +0.03: one point gets +0.03 (``improve``) among N-1 null points; promoted = the
  rule's chosen point is that point and passes.

``--resamples`` sign flips per test (default 1000). ± is the 95% binomial half-width.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from null_sweep_simulation import ALPHA, best_index, champion_values, improve, null_points, rate  # noqa: E402

from rag_experiments.stats.maxt import against_control  # noqa: E402 - after the path
from rag_experiments.stats.paired import paired_permutation_test  # noqa: E402

TEST_FRACTION = 0.3


def decisions(champion: np.ndarray, points: np.ndarray, test: np.ndarray, resamples: int) -> tuple[int, bool, int, bool]:
    """(chosen on all cases, promoted by max-T on all cases, chosen on dev, promoted on the test cases)."""
    b = best_index(points)
    all_ok = points[:, b].mean() > champion.mean() and \
        against_control(champion, points, n_resamples=resamples)[b] < ALPHA
    d = best_index(points[~test])
    a, c = champion[test], points[test, d]
    held_ok = c.mean() > a.mean() and paired_permutation_test(a, c, n_resamples=resamples) < ALPHA
    return b, bool(all_ok), d, bool(held_ok)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=500, help="sweeps per cell (default 500)")
    ap.add_argument("--resamples", type=int, default=1000, help="sign flips per test (default 1000)")
    ap.add_argument("--ns", default="1,5,20,50", help="sweep sizes (default 1,5,20,50)")
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    champion = champion_values()
    rng = np.random.default_rng(args.seed)
    print(f"champion of record: {len(champion)} cases, recall@5 {champion.mean():.3f}; {args.reps} sweeps per "
          f"cell, {args.resamples} sign flips, test fraction {TEST_FRACTION}")
    print("model        N   false promotion: all cases max-T   held out (test)   |   power +0.03: all cases max-T"
          "   held out (test)")
    for model in ("independent", "correlated"):
        for n in (int(x) for x in args.ns.split(",")):
            started = time.monotonic()
            false_all = false_held = power_all = power_held = 0
            for _ in range(args.reps):
                test = rng.random(len(champion)) < TEST_FRACTION
                points = null_points(champion, n, model, rng)
                _, ok_all, _, ok_held = decisions(champion, points, test, args.resamples)
                false_all += ok_all
                false_held += ok_held
                points = null_points(champion, n, model, rng)
                points[:, 0] = improve(points[:, 0], 0.03, rng)
                b, ok_all, d, ok_held = decisions(champion, points, test, args.resamples)
                power_all += ok_all and b == 0
                power_held += ok_held and d == 0
            print(f"{model:12s} {n:2d}   {rate(false_all, args.reps):>14s}   {rate(false_held, args.reps):>14s}   |   "
                  f"{rate(power_all, args.reps):>14s}   {rate(power_held, args.reps):>14s}   "
                  f"({time.monotonic() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
