"""The k-fold estimate of a sweep's selection (issue 56 deliver 1), measured on real sweeps and on a null.

    # real sweeps (each run's per_case.json; nothing re-run): in-sample best, out-of-fold [95%], and, when
    # the golden set has a frozen split, the dev-chosen point's test value for comparison
    MLFLOW_TRACKING_URI=sqlite:////tmp/kfold/demo_mlflow.db .venv/bin/python tools/kfold_selection_table.py \\
        --header --collection demo --objective recall_at_5 --sweep rrf_k=PARENT_ID
    # the null model of tools/null_sweep_simulation.py: bias of the in-sample best and of the out-of-fold value
    .venv/bin/python tools/kfold_selection_table.py --null --ns 5,20 --reps 500

Real sweeps: the k-fold estimate is the tool's own (``tracking.held_out.kfold_estimate``: the line the
sweep parent and ``compare --sweep`` print when the golden set has no split); it uses every case, as it
would on the same sweep with the split removed. The split's columns are ``held_out.best_on_dev`` and
``held_out.sides``, what the tool prints with the split.

Null: the champion of record's 230 per-case recall@5 values, each sweep point a copy with each case
redrawn with probability 0.3 (``independent``) or a shared base point with 5% redrawn again
(``correlated``): every point's expected value is the champion's mean, which is the truth of "what
choosing the best and using it delivers". Printed: the mean of (in-sample best - truth) and of
(out-of-fold - truth) over ``--reps`` sweeps, with ± the 95% half-width of that mean.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from null_sweep_simulation import RECORD, champion_table, null_points  # noqa: E402 - tools/ on the path

from rag_experiments.evaluation.metric_key import MetricKey  # noqa: E402
from rag_experiments.golden.split import DEFAULT_SEED, unit  # noqa: E402
from rag_experiments.stats.kfold_selection import (DEFAULT_FOLDS, first_best, out_of_fold_selection,  # noqa: E402
                                                   stratified_folds)


def sweep_row(collection: str, label: str, parent: str, objective: str, folds: int) -> str:
    from rag_experiments.tracking.compare import run_labels
    from rag_experiments.tracking.held_out import best_on_dev, kfold_estimate, shared_cases, sides, split_for
    from rag_experiments.tracking.runs import sweep_children

    runs = sweep_children(parent, per_case=True)
    shared = shared_cases(runs, objective)
    if shared is None:
        raise SystemExit(f"error: sweep {parent}: no per-case tables with {objective}")
    points, cases, matrix = shared
    r = kfold_estimate(points, cases, matrix, folds)
    names = run_labels(points)
    chose = ", ".join(f"{names[j]} ×{n}" for j, n in r.stability())
    split = split_for(runs)
    held = "no split found"
    if split is not None:
        best = best_on_dev(runs, objective, split)
        s = sides(best, MetricKey.parse(objective), split)
        held = (f"{names[[p.id for p in points].index(best.id)]}: dev {s.dev:.4f}, test {s.test:.4f} "
                f"[{s.test_interval[0]:.3f}, {s.test_interval[1]:.3f}] ({s.test_n} cases)")
    return (f"| {collection} | {label} | {len(points)} | {len(cases)} | {names[r.in_sample_choice]} "
            f"{r.in_sample_best:.4f} | {r.out_of_fold:.4f} [{r.interval[0]:.3f}, {r.interval[1]:.3f}] | "
            f"{r.optimism:+.4f} | {chose} | {held} |")


def null_table(ns: list[int], reps: int, folds: int, seed: int) -> None:
    table = champion_table()
    champion = table["recall_at_5"].to_numpy(dtype=float)
    ids = table["case_id"].astype(str).tolist()
    strata = (table["kind"].astype(str) + "/" + table["doc_type"].astype(str)).tolist()
    fold_of = stratified_folds(strata, [unit(DEFAULT_SEED, c) for c in ids], folds)
    truth = float(champion.mean())
    print(f"null: {RECORD.relative_to(ROOT)}, {len(champion)} cases, truth (every point's expected recall@5) "
          f"{truth:.4f}; {folds} folds; {reps} sweeps per row")
    print("| model | N | in-sample best − truth | out-of-fold − truth | out-of-fold sd | folds agreeing "
          "with the in-sample choice |")
    print("|---|---:|---:|---:|---:|---:|")
    rng = np.random.default_rng(seed)
    for model in ("independent", "correlated"):
        for n in ns:
            best, oof, agree = [], [], []
            for _ in range(reps):
                points = null_points(champion, n, model, rng)
                r = out_of_fold_selection(points, fold_of, first_best(), samples=0)
                best.append(r.in_sample_best - truth)
                oof.append(r.out_of_fold - truth)
                agree.append(np.mean(np.array(r.chosen) == r.in_sample_choice))

            def cell(x: list[float]) -> str:
                return f"{np.mean(x):+.4f} ±{1.96 * np.std(x, ddof=1) / np.sqrt(len(x)):.4f}"
            print(f"| {model} | {n} | {cell(best)} | {cell(oof)} | {np.std(oof, ddof=1):.4f} | "
                  f"{np.mean(agree):.0%} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--collection", default="")
    ap.add_argument("--objective", default="recall_at_5")
    ap.add_argument("--sweep", action="append", default=[], help="LABEL=PARENT_RUN_ID (repeatable)")
    ap.add_argument("--folds", type=int, default=DEFAULT_FOLDS)
    ap.add_argument("--header", action="store_true")
    ap.add_argument("--null", action="store_true", help="the null simulation instead of sweeps")
    ap.add_argument("--ns", default="5,20")
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    if args.null:
        null_table([int(x) for x in args.ns.split(",")], args.reps, args.folds, args.seed)
        return
    if args.header:
        print("| collection | sweep | points | cases | in-sample best | out-of-fold [95%] | optimism | folds chose "
              "| frozen split: chosen on dev, test [95%] |")
        print("|---|---|---:|---:|---|---:|---:|---|---|")
    for spec in args.sweep:
        label, parent = spec.split("=", 1)
        print(sweep_row(args.collection, label, parent, args.objective, args.folds))


if __name__ == "__main__":
    main()
