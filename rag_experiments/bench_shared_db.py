"""Bench case ``shared``: a second chunking strategy ingested into a database that already holds
(and has analysed) another one, beside the same strategy ingested into a fresh database.

Why: PostgreSQL plans with the statistics it has. After an ingest ends (:func:`.store.settle`:
ANALYZE), the BM25 tables' statistics describe the strategies present then; a *new* strategy's
rows, written in the next ingest's transaction, are estimated at 1 row, and the pack build
(``bm25_stats.refresh_packs``: postings JOIN ordinals) was planned as a nested loop that rescanned
every ordinal for each posting: ~6 minutes for a 9,564-chunk collection that a fresh database
ingested in 96 s (issue 58). The target is the shared database within 1.3x of the fresh one.

The corpus is synthetic (:func:`.bench_scale.build_corpus`) and the embedder the bench's cheap
hash embedder, so what is timed is chunking, writes, BM25 statistics and the HNSW build, not a
model. Printed rows: both ingests' seconds, their ratio, the pack builds' seconds, and the pack
join's plan for the second strategy as EXPLAIN shows it with the statistics the first ingest left
(what the code before issue 58 ran) and as it runs now.

    rag-exp bench --only shared --shared-chunks 10000
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from . import bm25_stats
from .chunking import ChunkingParams
from .corpus.loader import load_corpus

# The first strategy (analysed, present before) and the second one (new, ingested after it): the
# second chunks smaller, so it has more chunks and postings than the first, as in a chunking sweep.
FIRST = ChunkingParams("heading", 200, 0, True)
SECOND = ChunkingParams("fixed", 96, 16, False)

PACK_PLAN = ("EXPLAIN SELECT p.lexeme, array_agg(o.ord ORDER BY o.ord) FROM bm25_postings p"
             " JOIN bm25_ords o ON o.strategy_id = %(sid)s AND o.chunk_id = p.chunk_id"
             " WHERE p.strategy_id = %(sid)s GROUP BY p.lexeme")


def _db(admin: str) -> tuple[str, str]:
    name = f"rag_bench_shared_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    return name, make_conninfo(**{**conninfo_to_dict(admin), "dbname": name})


def _drop(admin: str, name: str) -> None:
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def join_method(plan_lines: list[str]) -> str:
    """'nested loop', 'hash join' or 'merge join': the first join node of an EXPLAIN."""
    for line in plan_lines:
        for method in ("Nested Loop", "Hash Join", "Merge Join"):
            if method in line:
                return method.lower()
    return "no join"


class _ExplainingConnection:
    """The connection refresh_packs is given: EXPLAINs the pack INSERT just before running it."""

    def __init__(self, conn: psycopg.Connection, plans: list[list[str]]) -> None:
        self._conn, self._plans = conn, plans

    def execute(self, sql, params=None):
        if isinstance(sql, str) and sql.startswith("INSERT INTO bm25_packs"):
            self._plans.append([r[0] for r in self._conn.execute("EXPLAIN " + sql, params)])
        return self._conn.execute(sql, params)


class _PackTimer:
    """While installed, ``bm25_stats.refresh_packs`` is timed, and the pack join is EXPLAINed twice:
    with the statistics the ingest found (``stale``: what the code before issue 58 ran with) and as
    the INSERT runs (``actual``)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.stale: list[list[str]] = []
        self.actual: list[list[str]] = []

    def __enter__(self) -> "_PackTimer":
        self._real = real = bm25_stats.refresh_packs

        def timed(conn, strategy_id):
            self.stale.append([r[0] for r in conn.execute(PACK_PLAN, {"sid": strategy_id})])
            t = time.perf_counter()
            try:
                return real(_ExplainingConnection(conn, self.actual), strategy_id)
            finally:
                self.seconds.append(time.perf_counter() - t)

        bm25_stats.refresh_packs = timed
        return self

    def __exit__(self, *exc) -> None:
        bm25_stats.refresh_packs = self._real


def bench_shared_db(add: Callable[[str, str, str], None], admin: str, n_chunks: int = 10_000) -> dict[str, float]:
    """Rows through ``add(section, what, value)``; returns the two ingests' and pack builds' seconds."""
    from .bench_scale import HashEmbedder, build_corpus, sentence_pool
    from .chunk_index import ingest
    from .db.connect import connect

    work = Path(tempfile.mkdtemp(prefix="rag-bench-shared-"))
    names: list[str] = []
    try:
        pool, _ = sentence_pool()
        corpus = build_corpus(work / f"shared-{n_chunks}", n_chunks, pool, cases=(), progress=False)
        docs = load_corpus(corpus.root, corpus.name)
        embedder = HashEmbedder()

        name, url = _db(admin)
        names.append(name)
        conn = connect(url)
        with _PackTimer() as fresh_pack:
            second_fresh = ingest(conn, docs, SECOND, embedder)
        conn.close()

        name, url = _db(admin)
        names.append(name)
        conn = connect(url)
        first = ingest(conn, docs, FIRST, embedder)  # ends with settle(): ANALYZE of the BM25 tables
        t = time.perf_counter()
        with _PackTimer() as shared_pack:
            ingest(conn, docs, SECOND, embedder)
        shared_s = time.perf_counter() - t
        conn.close()

        add("shared", f"corpus: synthetic, {len(docs)} documents; first strategy {FIRST.name} ({first.n_chunks} chunks),"
            f" second {SECOND.name} ({second_fresh.n_chunks} chunks)", "")
        add("shared", "second strategy into a fresh database, s", f"{second_fresh.seconds:.1f}")
        add("shared", "second strategy into a database holding the first (analysed), s",
            f"{shared_s:.1f} ({shared_s / second_fresh.seconds:.2f}x the fresh one; target <= 1.3x)")
        add("shared", "its pack build (refresh_packs), s: fresh / shared database",
            f"{fresh_pack.seconds[0]:.1f} / {shared_pack.seconds[0]:.1f}")
        stale, actual = shared_pack.stale[0], shared_pack.actual[0]
        add("shared", "its pack join with the statistics the first ingest left / as run (after ANALYZE)",
            f"{join_method(stale)} / {join_method(actual)}")
        for line in stale:
            print("      stale: " + line)
        return {"fresh_s": second_fresh.seconds, "shared_s": shared_s, "fresh_pack_s": fresh_pack.seconds[0],
                "shared_pack_s": shared_pack.seconds[0]}
    finally:
        for name in names:
            _drop(admin, name)
        shutil.rmtree(work, ignore_errors=True)
