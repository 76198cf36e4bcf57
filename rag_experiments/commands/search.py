"""``rag-exp search``: ask the champion (or any config) a question and read the ranked hits.

    rag-exp search "how much memory can a sort use"                    # the champion 'default'
    rag-exp search "work_mem" --champion faq -k 5
    rag-exp search "pg_dump --jobs" retrieval=keyword fusion.depth=80   # a config by Hydra overrides
    rag-exp search "sort memory" --config experiments/promoted/default.yaml --ingest
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import UserError

SNIPPET_CHARS = 160


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "search", help="query the champion (or a config) and print the ranked hits",
        description="Run one query through a retriever and print a table: rank, score, source_uri, heading "
        "breadcrumb and a text snippet (plus the rank each leg gave the chunk). Without overrides or "
        "--config: the champion (registered model rag-retriever-NAME, alias champion, re-registered from "
        "experiments/promoted/NAME.record.json when the registry lacks it). The database must hold the "
        "corpus the retriever was built for; --ingest builds it.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("query", help="the question")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="Hydra overrides: search with this config instead of the champion")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--champion", metavar="NAME", help="the champion of this name (default: default)")
    src.add_argument("--config", metavar="FILE", help="a resolved config YAML (e.g. experiments/promoted/default.yaml)")
    p.add_argument("-k", type=int, default=10, help="hits to show (default: 10)")
    p.add_argument("--ingest", action="store_true", help="ingest the corpus when the database lacks it")
    p.add_argument("--json", action="store_true", help="print the hits as JSON lines instead of a table")
    p.set_defaults(func=cmd_search)


def snippet(text: str, width: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def legs(hit) -> str:
    parts = [f"{name[0]}{rank}" for name, rank in (("vector", hit.vector_rank), ("keyword", hit.keyword_rank),
                                                   ("rerank", hit.rerank_rank)) if rank is not None]
    return " ".join(parts) or "—"


def hits_table(query: str, hits: list, title: str):
    from rich.table import Table

    table = Table(title=title, caption=f"query: {query!r}; legs: v = vector rank, k = keyword rank, "
                  "r = rerank rank", caption_justify="left", show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("source_uri / heading", overflow="fold", max_width=44)
    table.add_column("snippet", overflow="fold")
    table.add_column("legs", justify="right")
    for h in hits:
        table.add_row(str(h.rank), f"{h.score:.4f}", f"[bold]{h.source_uri}[/] [dim]{h.start}-{h.end}[/]\n{h.heading}",
                      snippet(h.text), legs(h))
    return table


def cmd_search(args: argparse.Namespace) -> int:
    import json

    from ..limits import check_query
    from ..terminal import console
    from ..serving.retriever import Retriever

    if args.overrides and args.champion:
        raise UserError("give either --champion NAME or config overrides, not both")
    if args.overrides and args.config:
        raise UserError("give either --config FILE or config overrides, not both")
    check_query(args.query, "query")  # before a database or a model is opened (Retriever.search checks it too)
    if args.overrides:
        r = Retriever.from_config(list(args.overrides), ingest=args.ingest)
    elif args.config:
        r = Retriever.from_config(args.config, ingest=args.ingest)
    else:
        r = Retriever.from_champion(args.champion or "default", ingest=args.ingest)
    try:
        hits = r.search(args.query, k=args.k)
    finally:
        r.close()
    if args.json:
        for h in hits:
            print(json.dumps(h.to_dict(), ensure_ascii=False))
        return 0
    out = console()
    out.print(hits_table(args.query, hits, f"{r.label} — {r.strategy.strategy_id} ({r.settings.retrieval.variant})"))
    return 0
