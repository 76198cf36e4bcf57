"""BM25 inside PostgreSQL (retrieval.keyword.rank=bm25): parity with an independent
implementation, statistics that follow incremental re-ingest, and bad values rejected."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from rag_experiments.chunking import ChunkingParams
from rag_experiments.errors import ConfigError
from rag_experiments.retrieval.legs import KeywordParams, keyword_search
from rag_experiments.chunk_index import ingest, strategy_info

BM25 = KeywordParams(rank="bm25", identifier_boost=0.0)
STOP_WORDS_ONLY = "what is the and of to it"


PARITY_PAGES = ("runtime-config-resource", "runtime-config-query", "runtime-config-wal", "functions-textsearch",
                "indexes-types", "sql-createindex")


@pytest.fixture(scope="module")
def handbook_docs():
    """Six pages of the demo corpus (~400 chunks), one word added to every page title: the
    breadcrumb puts it in every chunk."""
    from rag_experiments.corpus.loader import load_corpus

    docs = [d for d in load_corpus("demo", "demo") if d.doc_id.split("/")[-1].removesuffix(".html") in PARITY_PAGES]
    assert len(docs) == len(PARITY_PAGES)
    return [replace(d, title=f"Handbook {d.title}", corpus="demo-handbook") for d in docs]


class TokensOnly:
    """The bundled model's tokenizer (so the handbook is chunked as the tool chunks it) with
    cheap lexical vectors: these tests read BM25 only, and embedding ~400 chunks with the model
    cost ~1 min of CI's CPU."""

    def __init__(self, model) -> None:
        from rag_experiments.bench_scale import HashEmbedder

        self._model, self._vectors = model, HashEmbedder(model.dim)
        self.dim, self.max_tokens, self.provider, self.paid = model.dim, model.max_tokens, "test", False
        self.model_id = f"{model.model_id}+tokens-only-test"
        self.token_spans, self.count_tokens = model.token_spans, model.count_tokens

    def space_parts(self, input_type: str) -> dict:
        return {**self._vectors.space_parts(input_type), "model": self.model_id}

    def embed(self, texts, **kwargs):
        return self._vectors.embed(texts)


@pytest.fixture
def handbook_strategy(conn, handbook_docs, embedder):
    report = ingest(conn, handbook_docs, ChunkingParams("heading", 120, 0, breadcrumbs=True), TokensOnly(embedder))
    return strategy_info(conn, report.strategy_id)


def chunk_tokens(conn, sid: str) -> dict[str, list[str]]:
    """Each chunk's english tsvector as a token list (every lexeme once per position), read from
    the chunks themselves, not from the BM25 statistics under test."""
    rows = conn.execute(
        "SELECT c.chunk_id, u.lexeme, cardinality(u.positions) FROM chunks c"
        " LEFT JOIN LATERAL unnest(c.tsv) u ON true WHERE c.strategy_id = %s ORDER BY c.chunk_id", (sid,)
    ).fetchall()
    tokens: dict[str, list[str]] = {}
    for chunk_id, lexeme, tf in rows:
        tokens.setdefault(chunk_id, []).extend([lexeme] * (tf or 0))
    return tokens


def query_tokens(conn, query: str) -> list[str]:
    rows = conn.execute("SELECT lexeme, cardinality(positions) FROM unnest(to_tsvector('english', %s))", (query,)).fetchall()
    return [lex for lex, n in rows for _ in range(n)]


def reference_ranking(tokens: dict[str, list[str]], query: list[str], k1: float, b: float) -> list[tuple[str, float]]:
    """bm25s (method="lucene", float64) on the same token lists; ties broken by chunk id."""
    import bm25s

    ids = sorted(tokens)
    model = bm25s.BM25(method="lucene", k1=k1, b=b, dtype="float64")
    model.index([tokens[i] for i in ids], show_progress=False)
    known = [t for t in query if t in model.vocab_dict]  # a term in no chunk scores nothing
    if not known:
        return []
    scores = model.get_scores(known)
    hits = sorted(((cid, float(s)) for cid, s in zip(ids, scores) if s > 0), key=lambda h: -h[1])
    # Ties: scores equal up to float rounding (bm25s sums in query order, so chunks with the same
    # term weights in another order differ in the last bit) rank by chunk id.
    groups: list[list[tuple[str, float]]] = []
    for h in hits:
        if groups and abs(groups[-1][0][1] - h[1]) <= 1e-12 * h[1]:
            groups[-1].append(h)
        else:
            groups.append([h])
    return [h for g in groups for h in sorted(g)]


def assert_same(db_hits, ref):
    got = [(h.chunk_id, h.score) for h in db_hits]
    diff = next((i for i, (g, r) in enumerate(zip(got, ref)) if g[0] != r[0]), None)
    assert diff is None and len(got) == len(ref), (diff, got[diff - 1: diff + 3] if diff else None, ref[diff - 1: diff + 3] if diff else None)
    np.testing.assert_allclose([h.score for h in db_hits], [s for _, s in ref], rtol=1e-9, atol=0)


def test_bm25_matches_bm25s_lucene_scores_and_ranking(conn, handbook_strategy, monkeypatch):
    """Each list twice: as shipped (the native accumulator of migration 0007 where it is
    installed, as in the test server) and with the SQL search (migration 0006), its pruning
    forced on every query with two or more terms."""
    from mini_golden_spec import MINI_CASES

    from rag_experiments.retrieval import legs

    def forced(fn):
        with monkeypatch.context() as m:
            m.setattr(legs, "PRUNE_MIN_POSTINGS", 0)
            m.setattr(legs, "PRUNE_SEED_POSTINGS", 50)
            m.setattr(legs, "PROBE_COST", 0.0)
            conn.execute("SET rag_exp.bm25_native = 'off'")
            try:
                return fn()
            finally:
                conn.execute("RESET rag_exp.bm25_native")

    sid = handbook_strategy.strategy_id
    tokens = chunk_tokens(conn, sid)
    n = len(tokens)
    assert 200 <= n <= 600, n  # a few hundred real chunks
    df: dict[str, int] = {}
    for toks in tokens.values():
        for t in set(toks):
            df[t] = df.get(t, 0) + 1
    assert df["handbook"] == n  # a term in every chunk (idf near 0, but above it)
    singletons = sorted(t for t, d in df.items() if d == 1 and query_tokens(conn, t) == [t])
    queries = [case[2] for case in MINI_CASES] + [
        "handbook",                               # in every chunk
        singletons[0], singletons[-1],            # in exactly one chunk
        f"handbook {singletons[0]} memory",       # mixed
        "sort sort sort memory memory",           # repeated query terms count again
        "index index",
    ]
    checked = 0
    for k1, b in ((0.9, 0.4), (1.2, 0.75), (0.0, 0.0), (2.0, 1.0)):
        for q in queries:
            qt = query_tokens(conn, q)
            ref = reference_ranking(tokens, qt, k1, b)
            params = replace(BM25, k1=k1, b=b)
            db = keyword_search(conn, sid, q, n, params)
            assert ref, q
            assert_same(db, ref)
            # a small depth cuts to the best chunks before scoring them exactly: the same prefix,
            # ties at the cut broken by chunk id as in the whole list; pruned or not
            for depth in (1, 5, 10):
                assert_same(keyword_search(conn, sid, q, depth, params), ref[:depth])
                assert_same(forced(lambda: keyword_search(conn, sid, q, depth, params)), ref[:depth])
            checked += 1
    assert checked == 4 * len(queries)


def test_bm25_stop_word_only_query_is_an_empty_list(conn, handbook_strategy):
    sid = handbook_strategy.strategy_id
    assert query_tokens(conn, STOP_WORDS_ONLY) == []
    assert reference_ranking(chunk_tokens(conn, sid), [], 0.9, 0.4) == []
    for mode in ("or", "and", "websearch"):
        assert keyword_search(conn, sid, STOP_WORDS_ONLY, 20, replace(BM25, tsquery=mode)) == []


def test_bm25_and_mode_scores_the_chunks_the_tsquery_matches(conn, handbook_strategy):
    sid = handbook_strategy.strategy_id
    q = "maximum memory"
    ors = {h.chunk_id: h.score for h in keyword_search(conn, sid, q, 1000, BM25)}
    ands = keyword_search(conn, sid, q, 1000, replace(BM25, tsquery="and"))
    matched = {r[0] for r in conn.execute(
        "SELECT chunk_id FROM chunks WHERE strategy_id = %s AND tsv @@ plainto_tsquery('english', %s)", (sid, q))}
    assert ands and {h.chunk_id for h in ands} == matched and len(matched) < len(ors)
    assert all(h.score == pytest.approx(ors[h.chunk_id], rel=1e-12) for h in ands)


@pytest.mark.parametrize("query, phrase", [("work_mem", "**`work_mem`"), ("23505", "| 23505 |"),
                                           ("ts_rank_cd", "`ts_rank_cd`"), ("jsonb_path_query", "`jsonb_path_query`")])
def test_identifier_boost_works_with_bm25(conn, mini_strategy, query, phrase):
    sid = mini_strategy.strategy_id
    hits = keyword_search(conn, sid, query, 10, KeywordParams(rank="bm25", identifier_boost=10.0))
    plain = keyword_search(conn, sid, query, 10, KeywordParams(rank="bm25", identifier_boost=0.0))
    # the indexed text: a later piece of a long definition-list entry carries its term there
    text = conn.execute("SELECT indexed_text FROM chunks WHERE strategy_id = %s AND chunk_id = %s",
                        (sid, hits[0].chunk_id)).fetchone()[0]
    assert phrase in text
    assert hits[0].score >= plain[0].score + 10.0 - 1e-9  # the boost adds on top of BM25
    # the leg cuts BM25 to `depth` before adding boosts: the same head as without the cut
    for kw in (KeywordParams(rank="bm25", identifier_boost=10.0), KeywordParams(rank="bm25", identifier_boost=0.5)):
        assert keyword_search(conn, sid, f"{query} memory index", 5, kw) == keyword_search(conn, sid, f"{query} memory index", 10_000, kw)[:5]


def _stats_from_chunks(conn, sid):
    """N, sum of lengths and every (lexeme, chunk, tf, dl) recomputed from the chunks' tsvectors."""
    n, total = conn.execute(
        "SELECT count(DISTINCT c.chunk_id), coalesce(sum(cardinality(u.positions)), 0) FROM chunks c"
        " LEFT JOIN LATERAL unnest(c.tsv) u ON true WHERE c.strategy_id = %s", (sid,)).fetchone()
    postings = set(conn.execute(
        "SELECT u.lexeme, c.chunk_id, cardinality(u.positions),"
        " (SELECT sum(cardinality(v.positions)) FROM unnest(c.tsv) v)::int"
        " FROM chunks c, unnest(c.tsv) u WHERE c.strategy_id = %s", (sid,)).fetchall())
    df: dict[str, int] = {}
    for lexeme, *_ in postings:
        df[lexeme] = df.get(lexeme, 0) + 1
    return n, total, postings, df


def _stored_stats(conn, sid):
    n, total = conn.execute("SELECT n_chunks, sum_dl FROM bm25_stats WHERE strategy_id = %s", (sid,)).fetchone()
    postings = set(conn.execute("SELECT lexeme, chunk_id, tf, dl FROM bm25_postings WHERE strategy_id = %s", (sid,)).fetchall())
    df = dict(conn.execute("SELECT lexeme, df FROM bm25_df WHERE strategy_id = %s", (sid,)).fetchall())
    return n, total, postings, df


def _bounds(conn, sid):
    return dict((lex, (mt, md)) for lex, mt, md in conn.execute(
        "SELECT lexeme, max_tf, min_dl FROM bm25_df WHERE strategy_id = %s", (sid,)).fetchall())


def _bounds_from_postings(conn, sid):
    return dict((lex, (mt, md)) for lex, mt, md in conn.execute(
        "SELECT lexeme, max(tf), min(dl) FROM bm25_postings WHERE strategy_id = %s GROUP BY lexeme", (sid,)).fetchall())


def _assert_bounds_hold(conn, sid, exact: bool):
    """Each lexeme's stored pruning bounds (migration 0006) bound its postings: max_tf >= every tf,
    min_dl <= every dl; after ingests that only added postings, they are the postings' own."""
    stored, actual = _bounds(conn, sid), _bounds_from_postings(conn, sid)
    assert stored.keys() == actual.keys()
    assert all(stored[t][0] >= actual[t][0] and stored[t][1] <= actual[t][1] for t in actual)
    if exact:
        assert stored == actual


def test_statistics_follow_incremental_reingest(fresh_db_url, mini_docs, embedder):
    from rag_experiments.db.connect import connect

    conn = connect(fresh_db_url)
    try:
        p = ChunkingParams("heading", 60)
        other = ingest(conn, mini_docs, ChunkingParams("fixed", 40), embedder)  # per strategy: never mixed
        base = ingest(conn, mini_docs, p, embedder)
        sid = base.strategy_id
        assert _stored_stats(conn, sid) == _stats_from_chunks(conn, sid)
        _assert_bounds_hold(conn, sid, exact=True)
        edited = [replace(d, text=d.text + "\nA new closing paragraph about autovacuum zebrafish.\n") if i == 0 else d
                  for i, d in enumerate(mini_docs)]
        assert ingest(conn, edited, p, embedder).docs_rechunked == 1
        assert _stored_stats(conn, sid) == _stats_from_chunks(conn, sid)
        assert [h.chunk_id for h in keyword_search(conn, sid, "zebrafish", 5, BM25)]
        _assert_bounds_hold(conn, sid, exact=False)
        ingest(conn, edited[2:], p, embedder)  # two documents removed
        assert _stored_stats(conn, sid) == _stats_from_chunks(conn, sid)
        _assert_bounds_hold(conn, sid, exact=False)  # removals leave the bounds wider, never narrower
        assert _stored_stats(conn, other.strategy_id) == _stats_from_chunks(conn, other.strategy_id)
    finally:
        conn.close()


def test_migration_backfills_statistics_of_existing_strategies(fresh_db_url, mini_docs, embedder):
    """A database ingested before 0002 gets its statistics from the stored tsvectors, its
    document frequencies from the postings (0004) and its pruning bounds from them too (0006)."""
    from rag_experiments.db.connect import connect
    from rag_experiments.db.migrations import available

    conn = connect(fresh_db_url)
    try:
        sid = ingest(conn, mini_docs, ChunkingParams("heading", 60), embedder).strategy_id
        expected = _stored_stats(conn, sid)
        expected_bounds = _bounds(conn, sid)
        conn.execute("TRUNCATE bm25_postings, bm25_stats, bm25_df")
        conn.execute("ALTER TABLE bm25_df DROP COLUMN max_tf, DROP COLUMN min_dl")  # as before 0006
        for version, start in ((2, "INSERT INTO bm25_postings"), (4, "INSERT INTO bm25_df"), (6, "ALTER TABLE")):
            sql = next(text for v, _, text in available() if v == version)
            conn.execute(sql[sql.index(start):])
        assert _stored_stats(conn, sid) == expected == _stats_from_chunks(conn, sid)
        assert _bounds(conn, sid) == expected_bounds == _bounds_from_postings(conn, sid)
    finally:
        conn.close()


@pytest.mark.parametrize("field, value", [("k1", -0.1), ("b", -0.01), ("b", 1.5), ("k1", float("nan"))])
def test_bad_bm25_values_are_rejected(field, value):
    with pytest.raises(ConfigError, match=rf"retrieval\.keyword\.{field}: "):
        KeywordParams(rank="bm25", **{field: value})


def test_cache_key_holds_rank_k1_and_b():
    keys = {KeywordParams(rank=r, k1=k1, b=b).key() for r in ("ts_rank", "bm25") for k1 in (0.9, 1.2) for b in (0.4, 0.75)}
    assert len(keys) == 8


def test_bad_bm25_value_exits_2_with_one_line_before_any_work(project, mini_golden):
    from tests.test_pipeline import _mini_overrides, _run_py

    proc = _run_py(project, *_mini_overrides(mini_golden, "retrieval=keyword", "retrieval.keyword.rank=bm25",
                                             "retrieval.keyword.b=1.5"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "error: retrieval.keyword.b: must be in [0, 1], got 1.5" in proc.stderr
    assert not (project / "mlruns" / "mlflow.db").exists()  # rejected before any run was opened


def test_bm25_hybrid_in_sql_equals_python_rrf_and_filters_apply(conn, mini_strategy, embedder):
    from rag_experiments.retrieval.filters import Filters
    from rag_experiments.retrieval.fusion import FusionParams
    from rag_experiments.retrieval.retriever import Retriever, RetrievalParams

    kw = KeywordParams(rank="bm25")
    fusion = FusionParams(rrf_k=3, depth=15)
    py = Retriever(conn, mini_strategy, embedder, RetrievalParams(variant="hybrid", keyword=kw, fusion=fusion, use_cache=False))
    sq = Retriever(conn, mini_strategy, embedder, RetrievalParams(variant="hybrid", keyword=kw, fusion=replace(fusion, engine="sql")))
    for q in ("work_mem", "build an index without blocking writes", "deadlock", "memory"):
        assert [(h.chunk_id, h.score) for h in py.search(q, 30).hits] == [(h.chunk_id, h.score) for h in sq.search(q, 30).hits]
    sid = mini_strategy.strategy_id
    only = keyword_search(conn, sid, "memory index", 50, kw, Filters(doc_types=("config",)))
    assert only and {h.doc_type for h in only} == {"config"}
    assert len(only) < len(keyword_search(conn, sid, "memory index", 50, kw))


def test_changing_k1_or_b_computes_new_candidate_lists(conn, mini_strategy, embedder):
    from rag_experiments.retrieval.retriever import Retriever, RetrievalParams

    queries = ["memory", "deadlock", "index"]
    Retriever(conn, mini_strategy, embedder, RetrievalParams(variant="keyword", keyword=KeywordParams(rank="bm25"))).search_many(queries)
    for kw in (KeywordParams(rank="bm25", k1=1.2), KeywordParams(rank="bm25", b=0.75)):
        r = Retriever(conn, mini_strategy, embedder, RetrievalParams(variant="keyword", keyword=kw))
        r.search_many(queries)
        assert r.stats.leg_lists_computed == 3 and r.stats.leg_lists_cached == 0


def test_parallel_ingests_of_two_strategies_keep_their_own_statistics(fresh_db_url, mini_docs, embedder):
    """Two sweep jobs writing different strategies at once (the writer lock serialises the writes):
    each strategy's postings and totals match its own chunks, never the other's."""
    from concurrent.futures import ThreadPoolExecutor

    from rag_experiments.db.connect import connect

    def job(params):
        c = connect(fresh_db_url)
        try:
            return ingest(c, mini_docs, params, embedder).strategy_id
        finally:
            c.close()

    with ThreadPoolExecutor(2) as pool:
        sids = list(pool.map(job, [ChunkingParams("heading", 60), ChunkingParams("fixed", 40, 10)]))
    conn = connect(fresh_db_url)
    try:
        for sid in sids:
            assert _stored_stats(conn, sid) == _stats_from_chunks(conn, sid)
        assert _stored_stats(conn, sids[0])[0] != _stored_stats(conn, sids[1])[0]
    finally:
        conn.close()


def test_a_strategy_without_statistics_is_an_error_not_an_empty_list(conn, mini_strategy):
    import psycopg

    from rag_experiments.errors import DatabaseError

    sid = mini_strategy.strategy_id
    with conn.transaction():
        conn.execute("DELETE FROM bm25_stats WHERE strategy_id = %s", (sid,))
        with pytest.raises(DatabaseError, match="no BM25 statistics"):
            keyword_search(conn, sid, "memory", 10, BM25)
        raise psycopg.Rollback
    assert keyword_search(conn, sid, "memory", 10, BM25)


def test_migration_0004_upgrades_a_database_ingested_before_it(fresh_db_url, mini_docs, embedder):
    """Back to the schema before 0004 (plain key, no bm25_df) with a strategy ingested: the
    migration backfills the document frequencies and the leg returns what it returned before."""
    from rag_experiments.db.connect import connect
    from rag_experiments.db.migrations import migrate

    conn = connect(fresh_db_url)
    try:
        sid = ingest(conn, mini_docs, ChunkingParams("heading", 60), embedder).strategy_id
        before = keyword_search(conn, sid, "sort memory index autovacuum", 20, BM25)
        expected = _stored_stats(conn, sid)
        conn.execute("DROP TABLE bm25_df")
        conn.execute("ALTER TABLE bm25_postings DROP CONSTRAINT bm25_postings_pkey,"
                     " ADD PRIMARY KEY (strategy_id, lexeme, chunk_id)")
        conn.execute("DROP FUNCTION bm25_top")  # and before 0006, which extends bm25_df
        conn.execute("DELETE FROM schema_migrations WHERE version IN (4, 6)")
        assert migrate(conn) == ["0004_bm25_lookup.sql", "0006_bm25_pruning.sql"]
        assert _stored_stats(conn, sid) == expected
        assert keyword_search(conn, sid, "sort memory index autovacuum", 20, BM25) == before != []
    finally:
        conn.close()
