"""BM25 statistics of a chunking strategy, kept in step with its chunks (migrations 0002, 0004).

Called by :func:`rag_experiments.chunk_index.ingest` inside its write transaction, under the chunks
writer lock, so the statistics commit (or roll back) with the chunks, and parallel ingests of
other strategies never interleave with them. Incremental: only the chunks of re-chunked or
removed documents are touched; N, the sum of chunk lengths and each lexeme's document frequency
move by exactly the postings this ingest deletes and writes (one statement each, so a frequency
cannot be adjusted without its postings changing, or the reverse). Each lexeme's largest tf and
smallest chunk length (the keyword leg's pruning bounds, migration 0006) widen as postings
arrive and stay put when postings leave: a bound that is loose is still a bound.

The packed postings (migration 0007, ``bm25_packs``: each lexeme's postings as arrays, summed by
the native accumulator) are rewritten for exactly the lexemes whose postings this ingest removed
or wrote (:func:`refresh_packs`, same transaction), so they never disagree with
``bm25_postings``; chunks get their ordinals (``bm25_ords``) as they are written.

tf and dl are read from the chunk's stored english tsvector (the same lexemes ``ts_rank`` sees):
tf = positions of the lexeme, dl = positions of all lexemes (a lexeme without positions counts 1,
as ``ts_stat`` counts it).
"""

from __future__ import annotations

import psycopg

# The lexemes whose postings changed in this transaction: the packs to rewrite.
_TOUCHED = "CREATE TEMP TABLE IF NOT EXISTS bm25_touched (lexeme text PRIMARY KEY) ON COMMIT DROP"
# Ordinals are renumbered (and every pack rewritten) when the numbering has this many times
# more slots than chunks: each re-ingest numbers its new chunks after the largest ordinal, and
# the native accumulator allocates a slot per ordinal.
RENUMBER_SLACK = 2
RENUMBER_MIN_SLOTS = 1024  # below this many slots, holes cost nothing worth a rewrite

_DL = "(SELECT coalesce(sum(coalesce(cardinality(v.positions), 1)), 0) FROM unnest(c.tsv) v)"


def remove_documents(conn: psycopg.Connection, strategy_id: str, doc_ids: list[str]) -> int:
    """Drop the postings of these documents' chunks (call before deleting the chunks) and lower
    the document frequencies by them; return the length they contributed to the strategy's sum
    of chunk lengths."""
    if not doc_ids:
        return 0
    removed = conn.execute(
        f"SELECT coalesce(sum({_DL}), 0) FROM chunks c WHERE c.strategy_id = %s AND c.doc_id = ANY(%s)",
        (strategy_id, doc_ids),
    ).fetchone()[0]
    conn.execute(_TOUCHED)
    conn.execute(
        "WITH gone AS (DELETE FROM bm25_postings p USING chunks c WHERE c.strategy_id = %(sid)s"
        "   AND c.doc_id = ANY(%(docs)s) AND p.strategy_id = %(sid)s AND p.chunk_id = c.chunk_id RETURNING p.lexeme),"
        " n AS (SELECT lexeme, count(*) AS k FROM gone GROUP BY lexeme),"
        " t AS (INSERT INTO bm25_touched SELECT lexeme FROM n ON CONFLICT DO NOTHING)"
        " UPDATE bm25_df d SET df = d.df - n.k FROM n WHERE d.strategy_id = %(sid)s AND d.lexeme = n.lexeme",
        {"sid": strategy_id, "docs": doc_ids},
    )
    # A lexeme left in no chunk keeps no frequency row.
    conn.execute("DELETE FROM bm25_df WHERE strategy_id = %s AND df = 0", (strategy_id,))
    conn.execute("DELETE FROM bm25_ords o USING chunks c WHERE c.strategy_id = %(sid)s AND c.doc_id = ANY(%(docs)s)"
                 " AND o.strategy_id = %(sid)s AND o.chunk_id = c.chunk_id", {"sid": strategy_id, "docs": doc_ids})
    return int(removed)


def add_documents(conn: psycopg.Connection, strategy_id: str, doc_ids: list[str]) -> int:
    """Write the postings of these documents' (just written) chunks and raise the document
    frequencies by them; return their total length."""
    if not doc_ids:
        return 0
    conn.execute(_TOUCHED)
    # the new chunks numbered after the largest ordinal, in chunk id order
    conn.execute(
        "INSERT INTO bm25_ords (strategy_id, chunk_id, ord)"
        " SELECT %(sid)s, c.chunk_id, (SELECT coalesce(max(o.ord), -1) + 1 FROM bm25_ords o WHERE o.strategy_id = %(sid)s)"
        "   + (row_number() OVER (ORDER BY c.chunk_id))::integer - 1"
        " FROM chunks c WHERE c.strategy_id = %(sid)s AND c.doc_id = ANY(%(docs)s)",
        {"sid": strategy_id, "docs": doc_ids},
    )
    # dl once per chunk (a MATERIALIZED CTE): written as a LATERAL subquery, the planner ran it as
    # a SubPlan once per *posting*, unnesting the whole tsvector again for each of its lexemes
    # (cost ~ postings x lexemes a chunk; measured on 5,000 synthetic chunks, 294k postings:
    # 14.7 of this statement's 23.4 s).
    conn.execute(
        "WITH c AS MATERIALIZED (SELECT c.strategy_id, c.chunk_id, c.tsv, " + _DL + " AS dl"
        "   FROM chunks c WHERE c.strategy_id = %(sid)s AND c.doc_id = ANY(%(docs)s)),"
        " new AS (INSERT INTO bm25_postings (strategy_id, lexeme, chunk_id, tf, dl)"
        "   SELECT c.strategy_id, u.lexeme, c.chunk_id, coalesce(cardinality(u.positions), 1), c.dl"
        # sorted by the postings key: the covering index is then filled in order (5,000 chunks:
        # 4.7 -> 3.6 s for this statement)
        "   FROM c CROSS JOIN LATERAL unnest(c.tsv) u ORDER BY u.lexeme, c.chunk_id RETURNING lexeme, tf, dl),"
        " t AS (INSERT INTO bm25_touched SELECT DISTINCT lexeme FROM new ON CONFLICT DO NOTHING)"
        # the pruning bounds (migration 0006) only ever widen here: removals leave them as they are
        " INSERT INTO bm25_df (strategy_id, lexeme, df, max_tf, min_dl)"
        " SELECT %(sid)s, lexeme, count(*), max(tf), min(dl) FROM new GROUP BY lexeme"
        " ON CONFLICT (strategy_id, lexeme) DO UPDATE SET df = bm25_df.df + EXCLUDED.df,"
        " max_tf = greatest(bm25_df.max_tf, EXCLUDED.max_tf), min_dl = least(bm25_df.min_dl, EXCLUDED.min_dl)",
        {"sid": strategy_id, "docs": doc_ids},
    )
    added = conn.execute(
        f"SELECT coalesce(sum({_DL}), 0) FROM chunks c WHERE c.strategy_id = %s AND c.doc_id = ANY(%s)",
        (strategy_id, doc_ids),
    ).fetchone()[0]
    return int(added)


def refresh_packs(conn: psycopg.Connection, strategy_id: str) -> None:
    """Rewrite the packed postings of the lexemes this transaction's :func:`remove_documents` and
    :func:`add_documents` touched (all of them on a strategy's first ingest, or when the
    ordinals are renumbered), from ``bm25_postings``; call once, after both."""
    conn.execute(_TOUCHED)
    n_chunks, slots, packed = conn.execute(
        "SELECT (SELECT count(*) FROM bm25_ords WHERE strategy_id = %(sid)s),"
        " (SELECT coalesce(max(ord), -1) + 1 FROM bm25_ords WHERE strategy_id = %(sid)s),"
        " EXISTS (SELECT 1 FROM bm25_packs WHERE strategy_id = %(sid)s)", {"sid": strategy_id}).fetchone()
    # Sorting a large strategy's postings by lexeme and ordinal: in memory rather than in ~4 MB
    # runs on disk (1M chunks, 59M postings: ~100 s). Raised for this transaction only, never lowered.
    conn.execute("SELECT set_config('work_mem', '256MB', true)"
                 " WHERE pg_size_bytes(current_setting('work_mem')) < pg_size_bytes('256MB')")
    if slots > RENUMBER_SLACK * n_chunks + RENUMBER_MIN_SLOTS:
        conn.execute("DELETE FROM bm25_ords WHERE strategy_id = %s", (strategy_id,))
        conn.execute("INSERT INTO bm25_ords (strategy_id, chunk_id, ord) SELECT %(sid)s, chunk_id,"
                     " (row_number() OVER (ORDER BY chunk_id))::integer - 1 FROM chunks WHERE strategy_id = %(sid)s",
                     {"sid": strategy_id})
        packed = False
    # Statistics of the rows this transaction wrote, before the join below is planned. The last
    # ANALYZE (settle, after the previous ingest) may predate this strategy: its postings and
    # ordinals were then estimated at 1 row and the join planned as a nested loop rescanning every
    # ordinal for each posting (issue 58: ~6 min for 9,564 chunks that a fresh database packed in
    # seconds). ANALYZE samples a bounded number of rows (300 x the statistics target), counts this
    # transaction's own uncommitted rows, and its statistics are visible to this transaction at once.
    conn.execute("ANALYZE bm25_postings, bm25_ords")
    pack = ("INSERT INTO bm25_packs (strategy_id, lexeme, ords, tfs, dls)"
            " SELECT %(sid)s, p.lexeme, array_agg(o.ord ORDER BY o.ord), array_agg(p.tf ORDER BY o.ord),"
            " array_agg(p.dl ORDER BY o.ord) FROM bm25_postings p"
            " JOIN bm25_ords o ON o.strategy_id = %(sid)s AND o.chunk_id = p.chunk_id"
            " WHERE p.strategy_id = %(sid)s {only} GROUP BY p.lexeme")
    if packed:
        conn.execute("DELETE FROM bm25_packs k USING bm25_touched t WHERE k.strategy_id = %s AND k.lexeme = t.lexeme",
                     (strategy_id,))
        conn.execute(pack.format(only="AND p.lexeme IN (SELECT lexeme FROM bm25_touched)"), {"sid": strategy_id})
    else:
        conn.execute("DELETE FROM bm25_packs WHERE strategy_id = %s", (strategy_id,))
        conn.execute(pack.format(only=""), {"sid": strategy_id})
    conn.execute("DROP TABLE bm25_touched")


def update_totals(conn: psycopg.Connection, strategy_id: str, n_chunks: int, removed_dl: int, added_dl: int) -> None:
    """N and the sum of chunk lengths (avgdl = sum_dl / N), adjusted by this ingest's delta."""
    conn.execute(
        "INSERT INTO bm25_stats (strategy_id, n_chunks, sum_dl) VALUES (%(sid)s, %(n)s, %(add)s - %(rm)s)"
        " ON CONFLICT (strategy_id) DO UPDATE SET n_chunks = EXCLUDED.n_chunks,"
        " sum_dl = bm25_stats.sum_dl - %(rm)s + %(add)s",
        {"sid": strategy_id, "n": n_chunks, "add": added_dl, "rm": removed_dl},
    )


def stats(conn: psycopg.Connection, strategy_id: str) -> tuple[int, int] | None:
    """(N, sum of chunk lengths) of a strategy, or None when it has no statistics."""
    row = conn.execute("SELECT n_chunks, sum_dl FROM bm25_stats WHERE strategy_id = %s", (strategy_id,)).fetchone()
    return (int(row[0]), int(row[1])) if row else None
