"""rag-exp ingest: index the configured corpus under the configured chunking (idempotent)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser(
        "ingest", help="chunk, embed and index the corpus (no-op when nothing changed)",
        description="Ingest the corpus of the Hydra config (conf/config.yaml) with optional overrides, e.g. "
        "rag-exp ingest --set chunking=fixed --set chunking.max_tokens=96. Re-running an unchanged "
        "config is a no-op; a new chunking adds a strategy beside the others.")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="a Hydra override (repeatable)")
    p.add_argument("--yes", action="store_true",
                   help="embed through a paid API without asking (the estimate is still printed)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the estimated tokens and cost of embedding what is not cached yet, then stop")
    p.set_defaults(func=_ingest)


def _ingest(args) -> int:
    from ..session import open_retriever
    from ..embedding.api import ApiUsage
    from ..embedding.cost import EstimateOnly, describe_usage, usage_metrics

    try:
        session = open_retriever(args.overrides, yes=args.yes, dry_run=args.dry_run)
    except EstimateOnly:
        return 0
    try:
        if args.dry_run and not session.cost_gate.estimates:
            print("dry run: nothing to pay (every text is cached or the model is local)")
        print(session.ingest_report.summary())
        if session.copy_report is not None:  # corpus.copies=report|exclude
            print(session.copy_report.line() + _copies_tail(session.settings.corpus.copies, session.copy_report))
        line = describe_usage({**session.cost_gate.metrics(), **usage_metrics(session.embedder, ApiUsage())})
        if line:
            print(line)
        rows = session.conn.execute(
            "SELECT strategy_id, chunker, n_chunks, built_at FROM strategies ORDER BY built_at").fetchall()
        print("strategies in this database:")
        for sid, chunker, n, built in rows:
            print(f"  {sid:28s} {chunker:10s} {n:7d} chunks  built {built:%Y-%m-%d %H:%M}")
    finally:
        session.close()
    return 0



def _copies_tail(mode: str, report) -> str:
    """What was done with the copies found, and how to change it."""
    if not report.copies:
        return ""
    if mode == "exclude":
        return f"; excluded from the index (corpus.copies=exclude; {report.n_documents - len(report.copies)} documents indexed)"
    return "; indexed all the same (corpus.copies=report; --set corpus.copies=exclude indexes without them)"
