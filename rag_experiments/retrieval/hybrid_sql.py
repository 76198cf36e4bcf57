"""Hybrid RRF in one SQL statement (one round trip), the production twin of :func:`fusion.rrf`.

Ranks come from ``ROW_NUMBER() OVER (ORDER BY score DESC, chunk_id)``, not ``RANK()``: RANK
gives tied rows equal ranks and would disagree with the position-based Python reference.
The session settings for the vector leg go in the same pipeline, so the whole query is one
network round trip. A test proves both implementations return the same ranking, ties included.
"""

from __future__ import annotations

import numpy as np
import psycopg
from psycopg import sql

from ..types import Hit
from .filters import Filters
from .fusion import FusionParams
from .legs import KeywordParams, keyword_sql, query_identifiers, set_vector_session, vector_sql


def hybrid_sql_search(conn: psycopg.Connection, strategy_id: str, query: str, qvec: np.ndarray, dim: int,
                      fusion: FusionParams, keyword: KeywordParams = KeywordParams(),
                      filters: Filters = Filters(), limit: int = 20,
                      ef_search: int | None = None, exact: bool = False) -> list[Hit]:
    """The fused hits, as :func:`.fusion.rrf` and the retriever rank them (``leg_ranks``: each
    leg's rank and the fused rank). ``exact``: the vector leg scans every chunk (no index scan)."""
    kw_stmt, kw_bind = keyword_sql(keyword, filters)
    vec_stmt, vec_bind = vector_sql(dim, filters)
    stmt = sql.SQL(
        "WITH vec AS (SELECT v.*, ROW_NUMBER() OVER (ORDER BY v.score DESC, v.chunk_id) AS r FROM ({vec}) v),"
        " kw AS (SELECT k.*, ROW_NUMBER() OVER (ORDER BY k.score DESC, k.chunk_id) AS r FROM ({kw}) k)"
        " SELECT COALESCE(vec.chunk_id, kw.chunk_id) AS chunk_id,"
        "  COALESCE(vec.doc_id, kw.doc_id), COALESCE(vec.source_uri, kw.source_uri),"
        "  COALESCE(vec.doc_type, kw.doc_type), COALESCE(vec.start_char, kw.start_char),"
        "  COALESCE(vec.end_char, kw.end_char),"
        "  COALESCE(%(wv)s::float8 / (%(rrf_k)s + vec.r), 0.0::float8)"
        "  + COALESCE(%(wk)s::float8 / (%(rrf_k)s + kw.r), 0.0::float8) AS score,"
        "  vec.r, kw.r"
        " FROM vec FULL OUTER JOIN kw ON vec.chunk_id = kw.chunk_id"
        " ORDER BY score DESC, chunk_id LIMIT %(limit)s"
    ).format(vec=vec_stmt, kw=kw_stmt)
    bind = {**kw_bind, **vec_bind, "q": query, "idents": query_identifiers(conn, strategy_id, query), "qvec": qvec,
            "sid": strategy_id, "depth": fusion.depth, "wv": fusion.vector_weight,
            "wk": fusion.keyword_weight, "rrf_k": fusion.rrf_k, "limit": limit}
    with conn.transaction():
        with conn.pipeline():
            set_vector_session(conn, fusion.depth, not filters.is_empty(), ef_search)
            if exact:
                conn.execute("SET LOCAL enable_indexscan = off")
            # prepare=False when exact: a cached plan would ignore enable_indexscan
            cur = conn.execute(stmt, bind, prepare=False if exact else None)
        rows = cur.fetchall()
    return [Hit(*r[:4], int(r[4]), int(r[5]), float(r[6]), i, {"fused": i, **{
        leg: int(rank) for leg, rank in (("vector", r[7]), ("keyword", r[8])) if rank is not None}}) for i, r in enumerate(rows, 1)]
