"""Check the power prediction of rag_experiments/stats/power.py by simulation on real per-case tables.

    MLFLOW_TRACKING_URI=... python tools/power_simulation.py            # the newest vector/hybrid/hybrid_rerank runs
    python tools/power_simulation.py --pair RUN_A:RUN_B:recall_at_5 --inject RUN_A:recall_at_5:20:13

Each scenario is a pool of per-case differences ``d = b - a`` of two runs on the same golden set:

* ``--pair A:B:METRIC``: two real runs (e.g. vector vs hybrid, hybrid vs hybrid_rerank);
* ``--inject A:METRIC:WINS:LOSSES``: run A against a copy of itself with an injected Δ: WINS cases
  where A scored below 1 get 1, LOSSES cases where A scored 1 get 0 (chosen at random, seeded).

For each scenario, three sizes: the cases the formula says give power 0.5, 0.8 and 0.95 for the
pool's mean difference. At each size, ``--reps`` samples of that many cases are drawn with
replacement from the pool and the tool's own paired randomization test is run on each; the measured
power (share with p < alpha) is printed beside the prediction the tool uses (the paired z-test
formula, stats.power.predicted_power) and beside the sign-flip variant (predicted_power_signflip,
not used: conservative). The brief: within 5 points.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _per_case(run_id: str):
    from rag_experiments.tracking.runs import get_run

    run = get_run(run_id)
    if run.per_case is None:
        sys.exit(f"run {run_id} has no per_case.json")
    return run


def _pool(a_run, b_run, metric: str) -> np.ndarray:
    from rag_experiments.tracking.compare import Pairing

    a, b = Pairing(a_run.per_case, b_run.per_case).values(metric)
    if not len(a):
        sys.exit(f"{a_run.id} and {b_run.id} share no cases with {metric}")
    return b - a


def _injected(a_run, metric: str, wins: int, losses: int, seed: int) -> np.ndarray:
    a = a_run.per_case[metric].to_numpy(float)
    b = a.copy()
    rng = np.random.default_rng(seed)
    up = rng.choice(np.flatnonzero(a < 1), size=min(wins, int((a < 1).sum())), replace=False)
    down_from = np.flatnonzero(a == 1)
    down = rng.choice(down_from, size=min(losses, len(down_from)), replace=False)
    b[up], b[down] = 1.0, 0.0
    return b - a


def _newest(variant: str) -> str | None:
    from rag_experiments.tracking.runs import search, tag_filter

    found = [r for r in search(tag_filter("variant", variant), per_case=False, order="DESC", max_results=20)
             if r.status == "FINISHED" and r.tags.get("sweep") != "parent"]
    return found[0].id if found else None


def main(argv: list[str] | None = None) -> int:
    from rag_experiments.stats.power import (lattice_step, mde, n_needed, predicted_power, predicted_power_signflip,
                                             simulated_power)

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", action="append", default=[], metavar="A:B:METRIC")
    ap.add_argument("--inject", action="append", default=[], metavar="A:METRIC:WINS:LOSSES")
    ap.add_argument("--reps", type=int, default=1000, help="samples per size (default 1000: ±1.3 points at 0.8)")
    ap.add_argument("--resamples", type=int, default=2000, help="sign flips per test (default 2000)")
    ap.add_argument("--powers", default="0.5,0.8,0.95", help="the sizes: cases for these predicted powers")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    scenarios = []
    for spec in args.pair:
        a, b, metric = spec.split(":")
        ra, rb = _per_case(a), _per_case(b)
        scenarios.append((f"{ra.label} -> {rb.label}, {metric}", _pool(ra, rb, metric)))
    for spec in args.inject:
        a, metric, wins, losses = spec.split(":")
        ra = _per_case(a)
        scenarios.append((f"{ra.label} -> copy +{wins}/-{losses} cases, {metric}",
                          _injected(ra, metric, int(wins), int(losses), args.seed)))
    if not scenarios:
        ids = {v: _newest(v) for v in ("vector", "hybrid", "hybrid_rerank")}
        if not ids["vector"] or not ids["hybrid"]:
            sys.exit("no vector and hybrid runs in the store: run them, or give --pair/--inject")
        vec, hyb = _per_case(ids["vector"]), _per_case(ids["hybrid"])
        scenarios.append(("vector -> hybrid, recall_at_5", _pool(vec, hyb, "recall_at_5")))
        scenarios.append(("vector -> hybrid, ndcg_at_10", _pool(vec, hyb, "ndcg_at_10")))
        scenarios.append(("vector -> hybrid, hit_at_5", _pool(vec, hyb, "hit_at_5")))
        scenarios.append(("hybrid -> copy +20/-5 cases, recall_at_5", _injected(hyb, "recall_at_5", 20, 5, args.seed)))
        if ids["hybrid_rerank"]:
            rr = _per_case(ids["hybrid_rerank"])
            scenarios.append(("hybrid -> hybrid_rerank, ndcg_at_10", _pool(hyb, rr, "ndcg_at_10")))

    powers = [float(x) for x in args.powers.split(",")]
    rows = []
    print(f"alpha {args.alpha}, {args.reps} samples per size, {args.resamples} sign flips per test, seed {args.seed}")
    for name, pool in scenarios:
        mu, sd, step = float(pool.mean()), float(pool.std()), lattice_step(pool)
        print(f"\n{name}: pool of {len(pool)} cases, Δ {mu:+.4f}, sd(d) {sd:.4f}, "
              f"{int(np.count_nonzero(pool))} cases differ; MDE at n={len(pool)}: {mde(sd, len(pool), args.alpha, step=step):.4f}"
              + (f"; every difference is ±{step:g}: continuity step {step:g}" if step else ""))
        for target in powers:
            n = n_needed(sd, mu, args.alpha, target, step)
            if n is None:
                print("  no mean difference: nothing to detect")
                break
            t = time.perf_counter()
            measured = simulated_power(pool, n, args.reps, args.seed, args.alpha, args.resamples)
            predicted = predicted_power(mu, sd, n, args.alpha, step)
            signflip = predicted_power_signflip(mu, sd, n, args.alpha)
            rows.append((name, n, predicted, signflip, measured))
            print(f"  n={n:6d}  predicted {predicted:.3f}  (sign-flip variant {signflip:.3f})  measured {measured:.3f}  "
                  f"diff {100 * (measured - predicted):+5.1f} points  ({time.perf_counter() - t:.0f} s)", flush=True)

    print("\n| scenario | n | predicted power | sign-flip variant | measured (tool's test) | measured − predicted |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, n, pred, text, meas in rows:
        print(f"| {name} | {n} | {pred:.3f} | {text:.3f} | {meas:.3f} | {100 * (meas - pred):+.1f} pt |")
    worst = max(abs(m - p) for *_, p, _, m in rows)
    print(f"\nlargest |measured − predicted|: {100 * worst:.1f} points")
    return 0 if worst <= 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
