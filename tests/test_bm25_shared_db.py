"""The BM25 pack build of a new strategy in a database analysed for another one (issue 58 item 1):
planned with statistics that include the new strategy's rows, so it is a hash join, not a nested
loop estimated at 1 row that rescans every ordinal for each posting (minutes at 10k chunks;
``rag-exp bench --only shared`` times it)."""

from __future__ import annotations

from rag_experiments import bm25_stats
from rag_experiments.bench_scale import HashEmbedder, build_corpus, sentence_pool
from rag_experiments.bench_shared_db import join_method
from rag_experiments.chunk_index import ingest
from rag_experiments.chunking import ChunkingParams
from rag_experiments.corpus.loader import load_corpus
from rag_experiments.db.connect import connect

FIRST = ChunkingParams("heading", 200, 0, True)
SECOND = ChunkingParams("fixed", 96, 16, False)


class _ExplainPacks:
    """A connection that EXPLAINs the pack INSERT (with the transaction's statistics at that
    moment) before running it."""

    def __init__(self, conn) -> None:
        self.conn, self.plans = conn, []

    def execute(self, sql, params=None):
        if sql.startswith("INSERT INTO bm25_packs"):
            self.plans.append([r[0] for r in self.conn.execute("EXPLAIN " + sql, params)])
        return self.conn.execute(sql, params)


def test_a_second_strategy_is_packed_with_a_hash_join_after_the_first_was_analysed(fresh_db_url, tmp_path,
                                                                                   monkeypatch):
    # a synthetic corpus of 600 sections and the bench's hash embedder: seconds, yet enough rows
    # (~900 chunks, ~40k postings) that a join planned for 1 row is a nested loop
    pool, _ = sentence_pool()
    corpus = build_corpus(tmp_path / "shared", 600, pool, cases=(), progress=False)
    docs = load_corpus(corpus.root, corpus.name)
    embedder = HashEmbedder()
    conn = connect(fresh_db_url)
    try:
        first = ingest(conn, docs, FIRST, embedder)  # ends with settle(): ANALYZE of the BM25 tables
        real = bm25_stats.refresh_packs
        spy: list[_ExplainPacks] = []

        def explained(c, strategy_id):
            spy.append(_ExplainPacks(c))
            return real(spy[-1], strategy_id)

        monkeypatch.setattr(bm25_stats, "refresh_packs", explained)
        report = ingest(conn, docs, SECOND, embedder)
        assert report.n_chunks > first.n_chunks  # more chunks than the first strategy: the case of a chunking sweep
        plan = spy[0].plans[0]
        assert join_method(plan) == "hash join", "\n".join(plan)
    finally:
        conn.close()
