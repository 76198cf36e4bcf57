"""``rag-exp golden import-queries FILE``: a sample of a query log as ``production`` cases.

    rag-exp golden import-queries queries.txt               # one query a line
    rag-exp golden import-queries log.jsonl --size 150      # {"query": ..., "count": 12, "ts": ...}
    rag-exp golden label --pool RUN_A RUN_B -k 10           # then label them by pooling (or --by-hand)

Queries are normalised and deduplicated (counts summed), cut into traffic strata (head: the queries
that make the first 50% of the traffic, torso: the next 30%, tail: the rest), and ``--size`` of
them drawn, split equally over the strata (``--seed``). They are appended without evidence, each
with its stratum; importing the same file again appends nothing. Rules:
:mod:`rag_experiments.golden.import_queries`.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any, golden_arg: Any, corpus_arg: Any) -> None:
    from ..golden.import_queries import DEFAULT_SIZE

    sp = sub.add_parser(
        "import-queries", help="a query log as production cases: deduplicated, sampled by traffic strata",
        description="Read a query log (text: one query a line; or JSON lines {\"query\", \"count\"?, \"ts\"?}), "
        "normalise and deduplicate it (counts summed), cut it into traffic strata (head: the queries making the "
        "first 50%% of the traffic; torso: the next 30%%; tail: the rest), draw --size queries split equally over "
        "the strata, and append them as cases of kind production without evidence, each recording its stratum "
        "(segments production-head, production-torso, production-tail). Label them by pooling afterwards "
        "(rag-exp golden label --pool ..., or --by-hand); a case no label finds a relevant passage for stays in "
        "the set, unscored, and rag-exp golden stats reports the share of such queries.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n")[1])
    sp.add_argument("file", metavar="FILE", help="the query log (.txt: one query a line; .jsonl: JSON lines)")
    golden_arg(sp)
    sp.add_argument("--size", type=int, default=DEFAULT_SIZE,
                    help=f"cases to draw, split equally over head / torso / tail (default: {DEFAULT_SIZE})")
    sp.add_argument("--seed", type=int, default=13, help="the sample's seed (default: 13)")
    sp.add_argument("--dry-run", action="store_true", help="show the strata and the sample, append nothing")
    sp.set_defaults(func=cmd_import_queries)


def cmd_import_queries(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from ..golden.import_queries import HEAD_SHARE, TORSO_SHARE, import_queries

    console = Console(highlight=False, soft_wrap=True)
    report = import_queries(args.golden, args.file, size=args.size, seed=args.seed, dry_run=args.dry_run)
    console.print(f"{report.path} ({report.fmt}): {report.lines} queries read, {report.traffic} occurrences, "
                  f"{report.distinct} distinct after normalising", markup=False)
    t = Table(title=f"traffic strata (head: first {HEAD_SHARE:.0%} of the traffic, torso: up to {TORSO_SHARE:.0%}, "
                    f"tail: the rest); --size {report.size}, --seed {report.seed}")
    for c in ("stratum", "distinct queries", "traffic", "sampled", "appended", "already in the set"):
        t.add_column(c, justify="left" if c == "stratum" else "right")
    for row in report.table_rows():
        t.add_row(*row)
    console.print(t)
    if report.equal_counts:
        console.print("note: every query has the same count: the strata split them arbitrarily (in a seeded "
                      "order); a log with counts (JSON lines, or repeated lines) gives meaningful strata", markup=False)
    verb = "would append" if args.dry_run else "appended"
    console.print(f"{verb} {report.appended} production case(s) without evidence to {args.golden}; "
                  f"{report.already_present} already in the set", markup=False)
    if report.appended and not args.dry_run:
        console.print("next: label them by pooling, e.g. rag-exp golden label --pool RUN_A RUN_B -k 10 "
                      "(or --by-hand); rag-exp golden stats shows the share no passage answers", markup=False)
    return 0
