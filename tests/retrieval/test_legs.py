from __future__ import annotations

import pytest

from rag_experiments.identifiers import extract_identifiers
from rag_experiments.retrieval.filters import Filters
from rag_experiments.retrieval.legs import KeywordParams, keyword_search, set_vector_session, vector_search, vector_sql

EXACT = {  # query -> a phrase that must be in the top keyword hit
    "work_mem": "**`work_mem`",
    "23505": "| 23505 |",
    "40P01": "| 40P01 |",
    "ts_rank_cd": "`ts_rank_cd`",
    "jsonb_path_query": "`jsonb_path_query`",
    "maintenance_work_mem": "**`maintenance_work_mem`",
}


def test_identifier_extraction():
    assert extract_identifiers("Raise work_mem; got 23505 and 40P01 in pg_hba.conf via pg_dump --jobs") == [
        "work_mem", "23505", "40p01", "pg_hba.conf", "pg_dump", "--jobs"]
    assert extract_identifiers("set maintenance_work_mem") == ["maintenance_work_mem"]  # not also work_mem
    assert extract_identifiers("In 2023 we had 15 issues") == []


def test_english_parser_breaks_identifiers(conn):
    lexemes = conn.execute("SELECT to_tsvector('english', 'work_mem ts_rank_cd 23505')::text").fetchone()[0]
    assert "'work'" in lexemes and "'mem'" in lexemes and "work_mem" not in lexemes  # split at '_'
    q = conn.execute("SELECT websearch_to_tsquery('english', 'pg_dump --jobs')::text").fetchone()[0]
    assert "!" in q  # a leading dash reads as negation


@pytest.mark.parametrize("query, phrase", sorted(EXACT.items()))
def test_exact_identifiers_rank_first_with_identifier_matching(conn, mini_strategy, query, phrase):
    sid = mini_strategy.strategy_id
    hits = keyword_search(conn, sid, query, 10, KeywordParams())
    # the indexed text: a later piece of a long definition-list entry carries its term there
    text = conn.execute("SELECT indexed_text FROM chunks WHERE strategy_id = %s AND chunk_id = %s",
                        (sid, hits[0].chunk_id)).fetchone()[0]
    assert phrase in text


def test_identifier_matching_fixes_what_the_parser_breaks(conn, mini_strategy):
    """Without identifier matching, 'work_mem' is 'work' | 'mem' and maintenance_work_mem's
    chunk competes with work_mem's; with it, the exact parameter wins by a clear margin. On
    ts_rank's scale (a text rank below 1, so a boost of 1 is a clear margin); BM25's: test_bm25."""
    sid = mini_strategy.strategy_id
    plain = keyword_search(conn, sid, "work_mem", 10, KeywordParams(rank="ts_rank", identifier_boost=0.0))
    boosted = keyword_search(conn, sid, "work_mem", 10, KeywordParams(rank="ts_rank", identifier_boost=1.0))
    assert boosted[0].score > 1.0 > plain[0].score
    # identifier match separates it: from every chunk not of work_mem's entry (a long entry's later
    # pieces carry its term, so they are matched too)
    entry = {cid for (cid,) in conn.execute("SELECT chunk_id FROM chunks WHERE strategy_id = %s AND "
                                            "indexed_text LIKE %s", (sid, "%**`work_mem` (%"))}
    assert boosted[0].chunk_id in entry
    assert boosted[0].score - next(h.score for h in boosted if h.chunk_id not in entry) > 0.5
    exact_plain = keyword_search(conn, sid, "23505", 10, KeywordParams(rank="ts_rank", identifier_boost=0.0))
    exact_boost = keyword_search(conn, sid, "23505", 10, KeywordParams(rank="ts_rank"))
    assert exact_boost[0].chunk_id in {h.chunk_id for h in exact_plain}  # same candidate, now ranked by identity


def test_and_mode_collapses_on_questions(conn, mini_strategy):
    sid = mini_strategy.strategy_id
    q = "how much memory can a sort or hash table use before writing temporary files"
    assert len(keyword_search(conn, sid, q, 10, KeywordParams(tsquery="and"))) == 0
    assert len(keyword_search(conn, sid, q, 10, KeywordParams(tsquery="or"))) > 0


def test_ef_search_is_raised_to_the_depth(conn, many_chunks_strategy, embedder):
    """(seqscan, bitmap scans and sorts are penalised so the planner uses HNSW on this small table)"""
    s = many_chunks_strategy
    assert s.n_chunks > 300
    qvec = embedder.embed(["memory for sorting"])[0]
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        conn.execute("SET LOCAL enable_sort = off")
        hits = vector_search(conn, s.strategy_id, qvec, 100, s.dim)
    assert len(hits) == 100
    # what happens without the fix: ef_search 40 silently returns at most ~40 rows
    stmt, bind = vector_sql(s.dim, Filters())
    bind.update({"qvec": qvec, "sid": s.strategy_id, "depth": 100})
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        conn.execute("SET LOCAL enable_sort = off")
        conn.execute("SET LOCAL hnsw.ef_search = 40")
        starved = conn.execute(stmt, bind, prepare=False).fetchall()
    assert len(starved) < 60  # about ef_search rows, far fewer than the 100 asked for


def test_filtered_vector_search_is_not_starved(conn, many_chunks_strategy, embedder):
    s = many_chunks_strategy
    n_tut = conn.execute("SELECT count(*) FROM chunks WHERE strategy_id = %s AND doc_type = 'tutorial'",
                         (s.strategy_id,)).fetchone()[0]
    qvec = embedder.embed(["unique violation error code"])[0]  # far from the tutorial chunks
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        conn.execute("SET LOCAL enable_sort = off")
        hits = vector_search(conn, s.strategy_id, qvec, 30, s.dim, Filters(doc_types=("tutorial",)))
    assert len(hits) == min(30, n_tut) and {h.doc_type for h in hits} == {"tutorial"}


def test_filters_are_parameterized_not_formatted(conn, mini_strategy, embedder):
    sid = mini_strategy.strategy_id
    evil = "x'); DROP TABLE chunks; --"
    assert keyword_search(conn, sid, "memory", 10, filters=Filters(doc_types=(evil,))) == []
    assert keyword_search(conn, sid, "memory", 10, filters=Filters(source_uri_prefix=evil)) == []
    assert keyword_search(conn, sid, "memory", 10, filters=Filters(source_uri_prefix="%")) == []  # '%' is data
    assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] > 0  # table still there
    only = keyword_search(conn, sid, "memory index", 20, filters=Filters(doc_types=("config",)))
    assert only and {h.doc_type for h in only} == {"config"}
    pref = keyword_search(conn, sid, "memory index", 20, filters=Filters(source_uri_prefix="mini/sql-"))
    assert pref and all(h.source_uri.startswith("mini/sql-") for h in pref)


def test_vector_session_settings_are_transaction_local(conn):
    with conn.transaction():
        set_vector_session(conn, 200, True)
        assert conn.execute("SHOW hnsw.ef_search").fetchone()[0] == "200"
        assert conn.execute("SHOW hnsw.iterative_scan").fetchone()[0] == "strict_order"
    assert conn.execute("SHOW hnsw.ef_search").fetchone()[0] in ("", "40")  # reverted at commit
