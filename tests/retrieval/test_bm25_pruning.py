"""The pruned BM25 leg (migration 0006, ``bm25_top_sql``: MaxScore inside PostgreSQL) returns the
exhaustive leg's lists and scores, float for float.

Pruning is forced on a corpus small enough to build in seconds (``legs.PRUNE_MIN_POSTINGS = 0``,
``legs.PROBE_COST = 0``: every query with two or more known terms is pruned when a threshold is
found and its bounds leave a non-essential term) and compared with
the same leg reading every posting (``PRUNE_MIN_POSTINGS`` above any query's postings). The
scale benchmark (``rag-exp bench --scale``) repeats the comparison on every timed query at every
corpus size, 100,000 and 1,000,000 chunks included, and prints the count.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from rag_experiments import bench_scale
from rag_experiments.retrieval import legs
from rag_experiments.retrieval.legs import KeywordParams, keyword_search

from .conftest import SYNTHETIC_CHUNKING

# prune whenever the bounds allow (probes cost nothing), with 200 postings of the rare lists read
# for the threshold
FORCED = (0, 200, 0.0)
NEVER = (10**15, 0, 0.0)  # read every posting (the leg before pruning)


def _with(prune: tuple[int, int, float], fn):
    saved = legs.PRUNE_MIN_POSTINGS, legs.PRUNE_SEED_POSTINGS, legs.PROBE_COST
    legs.PRUNE_MIN_POSTINGS, legs.PRUNE_SEED_POSTINGS, legs.PROBE_COST = prune
    try:
        return fn()
    finally:
        legs.PRUNE_MIN_POSTINGS, legs.PRUNE_SEED_POSTINGS, legs.PROBE_COST = saved


def sql_search_only(conn) -> None:
    """These tests are about bm25_top_sql, the SQL search; the native accumulator (migration 0007,
    tests/retrieval/test_bm25_native.py) would otherwise answer wherever it is installed."""
    conn.execute("SET rag_exp.bm25_native = 'off'")


def plan(conn) -> str:
    return conn.execute("SELECT current_setting('rag_exp.bm25_plan', true)").fetchone()[0]


@pytest.fixture(scope="module")
def synthetic(synthetic_corpus, pg_url):
    from rag_experiments.chunk_index import ingest, strategy_info
    from rag_experiments.db.connect import connect

    docs, queries = synthetic_corpus
    conn = connect(pg_url)
    sql_search_only(conn)
    report = ingest(conn, docs, SYNTHETIC_CHUNKING, bench_scale.HashEmbedder())
    yield conn, strategy_info(conn, report.strategy_id), queries, docs
    conn.close()


def _rows(hits):
    return [(h.chunk_id, h.score) for h in hits]


def test_pruned_lists_and_scores_equal_the_exhaustive_ones(synthetic):
    conn, strategy, queries, _ = synthetic
    sid = strategy.strategy_id
    common = conn.execute("SELECT lexeme FROM bm25_df WHERE strategy_id = %s ORDER BY df DESC, lexeme LIMIT 3",
                          (sid,)).fetchall()
    extra = [
        " ".join(r[0] for r in common),            # only common words: little to prune
        f"{common[0][0]} {queries[0].split()[0]}",  # one common, one rarer
        "memory memory memory sort",               # a repeated query word counts again
        queries[1].split()[0],                     # a single term (nothing to prune)
        "what is the and of to it",                # stop words only: no terms
    ]
    plans: dict[str, int] = {}
    compared = 0
    for k1, b in ((0.9, 0.4), (1.2, 0.75), (0.0, 0.0), (2.0, 1.0)):
        params = KeywordParams(k1=k1, b=b)
        for depth in (1, 50):
            for q in queries[:40] + extra:
                exhaustive = _with(NEVER, lambda: keyword_search(conn, sid, q, depth, params))
                assert plan(conn) in ("exhaustive", "no terms")
                pruned = _with(FORCED, lambda: keyword_search(conn, sid, q, depth, params))
                kind = plan(conn).split(" ")[0]
                plans[kind] = plans.get(kind, 0) + 1
                assert _rows(pruned) == _rows(exhaustive), (q, k1, b, depth)
                compared += 1
    assert compared == 4 * 2 * 45
    # the comparison is of pruned lists: most queries had terms that could be skipped
    assert plans.get("pruned", 0) >= 0.7 * compared, plans


def test_rm3_and_hybrid_are_unchanged_by_pruning(synthetic, embedder):
    """RM3's weighted second pass and the one-statement hybrid embed the same pruned leg."""
    from rag_experiments.bench_scale import HashEmbedder
    from rag_experiments.retrieval.fusion import FusionParams
    from rag_experiments.retrieval.hybrid_sql import hybrid_sql_search

    conn, strategy, queries, _ = synthetic
    sid = strategy.strategy_id
    rm3 = KeywordParams(rm3=True)
    vectors = HashEmbedder().embed(queries[:20], input_type="query")
    pruned_plans = 0
    for q, qvec in zip(queries[:20], vectors):
        assert _rows(_with(FORCED, lambda: keyword_search(conn, sid, q, 30, rm3))) == \
            _rows(_with(NEVER, lambda: keyword_search(conn, sid, q, 30, rm3)))

        def hybrid():
            return hybrid_sql_search(conn, sid, q, qvec, strategy.dim, FusionParams(depth=40))

        forced = _with(FORCED, hybrid)
        pruned_plans += plan(conn).startswith("pruned")
        assert [(h.chunk_id, h.score, h.leg_ranks) for h in forced] == \
            [(h.chunk_id, h.score, h.leg_ranks) for h in _with(NEVER, hybrid)]
    assert pruned_plans >= 15


def test_a_strategy_ingested_in_two_parts_keeps_bounds_that_prune_correctly(synthetic, fresh_db_url):
    """Bounds widened by a second ingest (new documents with longer tf, shorter chunks) still bound
    every posting: the pruned leg equals the exhaustive one after an incremental re-ingest."""
    from rag_experiments.chunk_index import ingest
    from rag_experiments.db.connect import connect

    _, _, queries, docs = synthetic
    conn = connect(fresh_db_url)
    sql_search_only(conn)
    try:
        params = SYNTHETIC_CHUNKING
        first = ingest(conn, docs[: len(docs) // 2], params, bench_scale.HashEmbedder())
        short = replace(docs[0], text=docs[0].text + "\n\n## Tail\n\nmemory memory memory memory sort.\n")
        second = ingest(conn, [short] + docs[1:], params, bench_scale.HashEmbedder())
        assert second.strategy_id == first.strategy_id and second.docs_rechunked == len(docs) - len(docs) // 2 + 1
        for q in queries[:40] + ["memory sort", "memory memory sort"]:
            assert _rows(_with(FORCED, lambda: keyword_search(conn, first.strategy_id, q, 20))) == \
                _rows(_with(NEVER, lambda: keyword_search(conn, first.strategy_id, q, 20)))
    finally:
        conn.close()

