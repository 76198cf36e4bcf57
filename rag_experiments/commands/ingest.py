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
    p.set_defaults(func=_ingest)


def _ingest(args) -> int:
    from ..app import open_retriever

    session = open_retriever(args.overrides)
    try:
        print(session.ingest_report.summary())
        rows = session.conn.execute(
            "SELECT strategy_id, chunker, n_chunks, built_at FROM strategies ORDER BY built_at").fetchall()
        print("strategies in this database:")
        for sid, chunker, n, built in rows:
            print(f"  {sid:28s} {chunker:10s} {n:7d} chunks  built {built:%Y-%m-%d %H:%M}")
    finally:
        session.close()
    return 0
