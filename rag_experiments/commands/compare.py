"""``rag-exp compare``: runs side by side, with intervals, paired deltas and Holm-corrected p-values.

    rag-exp compare --last-sweep
    rag-exp compare RUN_A RUN_B --metrics recall_at_5,mrr_at_10 --segments exact,paraphrase
    rag-exp compare --sweep PARENT_ID --baseline RUN_ID --markdown >> "$GITHUB_STEP_SUMMARY"
    rag-exp compare --tag variant=hybrid --log-plots
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import UserError


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "compare", help="compare runs side by side (intervals, paired tests vs a baseline)",
        description="One row per run: every metric with its 95% bootstrap interval, the primary "
        "metric per segment, and against the baseline the paired delta over cases (aligned by "
        "case_id), the p-value of a two-sided paired randomization test (Holm-corrected across the "
        "runs compared, per column; --family all: across every test of the table) and win/tie/loss counts on the primary metric; a delta that is not "
        "significant also shows MDE, the smallest difference those paired cases could detect (α, power 0.8), "
        "and n≈, the cases that would detect the delta observed. The baseline is "
        "--baseline, else the first run given (with --sweep/--last-sweep: the first sweep point to "
        "start, the other points best-first on the objective, with the resamples and seed the parent "
        "recorded: the table the parent's Overview shows, cell for cell). Runs on different versions of one golden set (one a prefix of the other) are compared on the "
        "older version's cases and labels, the newer runs rescored from their stored ranked lists; the cases "
        "added since are reported beside the table. A run evaluated at another level (eval.level: chunk or "
        "document) than the baseline, or on a golden set not on one chain with the baseline's, is refused: one "
        "line names both runs and the two levels or versions. Runs on different corpora are flagged loudly.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="runs to compare (first = baseline)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--sweep", metavar="PARENT_ID", help="the child runs of this sweep parent run")
    src.add_argument("--last-sweep", action="store_true", help="the children of the latest sweep parent")
    src.add_argument("--tag", metavar="KEY=VALUE", help="every run with this tag (e.g. variant=hybrid)")
    p.add_argument("--baseline", metavar="RUN_ID", help="compare every other run with this one "
                   "(default: the first run)")
    p.add_argument("--metrics", type=_csv, default=None, metavar="M1,M2",
                   help="metric columns (default: what the baseline run was configured to report: "
                   "recall@k for its eval.ks, mrr and ndcg at their cutoffs)")
    p.add_argument("--segments", type=_csv, default=None, metavar="S1,S2",
                   help="segment columns showing the primary metric: query kinds (exact, paraphrase) "
                   "or doc types (doc_type.config) (default: every query kind)")
    p.add_argument("--primary", default=None, help="metric for segments and W/T/L (default: the baseline "
                   "run's configured objective)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level for the * marks (default: 0.05)")
    p.add_argument("--family", choices=("runs", "all"), default="runs",
                   help="what one star's Holm correction covers: runs = the runs compared with the baseline, "
                   "separately in each column (default; with two runs nothing is corrected); all = every paired "
                   "test of the table at once (runs x metrics x segments x judged@k)")
    p.add_argument("--folds", type=int, default=5, metavar="K",
                   help="with --sweep/--last-sweep on a golden set with no dev/test split: the k-fold estimate of "
                   "the selection (choose the best point on K-1 folds of the cases, measure it on the one left out; "
                   "default 5, at least 2, never fewer than 2 cases per fold)")
    p.add_argument("--resamples", type=int, default=None,
                   help="random sign flips per test when cases are too many to enumerate (default: $RAG_EXP_RESAMPLES, else 10000)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the randomization test (default: $RAG_EXP_SEED, else 13)")
    p.add_argument("--markdown", action="store_true", help="print a GitHub-flavoured Markdown table")
    p.add_argument("--log-plots", action="store_true", help="log comparison plots to the sweep parent run, "
                   "else to a new run tagged comparison=true")
    p.add_argument("--plots-dir", metavar="DIR", help="also save the plots as PNG files in DIR")
    p.add_argument("--no-explorer", action="store_true", help="do not log the case explorer (each run against the "
                   "baseline, its cases side by side, lost first: explorer/cases_vs_<baseline>.html on that run)")
    p.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from ..tracking.compare import (DIRECTION_TAG, build_comparison, parent_test_settings, run_labels,
                                    sweep_order)
    from ..tracking.compare_plots import log_plots, save_plots
    from ..tracking.compare_render import print_comparison
    from ..tracking.configured import comparison_defaults
    from ..tracking.runs import client, get_run, select_runs
    from ..tracking.versioned import align, gap_markdown, newest_runs, print_gap

    if not (args.run_ids or args.sweep or args.last_sweep or args.tag):
        raise UserError("nothing to compare", hint="give RUN_IDs, --sweep PARENT_ID, --last-sweep or --tag KEY=VALUE")
    if not 0 < args.alpha < 1:
        raise UserError(f"--alpha must be in (0, 1), got {args.alpha}")
    if args.folds < 2:
        raise UserError(f"--folds must be at least 2, got {args.folds}")
    c = client()
    runs, parent = select_runs(args.run_ids, args.sweep, args.last_sweep, args.tag, c=c)
    if parent is not None and not args.run_ids:  # the order of the parent's own table
        runs = sweep_order(runs, parent.tags.get("objective"), parent.tags.get(DIRECTION_TAG) != "minimize")
    args.resamples, args.seed = parent_test_settings(parent, args.resamples, args.seed)
    if args.baseline:
        base = next((r for r in runs if r.id == args.baseline.lower()), None) or get_run(args.baseline, c=c)
        runs = [base] + [r for r in runs if r.id != base.id]
    if len(runs) < 2:
        raise UserError(f"need at least two runs to compare, found {len(runs)}")
    from ..tracking.versioned import not_comparable

    unlike = not_comparable(runs, c)  # another eval level, or golden versions not on one chain: refused
    if unlike is not None:
        raise UserError(unlike.line, hint=unlike.hint)
    from ..tracking.coverage import COVERAGE_LINE, bounds_lines, gaps_at_depth, newest_golden, on_newest_labels
    from ..tracking.sampled_log import MARK as SAMPLED_MARK

    on_labels = on_newest_labels(runs, c)  # labels given since the runs: their run.trec rescored, not re-run
    runs = on_labels.runs or runs
    runs_before = list(runs)
    # another golden version on the same chain: compare on the older version's shared cases
    alignment = align(runs, c)
    if alignment.gap is not None:
        runs = alignment.runs
    metrics, primary = comparison_defaults(runs)
    if args.primary:
        metrics = [m for m in metrics if m != primary]
        primary = args.primary
    cmp = build_comparison(runs, args.metrics or metrics, args.segments, primary, args.alpha, args.resamples,
                           args.seed, labels=run_labels(runs), family=args.family)
    if alignment.gap is None:  # label coverage checked at the primary metric's depth (one labelling depth)
        at_depth = gaps_at_depth(runs, [row.label for row in cmp.rows], primary,
                                 on_labels.golden or newest_golden(runs), args.alpha, args.resamples, args.seed, c,
                                 sampled=any(SAMPLED_MARK in r.metrics for r in runs))
        if at_depth is not None:
            cmp.warnings[:] = [w for w in cmp.warnings if not w.startswith(COVERAGE_LINE)] + at_depth
    if alignment.reason:
        cmp.warnings.append(alignment.reason)
    print_comparison(cmp, markdown=args.markdown)
    if alignment.gap is not None:
        columns = list(dict.fromkeys([primary, *(args.metrics or metrics)]))
        originals = {r.id: r for r in runs_before}
        newest = [originals[r.id] for r in newest_runs(runs_before, alignment.gap)]
        if args.markdown:
            print(gap_markdown(alignment.gap, newest[0] if newest else None, columns, who="run"))
        else:
            print_gap(alignment.gap, newest, columns)
    named = {row.run.id: row.label for row in cmp.rows}  # the table's names for the runs
    bounded = [] if alignment.gap is not None else bounds_lines(runs, primary, on_labels.golden, c,
                                                                [named.get(r.id, r.label) for r in runs])
    for text in [on_labels.note] * bool(on_labels.note) + bounded:  # (runs on several versions: not bounded)
        _say(args, text)
    if parent is not None and not args.run_ids:  # a sweep: its best point on dev and test (tracking.held_out)
        from ..tracking.held_out import sweep_lines

        objective = parent.tags.get("objective") or primary
        for text in sweep_lines(cmp, objective, parent.tags.get(DIRECTION_TAG) != "minimize", args.markdown,
                                args.folds):
            _say(args, text)
    from ..tracking.ui_links import compare_route, line

    _say(args, line("these runs side by side", compare_route([r.experiment_id for r in runs], [r.id for r in runs]),
                    c.tracking_uri))
    if not args.no_explorer:  # the cases behind each W/T/L, side by side (tracking.explorer)
        from ..tracking.explorer import compare_lines

        for text in compare_lines(cmp, c):
            _say(args, text)
    if args.plots_dir:
        for path in save_plots(cmp, args.plots_dir):
            _say(args, f"saved {path}")
    if args.log_plots:
        run_id, paths = log_plots(cmp, parent, c)
        _say(args, f"logged {', '.join(paths)} to run {run_id}")
    return 0


def _say(args: argparse.Namespace, text: str) -> None:
    import sys

    # with --markdown, stdout is the table (it may be appended to a job summary): report elsewhere
    print(text, file=sys.stderr if args.markdown else sys.stdout)
