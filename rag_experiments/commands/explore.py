"""``rag-exp explore A B``: two runs' cases side by side in one HTML page, the cases B lost first.

    rag-exp explore BASELINE_RUN CANDIDATE_RUN
    rag-exp explore BASELINE_RUN CANDIDATE_RUN --metric mrr_at_10 --out cases.html --open
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "explore", help="two runs' cases side by side in an HTML page (the cases the candidate lost first)",
        description="Writes the case explorer that `rag-exp compare` logs to the candidate run "
        "(explorer/cases_vs_<baseline>.html): every case the two runs share, ordered lost first (the largest "
        "loss on the metric first), then won, then tied, each with its question, kind, segment, its evidence "
        "passages with the labelled span highlighted, and both runs' top k side by side (each hit's text, its "
        "verdict under the golden set's labels: relevant, partial, not or unjudged, its rank in the other list "
        "and who labelled it); filters by kind, segment, outcome and unjudged hits. One self-contained file "
        "(no network), drawn a page of cases at a time. Runs on two versions of one golden set are paired "
        "on the older version's cases, as compare pairs them.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("baseline", metavar="BASELINE_RUN", help="the run compared against (its golden set and corpus "
                   "give the labels and the text)")
    p.add_argument("candidate", metavar="CANDIDATE_RUN", help="the run whose wins and losses are listed")
    p.add_argument("--metric", default=None, help="the per-case metric that orders the cases (default: the "
                   "baseline's configured objective, e.g. recall_at_5; its cutoff is the k shown)")
    p.add_argument("--out", metavar="FILE", default=None,
                   help="where to write the page (default: explore_<baseline>_vs_<candidate>.html here)")
    p.add_argument("--open", action="store_true", help="open the page in the default web browser")
    p.set_defaults(func=cmd_explore)


def cmd_explore(args: argparse.Namespace) -> int:
    import webbrowser
    from pathlib import Path

    from ..errors import UserError
    from ..tracking.configured import comparison_defaults
    from ..tracking.explorer import runs_page
    from ..tracking.runs import client, get_run
    from ..tracking.versioned import align, not_comparable

    c = client()
    runs = [get_run(args.baseline, c=c), get_run(args.candidate, c=c)]
    unlike = not_comparable(runs, c)
    if unlike is not None:
        raise UserError(unlike.line, hint=unlike.hint)
    alignment = align(runs, c)
    if alignment.gap is not None:
        runs = alignment.runs
    metric = args.metric or comparison_defaults(runs)[1]
    page, data = runs_page(runs[0], runs[1], metric, c)
    out = Path(args.out or f"explore_{runs[0].id[:8]}_vs_{runs[1].id[:8]}.html")
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write the page ({exc.strerror})", hint="give a writable path") from None
    n = data["counts"]
    print(f"{out}: {len(data['cases'])} cases, {data['metric']} W/T/L {n['won']}/{n['tied']}/{n['lost']} "
          f"({data['labels'][1]} vs {data['labels'][0]}), lost first")
    if alignment.reason:
        print(alignment.reason)
    if args.open:
        webbrowser.open(out.resolve().as_uri())
    return 0
