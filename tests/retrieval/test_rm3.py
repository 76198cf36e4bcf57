"""RM3 on the BM25 keyword leg: hand-worked expansion weights, then a second implementation here
(expansion from bm25_postings, BM25 re-scoring of every chunk in Python) against the leg's SQL on
the real mini chunks: the same list, scores to 1e-9."""

from __future__ import annotations

import math

import pytest

from rag_experiments.retrieval.legs import KeywordParams, keyword_search
from rag_experiments.retrieval.rm3 import rm3_weights


def test_expansion_weights_by_hand():
    # two feedback chunks, scores 2 and 1; N = 100 chunks, 'common' in 20 of them (> 10%: dropped)
    feedback = [(2.0, {"memori": 2, "sort": 1, "common": 5, "x": 3}),  # 'x' is one character: dropped
                (1.0, {"memori": 1, "buffer": 3})]
    df = {"memori": 5, "sort": 3, "buffer": 4, "common": 20, "x": 1}
    # RM1: memori 2*2/3 + 1*1/4 = 1.5833, sort 2*1/3 = 0.6667, buffer 1*3/4 = 0.75 -> top 2: memori, buffer
    w = rm3_weights({"memori": 1, "work": 1}, feedback, df, 100, fb_terms=2, original_query_weight=0.5)
    rm_memori, rm_buffer = (4 / 3 + 1 / 4) / (4 / 3 + 1 / 4 + 3 / 4), (3 / 4) / (4 / 3 + 1 / 4 + 3 / 4)
    assert w == pytest.approx({"buffer": 0.5 * rm_buffer, "memori": 0.5 * 0.5 + 0.5 * rm_memori, "work": 0.25})
    assert sum(w.values()) == pytest.approx(1.0)
    assert rm3_weights({"a1": 2}, [], {}, 10, original_query_weight=0.5) == {"a1": 0.5}  # no feedback: query only


QUERIES = ["memory used by sort operations", "build an index without blocking writes", "temporary files disk space",
           "json path items"]


def _independent(conn, sid: str, query: str, fb_docs: int, fb_terms: int, lam: float, depth: int, k1=0.9, b=0.4):
    """RM3 + BM25 written again from the postings table (not the tsvectors the leg reads)."""
    first = keyword_search(conn, sid, query, fb_docs, KeywordParams(identifier_boost=0.0))
    n, sum_dl = conn.execute("SELECT n_chunks, sum_dl FROM bm25_stats WHERE strategy_id = %s", (sid,)).fetchone()
    avgdl = sum_dl / n
    df = dict(conn.execute("SELECT lexeme, df FROM bm25_df WHERE strategy_id = %s", (sid,)).fetchall())
    post = conn.execute("SELECT lexeme, chunk_id, tf, dl FROM bm25_postings WHERE strategy_id = %s", (sid,)).fetchall()
    q = dict(conn.execute("SELECT lexeme, coalesce(cardinality(positions), 1) FROM unnest(to_tsvector('english', %s))",
                          (query,)).fetchall())
    rm: dict[str, float] = {}
    for h in first:
        vec = {lex: tf for lex, cid, tf, _ in post if cid == h.chunk_id and len(lex) >= 2 and len(lex) <= 20
               and lex.isascii() and lex.isalnum() and lex.lower() == lex and df[lex] / n <= 0.1}
        total = sum(vec.values())
        for lex, tf in vec.items():
            rm[lex] = rm.get(lex, 0.0) + h.score * tf / total
    top = dict(sorted(rm.items(), key=lambda kv: (-kv[1], kv[0]))[:fb_terms])
    top = {t: v / sum(top.values()) for t, v in top.items()}
    qn = {t: c / sum(q.values()) for t, c in q.items()}
    weights = {t: lam * qn.get(t, 0.0) + (1 - lam) * top.get(t, 0.0) for t in set(qn) | set(top)}
    scores: dict[str, float] = {}
    for lex, cid, tf, dl in post:
        if lex in weights:
            idf = math.log(1 + (n - df[lex] + 0.5) / (df[lex] + 0.5))
            scores[cid] = scores.get(cid, 0.0) + weights[lex] * idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))
    return sorted(scores.items(), key=lambda kv: (-round(kv[1], 9), kv[0]))[:depth]


@pytest.mark.parametrize("fb_docs, fb_terms, lam", [(10, 10, 0.5), (3, 5, 0.3), (5, 20, 0.8)])
def test_the_leg_equals_a_second_implementation_on_real_chunks(conn, many_chunks_strategy, fb_docs, fb_terms, lam):
    sid = many_chunks_strategy.strategy_id
    params = KeywordParams(identifier_boost=0.0, rm3=True, fb_docs=fb_docs, fb_terms=fb_terms,
                           original_query_weight=lam)
    for query in QUERIES:
        ours = keyword_search(conn, sid, query, 20, params)
        theirs = _independent(conn, sid, query, fb_docs, fb_terms, lam, 20)
        assert [h.chunk_id for h in ours] == [cid for cid, _ in theirs], query
        assert [h.score for h in ours] == pytest.approx([s for _, s in theirs], rel=1e-9)
    plain = keyword_search(conn, sid, QUERIES[0], 20, KeywordParams(identifier_boost=0.0))
    assert [h.chunk_id for h in plain] != [h.chunk_id for h in keyword_search(conn, sid, QUERIES[0], 20, params)]
