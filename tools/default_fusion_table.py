"""The default-fusion table (issue 58 item 4, issue 56's must-show): for each sweep, the point chosen on
the golden set's **dev** cases, its dev value and its **test** value with a 95% interval, and the
default's (hybrid RRF k=60) dev and test values, with the paired test of chosen vs default on the test
cases only (``rag-exp compare`` pairs over all cases; it has no flag to restrict to one side).

    MLFLOW_TRACKING_URI=sqlite:////tmp/h9/mlflow.db .venv/bin/python tools/default_fusion_table.py \\
        --collection demo --objective recall_at_5 --default RUN_ID --sweep rrf_k=PARENT --sweep convex=PARENT

The selection is the tool's own (``tracking.held_out.best_on_dev``: the sweep parent's rule); values
come from each run's ``per_case.json``. Prints one Markdown row per sweep.
"""

from __future__ import annotations

import argparse

import numpy as np

from rag_experiments.evaluation.metric_key import MetricKey
from rag_experiments.golden.split import TEST
from rag_experiments.stats.paired import paired_bootstrap_delta_ci, paired_permutation_test
from rag_experiments.tracking.held_out import best_on_dev, shared_cases, sides, split_for
from rag_experiments.tracking.runs import get_run, sweep_children


def point(run) -> str:
    """The fusion setting a run used, from its params (its name also carries the fixed overrides)."""
    p = run.params
    if p.get("fusion.method") == "convex":
        return f"convex α={p.get('fusion.alpha')} ({p.get('fusion.norm')})"
    return f"{p.get('fusion.method')} k={p.get('fusion.rrf_k')}"


def on_test(default, best, objective: str, split) -> tuple[np.ndarray, np.ndarray]:
    """The default's and the chosen point's per-case values on the test cases both tables hold, paired by
    case id (``tracking.held_out.shared_cases``: the values the tool pairs)."""
    runs, cases, matrix = shared_cases([default, best], objective)
    test = np.array(split.sides(cases)) == TEST
    return matrix[test, 0], matrix[test, -1]  # one column when the default is the chosen point


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--collection", required=True)
    ap.add_argument("--objective", required=True)
    ap.add_argument("--default", required=True, help="run id of the default (hybrid RRF k=60)")
    ap.add_argument("--sweep", action="append", required=True, help="LABEL=PARENT_RUN_ID")
    ap.add_argument("--header", action="store_true")
    args = ap.parse_args()
    key = MetricKey.parse(args.objective)
    default = get_run(args.default, per_case=True)
    if args.header:
        print("| collection | sweep | points | chosen on dev | dev | test [95%] | default dev | default test [95%] "
              "| test Δ chosen − default [95%] | paired p (test) |")
        print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for spec in args.sweep:
        label, parent = spec.split("=", 1)
        runs = sweep_children(parent, per_case=True)
        split = split_for(runs)
        if split is None:
            raise SystemExit(f"error: sweep {parent}: its golden set has no split (rag-exp golden split)")
        best = best_on_dev(runs, args.objective, split)
        s, d = sides(best, key, split), sides(default, key, split)
        va, vb = on_test(default, best, args.objective, split)
        lo, hi = paired_bootstrap_delta_ci(va, vb)
        p = paired_permutation_test(va, vb)
        print(f"| {args.collection} | {label} | {len(runs)} | {point(best)} | {s.dev:.4f} | {s.test:.4f} "
              f"[{s.test_interval[0]:.3f}, {s.test_interval[1]:.3f}] | {d.dev:.4f} | {d.test:.4f} "
              f"[{d.test_interval[0]:.3f}, {d.test_interval[1]:.3f}] | {np.mean(vb) - np.mean(va):+.4f} "
              f"[{lo:+.3f}, {hi:+.3f}] | {p:.3f} |")


if __name__ == "__main__":
    main()
