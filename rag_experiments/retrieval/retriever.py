"""The four variants behind one call, with the caches that make sweep points cheap.

``vector`` | ``keyword`` | ``hybrid`` (RRF) | ``hybrid_rerank`` (RRF, then rerank the top
``cutoff``). Every variant returns :class:`~rag_experiments.types.RankedList`; evaluation never
asks which variant produced it.

Caching (what a sweep point re-uses):
* query embeddings: ``embedding_cache`` by (embedding space for input type ``query``, text hash);
* each leg's candidate list: ``candidate_cache`` by (leg, strategy id, the strategy's content
  digest, model, query, depth, filters, leg params); a change of chunking, model, corpus,
  depth, filter or leg parameter is a different key, so it can never serve stale candidates;
* reranker scores: ``rerank_cache`` by (model, query, chunk text).
Fusion itself runs in Python on the cached lists, so changing ``rrf_k`` or weights runs no
SQL at all. (``fusion.engine=sql`` runs the one-statement SQL twin instead, uncached.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from ..errors import ConfigError
from ..cache_key import cache_key
from ..store import embed_with_cache, embedding_space_key
from ..types import Hit, RankedList
from .filters import Filters
from .fusion import FusionParams, rrf
from .hybrid_sql import hybrid_sql_search
from .legs import LEGS_VERSION, KeywordParams, LegHit, keyword_search, vector_search
from .rerank import RerankParams, Reranker, cached_scores, load_reranker, rerank_order

VARIANTS = ("vector", "keyword", "hybrid", "hybrid_rerank")

# In-process memo of candidate lists by cache key: sweep points that run in one process (Hydra's
# basic launcher) skip even the cache round trip. Keys already encode everything that can change
# a list, so entries never go stale; the size bound keeps memory flat on huge golden sets.
_LEG_MEMO: dict[str, tuple[list[LegHit], float]] = {}
_LEG_MEMO_MAX = 200_000
_QVEC_MEMO: dict[tuple[str, str], np.ndarray] = {}  # (model id, query) -> vector, same reasoning


def forget_memos() -> None:
    """Drop the in-process memos (the persisted caches stay): the next search is what a new
    process would see. For benchmarks ("cold") and tests of the persisted caches."""
    _LEG_MEMO.clear()
    _QVEC_MEMO.clear()


@dataclass(frozen=True)
class RetrievalParams:
    variant: str = "hybrid"
    keyword: KeywordParams = field(default_factory=KeywordParams)
    fusion: FusionParams = field(default_factory=FusionParams)
    rerank: RerankParams = field(default_factory=RerankParams)
    filters: Filters = field(default_factory=Filters)
    ef_search: int | None = None
    use_cache: bool = True

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ConfigError(f"retrieval.variant: unknown variant {self.variant!r}; use one of {', '.join(VARIANTS)}")
        if self.fusion.engine == "sql" and self.variant != "hybrid":
            raise ConfigError(f"fusion.engine=sql implements variant 'hybrid' only, not {self.variant!r}")


@dataclass
class CacheStats:
    query_embeddings_computed: int = 0
    leg_lists_computed: int = 0
    leg_lists_cached: int = 0
    rerank_scored: int = 0


class Retriever:
    def __init__(self, conn: psycopg.Connection, strategy: dict, embedder, params: RetrievalParams) -> None:
        self.conn = conn
        self.strategy = strategy
        self.embedder = embedder
        self.params = params
        self.stats = CacheStats()
        self._reranker: Reranker | None = None
        self._qvec: dict[str, np.ndarray] = {}

    # -- caches ---------------------------------------------------------------------------------
    def _leg_key(self, leg: str, query: str) -> str:
        p = self.params
        parts = {
            "leg": leg, "sid": self.strategy["strategy_id"], "digest": self.strategy["content_digest"],
            "q": query, "depth": p.fusion.depth, "filters": p.filters.key(), "code": LEGS_VERSION,
        }
        if leg == "vector":
            # the HNSW index too: a sweep over its m / ef_construction rebuilds it under the same strategy
            parts.update(model=self.embedder.model_id, ef=p.ef_search, index=self.strategy.get("hnsw_index"))
        else:
            parts.update(kw=p.keyword.key())
        return cache_key("leg-candidates", **parts)

    def embed_queries(self, queries: Sequence[str]) -> None:
        model = embedding_space_key(self.embedder, "query")  # query vectors differ from documents' for API models
        for q in dict.fromkeys(queries):
            if q not in self._qvec and (model, q) in _QVEC_MEMO:
                self._qvec[q] = _QVEC_MEMO[(model, q)]
        todo = [q for q in dict.fromkeys(queries) if q not in self._qvec]
        if not todo:
            return
        vecs, hits = embed_with_cache(self.conn, self.embedder, todo, input_type="query")
        self.stats.query_embeddings_computed += len(todo) - hits
        self._qvec.update(zip(todo, vecs))
        if len(_QVEC_MEMO) > 100_000:
            _QVEC_MEMO.clear()
        _QVEC_MEMO.update(((model, q), v) for q, v in zip(todo, vecs))

    def _legs_for(self, queries: Sequence[str], legs: Sequence[str]) -> dict[tuple[str, str], tuple[list[LegHit], float]]:
        """Candidate lists (and the latency measured when each was computed) per (leg, query)."""
        keys = {(leg, q): self._leg_key(leg, q) for leg in legs for q in queries}
        found: dict[str, tuple[list[LegHit], float]] = {}
        if self.params.use_cache:
            found = {k: _LEG_MEMO[k] for k in keys.values() if k in _LEG_MEMO}
            wanted = list(set(keys.values()) - set(found))
            if wanted:
                rows = self.conn.execute(
                    "SELECT cache_key, hits FROM candidate_cache WHERE cache_key = ANY(%s)", (wanted,)
                ).fetchall()
                for k, v in rows:
                    found[k] = ([LegHit._make(r) for r in v["hits"]], float(v["ms"]))
                    _remember(k, found[k])
        out = {}
        fresh = []
        for (leg, q), key in keys.items():
            if key in found:
                out[(leg, q)] = found[key]
                self.stats.leg_lists_cached += 1
                continue
            t0 = time.perf_counter()
            if leg == "vector":
                self.embed_queries([q])
                hits = vector_search(self.conn, self.strategy["strategy_id"], self._qvec[q], self.params.fusion.depth,
                                     self.strategy["dim"], self.params.filters, ef_search=self.params.ef_search)
            else:
                hits = keyword_search(self.conn, self.strategy["strategy_id"], q, self.params.fusion.depth,
                                      self.params.keyword, self.params.filters)
            ms = (time.perf_counter() - t0) * 1000
            out[(leg, q)] = (hits, ms)
            found[key] = (hits, ms)
            if self.params.use_cache:
                _remember(key, (hits, ms))
            fresh.append((key, leg, {"hits": [h.to_json() for h in hits], "ms": ms}))
            self.stats.leg_lists_computed += 1
        if fresh and self.params.use_cache:
            with self.conn.transaction():
                with self.conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO candidate_cache (cache_key, leg, strategy_id, hits) VALUES (%s, %s, %s, %s)"
                        " ON CONFLICT (cache_key) DO NOTHING",
                        [(k, leg, self.strategy["strategy_id"], Jsonb(v)) for k, leg, v in fresh],
                    )
        return out

    def chunk_texts(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        rows = self.conn.execute(
            "SELECT chunk_id, text FROM chunks WHERE strategy_id = %s AND chunk_id = ANY(%s)",
            (self.strategy["strategy_id"], list(set(chunk_ids))),
        ).fetchall()
        return dict(rows)

    # -- search ---------------------------------------------------------------------------------
    def search_many(self, queries: Sequence[str], limit: int = 20,
                    on_query: Callable[[int], object] | None = None) -> list[RankedList]:
        """Ranked lists for ``queries`` (their legs fetched in bulk); ``on_query(1)`` after each
        query is ranked (a progress bar)."""
        p = self.params
        if p.variant in ("vector", "hybrid", "hybrid_rerank"):
            self.embed_queries(queries)
        done = on_query or (lambda n: None)
        if p.fusion.engine == "sql" and p.variant in ("hybrid", "hybrid_rerank"):
            out = []
            for q in queries:
                out.append(self._search_sql(q, limit))
                done(1)
            return out
        legs = {"vector": ["vector"], "keyword": ["keyword"]}.get(p.variant, ["vector", "keyword"])
        lists = self._legs_for(queries, legs)
        results = []
        for q in queries:
            ms = sum(lists[(leg, q)][1] for leg in legs)
            if p.variant in ("vector", "keyword"):
                hits = [_hit(h, h.score, i, {legs[0]: i}) for i, h in enumerate(lists[(legs[0], q)][0][:limit], 1)]
                results.append(RankedList(q, tuple(hits), ms))
                done(1)
                continue
            fused = rrf({leg: lists[(leg, q)][0] for leg in legs}, p.fusion)
            if p.variant == "hybrid_rerank":
                t0 = time.perf_counter()
                fused, rerank_ranks = self._rerank(q, fused)
                ms += (time.perf_counter() - t0) * 1000
            else:
                rerank_ranks = {}
            hits = []
            for i, f in enumerate(fused[:limit], 1):
                ranks = {**f.leg_ranks, "fused": f.fused_rank if hasattr(f, "fused_rank") else i}
                if f.hit.chunk_id in rerank_ranks:
                    ranks["rerank"] = rerank_ranks[f.hit.chunk_id]
                hits.append(_hit(f.hit, f.score, i, ranks))
            results.append(RankedList(q, tuple(hits), ms))
            done(1)
        return results

    def search(self, query: str, limit: int = 20) -> RankedList:
        return self.search_many([query], limit)[0]

    def _count_rerank_scored(self, n: int) -> None:
        self.stats.rerank_scored += n

    def _rerank(self, query: str, fused: list) -> tuple[list, dict[str, int]]:
        if self._reranker is None:
            self._reranker = load_reranker(self.params.rerank)
        cutoff = self.params.rerank.cutoff
        head = fused[:cutoff]
        texts = self.chunk_texts([f.hit.chunk_id for f in head])
        scores = cached_scores(self.conn if self.params.use_cache else None, self._reranker, query,
                               [texts[f.hit.chunk_id] for f in head], on_scored=self._count_rerank_scored)
        order = rerank_order(scores, cutoff)
        reordered = [_WithFusedRank(fused[i], i + 1) for i in order] + [
            _WithFusedRank(f, i + 1) for i, f in enumerate(fused) if i >= len(order)]
        rerank_ranks = {fused[i].hit.chunk_id: pos for pos, i in enumerate(order, 1)}
        return reordered, rerank_ranks

    def _search_sql(self, query: str, limit: int) -> RankedList:
        t0 = time.perf_counter()
        rows = hybrid_sql_search(self.conn, self.strategy["strategy_id"], query, self._qvec[query],
                                 self.strategy["dim"], self.params.fusion, self.params.keyword,
                                 self.params.filters, limit=max(limit, self.params.rerank.cutoff),
                                 ef_search=self.params.ef_search)
        ms = (time.perf_counter() - t0) * 1000
        hits = []
        for i, r in enumerate(rows[:limit], 1):
            ranks = {"fused": i}
            if r[7] is not None:
                ranks["vector"] = r[7]
            if r[8] is not None:
                ranks["keyword"] = r[8]
            hits.append(Hit(r[0], r[1], r[2], r[3], r[4], r[5], r[6], i, ranks))
        return RankedList(query, tuple(hits), ms)


@dataclass(frozen=True)
class _WithFusedRank:
    inner: object
    fused_rank: int

    @property
    def hit(self):
        return self.inner.hit

    @property
    def score(self):
        return self.inner.score

    @property
    def leg_ranks(self):
        return self.inner.leg_ranks


def _remember(key: str, value: tuple[list[LegHit], float]) -> None:
    if len(_LEG_MEMO) >= _LEG_MEMO_MAX:
        _LEG_MEMO.clear()
    _LEG_MEMO[key] = value


def _hit(h: LegHit, score: float, rank: int, leg_ranks: dict[str, int]) -> Hit:
    return Hit(h.chunk_id, h.doc_id, h.source_uri, h.doc_type, h.start, h.end, score, rank, dict(leg_ranks))
