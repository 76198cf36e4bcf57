"""The two first-stage legs, each one SQL statement returning ranked candidates.

Both legs break score ties by ``chunk_id`` (ascending) so rankings are deterministic, and the
Python fusion uses the same key.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, ClassVar, Protocol

import numpy as np
import psycopg
from psycopg import sql

from ..cache_key import cache_key
from ..errors import ConfigError, DatabaseError
from ..identifiers import extract_identifiers
from ..store import StrategyInfo, strategy_language
from ..types import Hit
from ..vector_types import cast_sql
from .filters import Filters
from .rm3 import document_frequencies, feedback_vectors, query_lexemes, rm3_weights

META_COLUMNS = "chunk_id, doc_id, source_uri, doc_type, start_char, end_char"

# The strategy's text search configuration (corpus.language, migration 0008), read inside the
# statement: the query is parsed and stemmed as the strategy's chunks were, for every caller
# that binds %(sid)s (keyword and hybrid legs, benchmarks).
TS_CONFIG = "(SELECT s.language FROM strategies s WHERE s.strategy_id = %(sid)s)"

TSQUERY_MODES = {
    # OR of every stemmed query term: the only mode that serves sentence-long questions
    # (plainto/websearch AND every term; a 10-word question then matches almost nothing).
    # The cast (not to_tsquery) avoids stemming every word a second time.
    "or": "replace(plainto_tsquery(" + TS_CONFIG + ", %(q)s)::text, '&', '|')::tsquery",
    "and": "plainto_tsquery(" + TS_CONFIG + ", %(q)s)",
    "websearch": "websearch_to_tsquery(" + TS_CONFIG + ", %(q)s)",
}
RANK_FUNCTIONS = ("ts_rank", "ts_rank_cd", "bm25")

# Bump when a change to this module (or to identifiers.py's query side) changes the candidates a
# leg returns for the same inputs: it is part of every candidate-list cache key, so lists cached
# by older code are never served as if this code had computed them.
LEGS_VERSION = 1


def leg_hits(rows, leg: str) -> list[Hit]:
    """A leg's candidates from rows ``(chunk_id, doc_id, source_uri, doc_type, start, end, score)``
    (SQL rows, or the candidate cache's JSON lists): rank = position, ``leg_ranks = {leg: rank}``."""
    return [Hit(*r[:6], float(r[6]), i, {leg: i}) for i, r in enumerate(rows, 1)]


def hit_row(h: Hit) -> list:
    """The row :func:`leg_hits` reads back: a candidate as the candidate cache stores it."""
    return [h.chunk_id, h.doc_id, h.source_uri, h.doc_type, h.start, h.end, h.score]


#: ``retrieval.vector.search=auto`` scans exactly up to this many chunks of the strategy. Measured on 2 cores
#: (docs/reference/performance.md, "Exact or HNSW"): 384-dim vectors, depth 50, p50 per query exact / HNSW:
#: 1k chunks 0.37 / 0.39 ms, 3k 0.89 / 0.55, 10k 4.9 / 1.05, 30k 14.0 / 1.6, 100k 59.7 / 2.7. HNSW is faster
#: from ~1-2k chunks, but by well under the keyword leg's cost until ~10k (its p50 there is 5.3 ms), and below
#: that size exactness is worth a few milliseconds: an HNSW build is randomised, so a rebuilt index returns
#: another list and the same config gives other numbers (issue 45: 3 cases of 230 moved on a fresh clone).
EXACT_MAX_CHUNKS = 10_000
VECTOR_SEARCH_MODES = ("auto", "exact", "hnsw")


@dataclass(frozen=True)
class VectorSearchParams:
    """The ``retrieval.vector`` group: how the vector leg searches. ``exact`` scans every chunk of the
    strategy (the same config on the same data gives the same lists on any database); ``hnsw`` searches
    pgvector's HNSW graph (approximate, and each build is another graph); ``auto`` is exact up to
    ``exact_max_chunks`` chunks and HNSW above. The mode used is the run's ``retrieval.vector.search`` tag."""

    search: str = "auto"  # auto | exact | hnsw
    exact_max_chunks: int = EXACT_MAX_CHUNKS  # auto's bound (chunks of the strategy)

    def __post_init__(self) -> None:
        if self.search not in VECTOR_SEARCH_MODES:
            raise ConfigError(f"retrieval.vector.search: must be one of {', '.join(VECTOR_SEARCH_MODES)}, "
                              f"got {self.search!r}")
        if self.exact_max_chunks < 0:
            raise ConfigError(f"retrieval.vector.exact_max_chunks: must be >= 0, got {self.exact_max_chunks}")

    def exact_for(self, n_chunks: int) -> bool:
        return self.search == "exact" or (self.search == "auto" and n_chunks <= self.exact_max_chunks)

    def describe(self, n_chunks: int) -> str:
        """What the run's tag says: the mode used and, under auto, why."""
        used = "exact" if self.exact_for(n_chunks) else "hnsw"
        if self.search != "auto":
            return used
        sign = "<=" if used == "exact" else ">"
        return f"{used} (auto: {n_chunks:,} chunks {sign} {self.exact_max_chunks:,})"


@dataclass(frozen=True)
class KeywordParams:
    """``tsquery``: or | and | websearch (which chunks match). ``rank``: ts_rank | ts_rank_cd |
    bm25 (how they are scored). ``normalization`` is ts_rank's; ``k1`` and ``b`` are BM25's.

    ``identifier_boost`` is added to the text rank once per exact identifier (see
    :mod:`rag_experiments.identifiers`) that the query and the chunk share.
    """

    tsquery: str = "or"
    rank: str = "bm25"  # the shipped configs' choice too (conf/retrieval/*.yaml): one default everywhere
    normalization: int = 1
    identifier_boost: float = 1.0
    k1: float = 0.9  # Anserini's defaults
    b: float = 0.4
    # RM3 pseudo-relevance feedback on the BM25 leg (rag_experiments.retrieval.rm3); Anserini's defaults
    rm3: bool = False
    fb_docs: int = 10
    fb_terms: int = 10
    original_query_weight: float = 0.5

    def __post_init__(self) -> None:
        if self.tsquery not in TSQUERY_MODES:
            raise ConfigError(f"retrieval.keyword.tsquery: unknown mode {self.tsquery!r}; use one of {', '.join(TSQUERY_MODES)}")
        if self.rank not in RANK_FUNCTIONS:
            raise ConfigError(f"retrieval.keyword.rank: unknown function {self.rank!r}; use one of {', '.join(RANK_FUNCTIONS)}")
        if self.identifier_boost < 0:
            raise ConfigError(f"retrieval.keyword.identifier_boost: must be >= 0, got {self.identifier_boost}")
        if not self.k1 >= 0:  # also rejects NaN
            raise ConfigError(f"retrieval.keyword.k1: must be >= 0, got {self.k1}")
        if not 0 <= self.b <= 1:
            raise ConfigError(f"retrieval.keyword.b: must be in [0, 1], got {self.b}")
        if self.rm3 and self.rank != "bm25":
            raise ConfigError(f"retrieval.keyword.rm3: RM3 expands the BM25 leg; retrieval.keyword.rank is {self.rank!r}",
                              hint="set retrieval.keyword.rank=bm25 (the default)")
        if self.fb_docs < 1 or self.fb_terms < 1:
            raise ConfigError(f"retrieval.keyword.fb_docs / fb_terms: must be >= 1, got {self.fb_docs} / {self.fb_terms}")
        if not 0 <= self.original_query_weight <= 1:
            raise ConfigError(f"retrieval.keyword.original_query_weight: must be in [0, 1], got {self.original_query_weight}")

    def key(self) -> str:
        """Every field that can change the candidate list (part of the candidate-cache key)."""
        return cache_key("keyword-params", params=self)


def keyword_sql(params: KeywordParams, filters: Filters) -> tuple[sql.Composable, dict]:
    """The keyword leg as a SELECT (chunk metadata + score), ordered, limited to %(depth)s."""
    if params.rank == "bm25":
        return bm25_sql(params, filters)
    where, fparams = filters.where()
    query = sql.SQL(
        "SELECT " + META_COLUMNS + ", score FROM ("
        " SELECT c.*, {rank}(c.tsv, q.tsq, %(norm)s)"
        "   + %(boost)s * cardinality(ARRAY(SELECT unnest(c.identifiers) INTERSECT SELECT unnest(q.idents)))"
        "   AS score"
        # (SELECT tsquery) is an InitPlan: the planner cannot see the query's terms, so it takes
        # the GIN bitmap scan. Given the constant, it estimates an OR of common words to match
        # most rows and scans the whole table, testing @@ on every chunk of every strategy:
        # same ranking, 2.5-3x slower (p50 8.4 vs 20.6 ms demo, 29 vs 87 ms full manual).
        " FROM chunks c, (SELECT (SELECT {tsq}) AS tsq, %(idents)s::text[] AS idents) q"
        " WHERE c.strategy_id = %(sid)s AND (c.tsv @@ q.tsq OR c.identifiers && q.idents){where}"
        ") s ORDER BY score DESC, chunk_id LIMIT %(depth)s"
    ).format(rank=sql.Identifier(params.rank), tsq=sql.SQL(TSQUERY_MODES[params.tsquery]), where=where)
    return query, {"norm": params.normalization, "boost": params.identifier_boost, **fparams}


# Lucene's BM25 (Lucene >= 8, Anserini), per chunking strategy:
#   idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)),  score = sum_t qtf(t) idf(t) tf / (tf + k1 (1 - b + b dl / avgdl))
# qtf: occurrences of the lexeme in the query (a repeated query word counts again, as in Lucene's
# BooleanQuery and bm25s). Query lexemes come from to_tsvector over the query, the same parser
# and dictionaries as plainto_tsquery, so stop words vanish (a stop-word-only query scores nothing).
# df comes from bm25_df and (tf, dl) from the postings' covering key, so neither the chunks nor
# the postings table is read (migration 0004).
# Candidates: chunks with a posting of a query lexeme (that *is* the OR tsquery), intersected with
# the tsquery for and/websearch, plus chunks sharing an exact identifier (BM25 0, plus the boost).
# Ties: chunks whose scores are mathematically equal (same weights in another order, or another
# tf and dl with the same tf / (tf + k1 (1 - b + b dl / avgdl))) came out of floating point a bit
# apart and ranked by that bit, not by chunk id. So the exact score sums in ascending weight
# order, the tf fraction is formed before it multiplies idf, and the score is rounded to 13
# significant digits (relative change <= 5e-13).
# That exact score costs a sort of every posting and a numeric rounding per chunk, so in OR mode
# without filters (BM25_PRUNED_SQL) it is computed only for the chunks that can rank: the raw
# plain float sum (any order: within ~1e-15 relative of the exact sum) decides `top`, every chunk
# within 1e-9 of the depth-th best raw sum (a superset of the best `depth` exact scores; ties at
# the cut included), and `bm` scores those and the identifier matches exactly. Same lists and
# scores as scoring every chunk exactly (checked on 100 golden queries, demo and whole manual);
# whole-manual leg p50 27.5 -> 12.7 ms with migration 0004. With a tsquery mode that drops chunks
# or a filter (BM25_SQL), every matching chunk is scored exactly.
QT_FROM_QUERY = ("SELECT u.lexeme, coalesce(cardinality(u.positions), 1)::float8 AS qtf"
                 " FROM unnest(to_tsvector(" + TS_CONFIG + ", %(q)s)) u")
# RM3's second pass: each expanded lexeme with its weight in place of its count in the query
QT_WEIGHTED = "SELECT u.lexeme, u.qtf FROM unnest(%(lexemes)s::text[], %(weights)s::float8[]) AS u(lexeme, qtf)"

# The parts both BM25 statements share: the query's lexemes with their weights (qi), the chunks
# sharing an exact identifier with the query (idm) joined to the BM25 candidates (cand), the exact
# score of a summed list (ascending order, 13 significant digits) and the final ranking.
_BM25_TERMS = (
    "WITH qt AS ({qt}),"
    " st AS (SELECT n_chunks::float8 AS n, sum_dl::float8 / greatest(n_chunks, 1) AS avgdl"
    "   FROM bm25_stats WHERE strategy_id = %(sid)s),"
    " qi AS (SELECT qt.lexeme, qt.qtf * ln(1 + (st.n - d.df + 0.5) / (d.df + 0.5)) AS idf, st.avgdl"
    "   FROM qt JOIN bm25_df d ON d.strategy_id = %(sid)s AND d.lexeme = qt.lexeme, st),"
)
_BM25_CANDIDATES = (
    " idm AS (SELECT c.chunk_id FROM chunks c WHERE c.strategy_id = %(sid)s AND c.identifiers && %(idents)s::text[]),"
    " cand AS (SELECT chunk_id FROM top UNION SELECT chunk_id FROM idm),"
)
_EXACT_SCORE = "round(s::numeric, 12 - floor(log(s))::int)::float8"
_BM25_RANKED = (
    " SELECT " + META_COLUMNS + ", score FROM ("
    " SELECT c.*, coalesce(bm.bm25, 0)"
    "   + %(boost)s * cardinality(ARRAY(SELECT unnest(c.identifiers) INTERSECT SELECT unnest(%(idents)s::text[])))"
    "   AS score"
    " FROM cand JOIN chunks c ON c.strategy_id = %(sid)s AND c.chunk_id = cand.chunk_id"
    " LEFT JOIN bm ON bm.chunk_id = cand.chunk_id"
    " WHERE TRUE{match}{where}"
    ") s ORDER BY score DESC, chunk_id LIMIT %(depth)s"
)

BM25_SQL = (
    _BM25_TERMS
    + " w AS MATERIALIZED (SELECT p.chunk_id, qi.idf * (p.tf / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.dl / qi.avgdl))) AS w"
    "   FROM qi JOIN bm25_postings p ON p.strategy_id = %(sid)s AND p.lexeme = qi.lexeme),"
    " raw AS (SELECT chunk_id, sum(w) AS s FROM w GROUP BY chunk_id),"
    " top AS (SELECT chunk_id FROM raw),"
    + _BM25_CANDIDATES
    + " bm AS (SELECT chunk_id, " + _EXACT_SCORE + " AS bm25"
    "   FROM (SELECT w.chunk_id, sum(w.w ORDER BY w.w) AS s FROM w JOIN cand USING (chunk_id) GROUP BY w.chunk_id) t)"
    + _BM25_RANKED
)


# The pruned leg (migration 0006, bm25_top: MaxScore inside PostgreSQL): `top` is the same set as
# the exhaustive `raw`/`top` CTEs compute, found by reading the postings of the query's rare
# terms and probing its common ones for the few chunks that can still rank; `bm` then probes
# every query lexeme for those chunks instead of reading every posting again. Exact scores, the
# identifier matches and the ordering are the exhaustive leg's, expression for expression:
# tests/retrieval/test_bm25_pruning.py checks lists and scores equal with pruning forced.
BM25_PRUNED_SQL = (
    _BM25_TERMS
    + " top AS (SELECT t.top_chunk AS chunk_id FROM bm25_top(%(sid)s,"
    "   (SELECT array_agg(qt.lexeme ORDER BY qt.lexeme) FROM qt), (SELECT array_agg(qt.qtf ORDER BY qt.lexeme) FROM qt),"
    "   %(depth)s, %(k1)s, %(b)s, %(prune_min)s, %(prune_seed)s, %(probe_cost)s) t),"
    + _BM25_CANDIDATES
    # one index probe per (candidate, query lexeme): OFFSET 0 keeps the subquery per candidate, where
    # the planner would otherwise hash-join every posting of the query's lexemes against the ~depth
    # candidates (100k chunks: 68k postings read again, ~38 ms of a 137 ms leg)
    + " w AS (SELECT cand.chunk_id, x.w FROM cand CROSS JOIN LATERAL ("
    "   SELECT qi.idf * (p.tf / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.dl / qi.avgdl))) AS w FROM qi"
    "   JOIN bm25_postings p ON p.strategy_id = %(sid)s AND p.lexeme = qi.lexeme AND p.chunk_id = cand.chunk_id"
    "   OFFSET 0) x),"
    " bm AS (SELECT chunk_id, " + _EXACT_SCORE + " AS bm25"
    "   FROM (SELECT w.chunk_id, sum(w.w ORDER BY w.w) AS s FROM w GROUP BY w.chunk_id) t)"
    + _BM25_RANKED
)

# When bm25_top reads every posting anyway: a query whose lexemes have at most this many postings
# in all (reading them costs less than the pruning's probes; measured in rag-exp bench --scale).
PRUNE_MIN_POSTINGS = 20_000
# How many postings of the highest-bound terms bm25_top reads to find its threshold.
PRUNE_SEED_POSTINGS = 5_000
# A probe of one (lexeme, chunk) posting by its key, in postings read in key order: ~5 us against
# ~0.2 us (measured on 100k chunks). bm25_top prunes only where that makes it cheaper.
PROBE_COST = 25.0


def bm25_sql(params: KeywordParams, filters: Filters, weighted: bool = False) -> tuple[sql.Composable, dict]:
    """The BM25 keyword leg (same columns, binds and ordering as the ts_rank one)."""
    qt = sql.SQL(QT_WEIGHTED if weighted else QT_FROM_QUERY)
    bind = {"k1": float(params.k1), "b": float(params.b), "boost": params.identifier_boost}
    if params.tsquery == "or" and filters.is_empty():
        # every chunk with a posting matches, nothing drops chunks after the cut: prune
        return sql.SQL(BM25_PRUNED_SQL).format(qt=qt, match=sql.SQL(""), where=sql.SQL("")), {
            **bind, "prune_min": PRUNE_MIN_POSTINGS, "prune_seed": PRUNE_SEED_POSTINGS,
            "probe_cost": PROBE_COST}
    where, fparams = filters.where()
    # or: every chunk with a posting matches already. and/websearch: the tsquery decides (as an
    # InitPlan, for the reason given in keyword_sql); identifier matches are kept either way.
    match = sql.SQL("") if params.tsquery == "or" else sql.SQL(
        " AND (c.tsv @@ (SELECT {tsq}) OR c.identifiers && %(idents)s::text[])").format(tsq=sql.SQL(TSQUERY_MODES[params.tsquery]))
    # A tsquery or filter still has to drop chunks after scoring: every chunk is scored exactly.
    query = sql.SQL(BM25_SQL).format(match=match, where=where, qt=qt)
    return query, {**bind, **fparams}


def query_identifiers(conn: psycopg.Connection, strategy_id: str, query: str) -> list[str]:
    """The query's exact identifiers, extracted as the strategy's chunks' were (its corpus.language)."""
    return extract_identifiers(query, strategy_language(conn, strategy_id))


def keyword_search(conn: psycopg.Connection, strategy_id: str, query: str, depth: int,
                   params: KeywordParams = KeywordParams(), filters: Filters = Filters()) -> list[Hit]:
    if params.rm3:
        return rm3_search(conn, strategy_id, query, depth, params, filters)
    stmt, bind = keyword_sql(params, filters)
    bind.update({"q": query, "idents": query_identifiers(conn, strategy_id, query), "sid": strategy_id, "depth": depth})
    rows = conn.execute(stmt, bind).fetchall()
    if not rows and params.rank == "bm25" and conn.execute(
            "SELECT 1 FROM bm25_stats WHERE strategy_id = %s", (strategy_id,)).fetchone() is None:
        # without N and avgdl the leg would return nothing, silently: say why instead
        raise DatabaseError(f"strategy {strategy_id} has no BM25 statistics (bm25_stats)",
                            hint="re-run the ingest of this strategy, or use retrieval.keyword.rank=ts_rank")
    return leg_hits(rows, "keyword")


def rm3_search(conn: psycopg.Connection, strategy_id: str, query: str, depth: int, params: KeywordParams,
               filters: Filters = Filters()) -> list[Hit]:
    """BM25 with RM3 expansion (rag_experiments.retrieval.rm3): a first pass for the feedback
    chunks, the expansion over their lexemes, a second pass with the expanded weights."""
    first = keyword_search(conn, strategy_id, query, params.fb_docs, replace(params, rm3=False), filters)
    vectors = feedback_vectors(conn, strategy_id, [h.chunk_id for h in first])
    lexemes = sorted({t for v in vectors.values() for t in v})
    df, n_chunks = document_frequencies(conn, strategy_id, lexemes)
    weights = rm3_weights(query_lexemes(conn, query, strategy_id), [(h.score, vectors.get(h.chunk_id, {})) for h in first],
                          df, n_chunks, params.fb_terms, params.original_query_weight,
                          language=strategy_language(conn, strategy_id))
    stmt, bind = bm25_sql(params, filters, weighted=True)
    bind.update({"q": query, "idents": query_identifiers(conn, strategy_id, query), "sid": strategy_id, "depth": depth,
                 "lexemes": list(weights), "weights": [weights[t] for t in weights]})
    return leg_hits(conn.execute(stmt, bind).fetchall(), "keyword")


def vector_sql(dim: int, filters: Filters) -> tuple[sql.Composable, dict]:
    """The vector leg: HNSW cosine KNN, then re-sorted by (score desc, chunk_id).

    The inner ORDER BY must be the bare distance for the HNSW index to serve it; the outer
    sort adds the chunk-id tie-break. score = 1 - cosine distance.
    """
    where, fparams = filters.where()
    # vector(d) up to 2,000 dimensions, halfvec(d) above: the same cast as the strategy's index
    cast = sql.SQL(cast_sql(dim))  # built from an int and a fixed type name only
    vec = sql.SQL("embedding::{}").format(cast)
    query = sql.SQL(
        "SELECT " + META_COLUMNS + ", 1 - dist AS score FROM ("
        " SELECT " + META_COLUMNS + ", {vec} <=> %(qvec)s::{cast} AS dist FROM chunks"
        " WHERE strategy_id = %(sid)s{where} ORDER BY {vec} <=> %(qvec)s::{cast} LIMIT %(depth)s"
        ") v ORDER BY score DESC, chunk_id"
    ).format(vec=vec, cast=cast, where=where)
    return query, fparams


def set_vector_session(conn: psycopg.Connection, depth: int, filtered: bool, ef_search: int | None = None) -> None:
    """``hnsw.ef_search`` >= depth (the default 40 silently returns fewer rows than asked);
    iterative scans when filtered, so a selective filter never starves the result list."""
    ef = max(40, depth, ef_search or 0)
    conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(min(ef, 1000)),))
    conn.execute("SELECT set_config('hnsw.iterative_scan', %s, true)", ("strict_order" if filtered else "off",))


def vector_search(conn: psycopg.Connection, strategy_id: str, qvec: np.ndarray, depth: int, dim: int,
                  filters: Filters = Filters(), *, ef_search: int | None = None, exact: bool = False) -> list[Hit]:
    """KNN over the strategy's partial HNSW index; ``exact=True`` forces an exact scan (for ANN recall)."""
    stmt, bind = vector_sql(dim, filters)
    bind.update({"qvec": qvec, "sid": strategy_id, "depth": depth})
    with conn.transaction():
        set_vector_session(conn, depth, not filters.is_empty(), ef_search)
        if exact:
            conn.execute("SET LOCAL enable_indexscan = off")
        # prepare=False: a cached plan would ignore enable_indexscan changes between calls
        rows = conn.execute(stmt, bind, prepare=False if exact else None).fetchall()
    return leg_hits(rows, "vector")


class Leg(Protocol):
    """A first-stage leg (BEIR's search contract: a new leg is a new class). ``key_parts``: what
    besides strategy, query, depth and filters can change its candidates (part of their cache key)."""

    name: ClassVar[str]

    def key_parts(self) -> dict: ...

    def search(self, query: str) -> list[Hit]: ...


@dataclass(frozen=True)
class LegScope:
    """What every leg searches within: the connection, the strategy's chunks, the candidate depth
    and the metadata filters (the leading fields of each leg, so legs are built positionally)."""

    conn: psycopg.Connection
    strategy: StrategyInfo
    depth: int
    filters: Filters


@dataclass(frozen=True)
class VectorLeg(LegScope):
    name: ClassVar[str] = "vector"
    ef_search: int | None
    model_id: str
    query_vector: Callable[[str], np.ndarray]
    exact: bool = False  # an exact scan (retrieval.vector.search): no index, the same list on every build

    def key_parts(self) -> dict:
        if self.exact:  # the strategy's content digest (in every leg key) is all an exact list depends on
            return {"model": self.model_id, "search": "exact"}
        # the HNSW index and which build of it: a sweep over its m / ef_construction rebuilds it
        # under the same strategy, and each build is another (randomised, approximate) graph
        return {"model": self.model_id, "ef": self.ef_search, "index": self.strategy.hnsw_index,
                "build": self.strategy.index_build}

    def search(self, query: str) -> list[Hit]:
        return vector_search(self.conn, self.strategy.strategy_id, self.query_vector(query), self.depth,
                             self.strategy.dim, self.filters, ef_search=self.ef_search, exact=self.exact)


@dataclass(frozen=True)
class KeywordLeg(LegScope):
    name: ClassVar[str] = "keyword"
    params: KeywordParams

    def key_parts(self) -> dict:
        return {"kw": self.params.key()}

    def search(self, query: str) -> list[Hit]:
        return keyword_search(self.conn, self.strategy.strategy_id, query, self.depth, self.params, self.filters)
