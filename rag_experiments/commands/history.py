"""``rag-exp history``: the objective over time for the nightly gate runs and the promotions.

    rag-exp history                                   # recall_at_5 of the 'default' champion
    rag-exp history --metric mrr_at_10 --name faq --last 30
    rag-exp history --markdown-summary "$GITHUB_STEP_SUMMARY"   # the nightly job
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import UserError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "history", help="the objective over time (nightly gate runs and promotions), across golden versions",
        description="One row per nightly gate run and per promotion of rag-retriever-NAME, oldest first: the "
        "metric as logged, and against the previous row the delta on the cases both have (the older golden "
        "version's cases and labels when the golden set grew in between; the newer run is rescored from its "
        "stored ranked lists). 'chained' adds those deltas up from the first value. The table and a plot are "
        "logged to MLflow (a run named 'history NAME', tag history=true) unless --no-log.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--metric", default=None, help="metric (default: the champion's primary metric, else recall_at_5)")
    p.add_argument("--name", default="default", help="champion name (default: default)")
    p.add_argument("--last", type=int, default=None, metavar="N", help="only the last N points")
    p.add_argument("--markdown-summary", metavar="FILE", help="append the latest point, the trend and the table "
                   "to FILE (e.g. $GITHUB_STEP_SUMMARY)")
    p.add_argument("--no-log", action="store_true", help="do not log the table and plot to MLflow")
    p.set_defaults(func=cmd_history)


def cmd_history(args: argparse.Namespace) -> int:
    from ..terminal import console
    from ..tracking.history import build_history, log_history, rich_table, runs_with_overrides, trend_markdown
    from ..tracking.champion import current_champion, model_name
    from ..tracking.runs import client

    if args.last is not None and args.last < 1:
        raise UserError(f"--last must be >= 1, got {args.last}")
    c = client()
    model_name(args.name)  # validate early
    metric = args.metric
    if metric is None:
        champion = current_champion(args.name, c, record_fallback=True)
        metric = (champion.metric if champion is not None else None) or "recall_at_5"
    points = build_history(args.name, metric, args.last, c)
    if points and all(p.value is None for p in points):
        logged = sorted({m for p in points for m in p.run.metrics if not m.startswith(("cache.", "time.", "history."))})
        raise UserError(f"--metric {metric}: no point of the history logged it; metrics they logged: "
                        f"{', '.join(logged) or '(none)'}")
    out = console()
    others = runs_with_overrides(args.name, c)
    if others:
        shown = "; ".join(f"{r.id[:12]} ({r.tags['gate_overrides'][:80]})" for r in others[:3])
        out.print(f"left out {len(others)} gate run(s) made with --set overrides (not the promoted config): {shown}"
                  + (" ..." if len(others) > 3 else ""), soft_wrap=True, markup=False)
    if not points:
        out.print(f"no nightly gate run and no promotion of {model_name(args.name)} yet")
    else:
        out.print(rich_table(points, metric, f"{metric} over time: {model_name(args.name)}"))
        if not args.no_log:
            rid = log_history(points, metric, args.name, c)
            out.print(f"logged history/table.md, history/{metric}.png and the series history.{metric} to run {rid}")
    if args.markdown_summary:
        with Path(args.markdown_summary).open("a", encoding="utf-8") as fh:
            fh.write(trend_markdown(points, metric, args.name) + "\n")
    return 0
