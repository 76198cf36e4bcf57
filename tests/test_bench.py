"""The benchmark runs end to end (its numbers are printed, never asserted) and cleans up."""

from __future__ import annotations

import psycopg

from rag_experiments import bench

from .conftest import FIXTURES


def test_bench_prints_its_table_on_a_small_corpus_and_drops_its_database(pg_server, monkeypatch, capsys):
    admin, _ = pg_server
    monkeypatch.setenv("DATABASE_URL", admin)

    def databases() -> set[str]:
        with psycopg.connect(admin, autocommit=True) as c:
            return {r[0] for r in c.execute("SELECT datname FROM pg_database WHERE datname LIKE 'rag_bench_%'")}

    before = databases()
    assert bench.main(["--corpus", str(FIXTURES / "mini_corpus"), "--corpus-name", "mini", "--strategies", "heading",
                       "--queries", "3", "--skip", "eval,metrics,memory,sweep,noise"]) == 0
    out = capsys.readouterr().out
    for row in ("| machine | corpus", "| machine | speed gauge", "heading: cold ingest chunks/s", "HNSW index", "postings + document frequencies",
                "bare pgvector KNN", "bare full-text query (OR, depth 50)", "bare KNN + bare OR FTS", "hybrid (uncached legs)",
                # the configured keyword leg (bm25), not the dataclass default (ts_rank)
                "keyword (uncached legs) p50 / p95 ms, keyword rank=bm25", "pyfunc predict([q])", "requests/s (1 client)"):
        assert row in out, row
    assert databases() == before
