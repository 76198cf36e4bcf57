"""The four variants behind one call, with the caches that make sweep points cheap.

``vector`` | ``keyword`` | ``hybrid`` (RRF) | ``hybrid_rerank`` (RRF, then rerank the top
``cutoff``). Every variant returns :class:`~rag_experiments.types.RankedList`; evaluation never
asks which variant produced it.

Caching (what a sweep point re-uses):
* query embeddings: ``embedding_cache`` by (embedding space for input type ``query``, text hash);
* each leg's candidate list: ``candidate_cache`` by (leg, strategy id, the strategy's content
  digest, model, query, depth, filters, leg params); a change of chunking, model, corpus,
  depth, filter or leg parameter is a different key, so it can never serve stale candidates;
* reranker scores: ``rerank_cache`` by (model, query, chunk text);
* LLM query rewrites (``query.rewrite``): ``query_rewrites`` by (model, prompt version, mode, n,
  query); the rewritten queries' leg lists are cached like the question's.
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
from ..store import StrategyInfo, embed_with_cache, embedding_space_key
from ..types import Hit, RankedList
from .filters import Filters
from .fusion import FusionParams, fuse, fuse_lists
from .hybrid_sql import hybrid_sql_search
from .query_rewrite import QueryParams, QueryRewriter, check_variant, expansions
from .legs import (LEGS_VERSION, KeywordLeg, KeywordParams, Leg, VectorLeg, VectorSearchParams, hit_row, leg_hits,
                   vector_search)
from .rerank import RerankParams, Reranker, cached_scores, load_reranker, rerank_order
from .protocol import AnnIndex, CacheCounts, ChunkTexts, Usage
from .systems import registry, system_type

#: the variants this class implements (their legs and reranking: :mod:`.systems.builtin`); every
#: variant, a team's systems too, is in :func:`.systems.registry`
VARIANTS = ("vector", "keyword", "hybrid", "hybrid_rerank")


class SearchMemo:
    """The in-process memo of candidate lists, query vectors and ANN recall by key: sweep points
    that run in one process (Hydra's basic launcher) skip even the cache round trip. Keys encode
    everything that can change a value, so entries never go stale; the bounds keep memory flat.
    ``clear()``: the next search is what a new process would see (benchmarks' "cold", tests)."""

    MAX_LISTS = 200_000
    MAX_VECTORS = 100_000

    def __init__(self) -> None:
        self.lists: dict[str, tuple[list[Hit], float]] = {}
        self.vectors: dict[tuple[str, str], np.ndarray] = {}
        self.ann_recall: dict[str, float] = {}

    def remember(self, table: dict, items: dict) -> None:
        if len(table) >= (self.MAX_VECTORS if table is self.vectors else self.MAX_LISTS):
            table.clear()
        table.update(items)

    def clear(self) -> None:
        for table in (self.lists, self.vectors, self.ann_recall):
            table.clear()


MEMO = SearchMemo()  # the process's memo; every Retriever uses it unless given another


@dataclass(frozen=True)
class RetrievalParams:
    variant: str = "hybrid"
    keyword: KeywordParams = field(default_factory=KeywordParams)
    fusion: FusionParams = field(default_factory=FusionParams)
    rerank: RerankParams = field(default_factory=RerankParams)
    filters: Filters = field(default_factory=Filters)
    ef_search: int | None = None
    use_cache: bool = True
    query: QueryParams = field(default_factory=QueryParams)
    vector: VectorSearchParams = field(default_factory=VectorSearchParams)

    def __post_init__(self) -> None:
        system = system_type(self.variant)  # ConfigError naming retrieval.variant
        if self.fusion.engine == "sql" and not system.sql_twin:
            twins = [name for name, s in registry().items() if s.sql_twin]
            raise ConfigError(f"fusion.engine=sql implements variant {', '.join(repr(t) for t in twins)} only, "
                              f"not {self.variant!r}")
        if self.query.enabled and system.rewrites:
            check_variant(self.query, self.variant, system.legs)
            if self.fusion.engine == "sql":
                raise ConfigError(f"query.rewrite={self.query.rewrite}: the SQL fusion twin searches the question "
                                  "only", hint="use fusion.engine=python (the default) with query rewriting")
        elif self.query.enabled and system.kind == "index":
            raise ConfigError(f"query.rewrite={self.query.rewrite}: retrieval={self.variant} does not rewrite queries",
                              hint="use a variant that does (" + ", ".join(n for n, s in registry().items()
                                                                      if s.rewrites) + ") or query.rewrite=none")


@dataclass
class CacheStats:
    query_embeddings_computed: int = 0
    leg_lists_computed: int = 0
    leg_lists_cached: int = 0
    rerank_scored: int = 0


class Retriever:
    """The built-in variants: an implementation of :class:`.protocol.SearchSystem` (built by
    :mod:`.systems.builtin`)."""

    def __init__(self, conn: psycopg.Connection, strategy: StrategyInfo, embedder, params: RetrievalParams,
                 memo: SearchMemo = MEMO) -> None:
        self.conn = conn
        self.strategy = strategy
        self.embedder = embedder
        self.params = params
        self.memo = memo
        self.stats = CacheStats()
        self.reranker: Reranker | None = None  # loaded by the first reranked search
        self.rewriter: QueryRewriter | None = None  # made by the first search with query.rewrite
        self._qvec: dict[str, np.ndarray] = {}
        self._leg_parts: dict[str, dict] = {}
        p = self.params
        system = system_type(p.variant)
        if not system.legs:
            raise ConfigError(f"retrieval.variant: {p.variant!r} is not one of this index's variants "
                              f"({', '.join(VARIANTS)})")
        self.leg_names: tuple[str, ...] = system.legs  # the legs it fuses (one leg is served as it is)
        self.reranks = system.rerank
        self.legs: dict[str, Leg] = {leg.name: leg for leg in (
            VectorLeg(conn, strategy, p.fusion.depth, p.filters, p.ef_search, embedder.model_id, self.query_vector,
                      p.vector.exact_for(strategy.n_chunks)),
            KeywordLeg(conn, strategy, p.fusion.depth, p.filters, p.keyword))}

    @property
    def variant(self) -> str:
        return self.params.variant

    # -- caches ---------------------------------------------------------------------------------
    def leg_key(self, leg: str, query: str) -> str:
        parts = self._leg_parts.get(leg)
        if parts is None:  # the same for every query of this retriever: hashed once, not per query
            p = self.params
            parts = self._leg_parts[leg] = dict(
                leg=leg, sid=self.strategy.strategy_id, digest=self.strategy.content_digest, depth=p.fusion.depth,
                filters=p.filters.key(), code=LEGS_VERSION, **self.legs[leg].key_parts())
        return cache_key("leg-candidates", q=query, **parts)

    def embed_queries(self, queries: Sequence[str]) -> None:
        model = embedding_space_key(self.embedder, "query")  # query vectors differ from documents' for API models
        for q in dict.fromkeys(queries):
            if q not in self._qvec and (model, q) in self.memo.vectors:
                self._qvec[q] = self.memo.vectors[(model, q)]
        todo = [q for q in dict.fromkeys(queries) if q not in self._qvec]
        if not todo:
            return
        got = embed_with_cache(self.conn, self.embedder, todo, input_type="query")
        vecs, hits = got.vectors, got.cache_hits
        self.stats.query_embeddings_computed += len(todo) - hits
        self._qvec.update(zip(todo, vecs))
        self.memo.remember(self.memo.vectors, {(model, q): v for q, v in zip(todo, vecs)})

    def query_vector(self, query: str) -> np.ndarray:
        self.embed_queries([query])
        return self._qvec[query]

    def _legs_for(self, queries: Sequence[str], legs: Sequence[str]) -> dict[tuple[str, str], tuple[list[Hit], float]]:
        """Candidate lists (and the latency measured when each was computed) per (leg, query)."""
        keys = {(leg, q): self.leg_key(leg, q) for leg in legs for q in queries}
        found: dict[str, tuple[list[Hit], float]] = {}
        if self.params.use_cache:
            found = {k: self.memo.lists[k] for k in keys.values() if k in self.memo.lists}
            wanted = list(set(keys.values()) - set(found))
            if wanted:
                rows = self.conn.execute(
                    "SELECT cache_key, leg, hits FROM candidate_cache WHERE cache_key = ANY(%s)", (wanted,)
                ).fetchall()
                for k, leg, v in rows:
                    found[k] = (leg_hits(v["hits"], leg), float(v["ms"]))
                    self.memo.remember(self.memo.lists, {k: found[k]})
        out = {}
        fresh = []
        for (leg, q), key in keys.items():
            if key in found:
                out[(leg, q)] = found[key]
                self.stats.leg_lists_cached += 1
                continue
            t0 = time.perf_counter()
            hits = self.legs[leg].search(q)
            ms = (time.perf_counter() - t0) * 1000
            out[(leg, q)] = (hits, ms)
            found[key] = (hits, ms)
            if self.params.use_cache:
                self.memo.remember(self.memo.lists, {key: (hits, ms)})
            fresh.append((key, leg, {"hits": [hit_row(h) for h in hits], "ms": ms}))
            self.stats.leg_lists_computed += 1
        if fresh and self.params.use_cache:
            with self.conn.transaction():
                with self.conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO candidate_cache (cache_key, leg, strategy_id, hits) VALUES (%s, %s, %s, %s)"
                        " ON CONFLICT (cache_key) DO NOTHING",
                        [(k, leg, self.strategy.strategy_id, Jsonb(v)) for k, leg, v in fresh],
                    )
        return out

    def chunk_texts(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        rows = self.conn.execute(
            "SELECT chunk_id, text FROM chunks WHERE strategy_id = %s AND chunk_id = ANY(%s)",
            (self.strategy.strategy_id, list(set(chunk_ids))),
        ).fetchall()
        return dict(rows)

    # -- search ---------------------------------------------------------------------------------
    def search_many(self, queries: Sequence[str], limit: int = 20,
                    on_query: Callable[[int], object] | None = None) -> list[RankedList]:
        """Ranked lists for ``queries`` (their legs fetched in bulk); ``on_query(1)`` after each
        query is ranked (a progress bar)."""
        p = self.params
        legs = self.leg_names
        if "vector" in legs:
            self.embed_queries(queries)
        done = on_query or (lambda n: None)
        if p.fusion.engine == "sql" and len(legs) > 1:
            out = []
            for q in queries:
                out.append(self._search_sql(q, limit))
                done(1)
            return out
        if p.query.enabled:
            return self._search_rewritten(queries, legs, limit, done)
        lists = self._legs_for(queries, legs)
        results = []
        for q in queries:
            ms = sum(lists[(leg, q)][1] for leg in legs)
            if len(legs) == 1:  # a leg's hits are already ranked (rank, leg_ranks) as that leg
                hits = lists[(legs[0], q)][0][:limit]
            else:
                rerank = self.reranks
                fused = fuse({leg: lists[(leg, q)][0] for leg in legs}, p.fusion,
                            max(limit, p.rerank.cutoff) if rerank and limit else limit)
                t0 = time.perf_counter()
                order = self._rerank(q, fused) if rerank else []
                ms += (time.perf_counter() - t0) * 1000 if rerank else 0
                hits = _final(fused, order, limit)
            results.append(RankedList(q, tuple(hits), ms))
            done(1)
        return results

    def _search_rewritten(self, queries: Sequence[str], legs: Sequence[str], limit: int,
                          done: Callable[[int], object]) -> list[RankedList]:
        """query.rewrite (:mod:`.query_rewrite`): each query's expansions searched through the legs
        and the configured fusion, their lists merged by the configured fusion method too
        (:func:`.fusion.fuse_lists`), then the reranker on the question."""
        p = self.params
        if self.rewriter is None:
            self.rewriter = QueryRewriter(p.query, self.conn if p.use_cache else None)
        rewrites = self.rewriter.rewrites(queries)
        pairs = {q: expansions(p.query.rewrite, q, rewrites[q]) for q in queries}
        vector_texts = [v for q in queries for v, _ in pairs[q]] if "vector" in legs else []
        keyword_texts = [k for q in queries for _, k in pairs[q]] if "keyword" in legs else []
        if vector_texts:
            self.embed_queries(vector_texts)
        lists = {**(self._legs_for(list(dict.fromkeys(vector_texts)), ["vector"]) if vector_texts else {}),
                 **(self._legs_for(list(dict.fromkeys(keyword_texts)), ["keyword"]) if keyword_texts else {})}
        rerank = self.reranks
        results = []
        for q in queries:
            ms = 0.0
            ranked = []
            for vt, kt in pairs[q]:
                texts = {"vector": vt, "keyword": kt}
                ms += sum(lists[(leg, texts[leg])][1] for leg in legs)
                if len(legs) == 1:
                    ranked.append(lists[(legs[0], texts[legs[0]])][0])
                else:
                    ranked.append(fuse({leg: lists[(leg, texts[leg])][0] for leg in legs}, p.fusion, p.fusion.depth))
            combined = fuse_lists(ranked, p.fusion)
            t0 = time.perf_counter()
            order = self._rerank(q, combined) if rerank else []
            ms += (time.perf_counter() - t0) * 1000 if rerank else 0
            results.append(RankedList(q, tuple(_final(combined, order, limit)), ms))
            done(1)
        return results

    def search(self, query: str, limit: int = 20) -> RankedList:
        return self.search_many([query], limit)[0]

    def _count_rerank_scored(self, n: int) -> None:
        self.stats.rerank_scored += n

    def _rerank(self, query: str, fused: list[Hit]) -> list[int]:
        """The reranked order of the top ``cutoff`` fused positions (0-based)."""
        if self.reranker is None:
            self.reranker = load_reranker(self.params.rerank)
        cutoff = self.params.rerank.cutoff
        head = fused[:cutoff]
        texts = self.chunk_texts([f.chunk_id for f in head])
        scores = cached_scores(self.conn if self.params.use_cache else None, self.reranker, query,
                               [texts[f.chunk_id] for f in head], on_scored=self._count_rerank_scored)
        return rerank_order(scores, cutoff)

    def _search_sql(self, query: str, limit: int) -> RankedList:
        t0 = time.perf_counter()
        hits = hybrid_sql_search(self.conn, self.strategy.strategy_id, query, self._qvec[query],
                                 self.strategy.dim, self.params.fusion, self.params.keyword,
                                 self.params.filters, limit=max(limit, self.params.rerank.cutoff),
                                 ef_search=self.params.ef_search,
                                 exact=self.params.vector.exact_for(self.strategy.n_chunks))
        ms = (time.perf_counter() - t0) * 1000
        return RankedList(query, tuple(hits[:limit]), ms)

    # -- capabilities (.protocol) ----------------------------------------------------------------
    def capability(self, kind: type) -> object | None:
        """The text of hits, cache counts and API usage always; ANN recall with a vector leg."""
        if kind is AnnIndex:
            return self if "vector" in self.leg_names else None
        return self if kind in (ChunkTexts, CacheCounts, Usage) else None

    def cache_counts(self) -> dict[str, int]:
        return vars(self.stats).copy()

    def usage(self) -> dict[str, float]:
        """A paid reranker's requests and cost, and query rewriting's (requests, cached, tokens, cost)."""
        out: dict[str, float] = {}
        if self.reranker is not None and callable(getattr(self.reranker, "usage", None)):  # API rerankers count
            out.update(self.reranker.usage())
        if self.rewriter is not None:
            out.update(self.rewriter.usage())
        return out

    # -- ANN recall -----------------------------------------------------------------------------
    def ann_recall_key(self, queries: list[str]) -> str:
        """Everything the ANN recall depends on: the strategy, its HNSW index, model, depth,
        ef_search, filters and the queries."""
        p, s = self.params, self.strategy
        return cache_key("ann-recall", sid=s.strategy_id, digest=s.content_digest, index=s.hnsw_index,
                         build=s.index_build,
                         model=self.embedder.model_id, depth=p.fusion.depth, ef=p.ef_search,
                         filters=p.filters.key(), queries=list(queries))

    def ann_recall(self, queries: list[str]) -> float:
        """Mean share of the exact top-``depth`` neighbours that the HNSW index returns, so a too-low
        ``ef_search`` (or ``m``/``ef_construction``) shows up in MLflow next to the metrics."""
        p, s = self.params, self.strategy
        key = self.ann_recall_key(queries)
        if key in self.memo.ann_recall:
            return self.memo.ann_recall[key]
        self.embed_queries(queries)
        shares = []
        for q in queries:
            approx = vector_search(self.conn, s.strategy_id, self._qvec[q], p.fusion.depth, s.dim, p.filters,
                                   ef_search=p.ef_search)  # the HNSW graph's list, whatever the leg searches
            exact = vector_search(self.conn, s.strategy_id, self._qvec[q], p.fusion.depth, s.dim, p.filters, exact=True)
            if exact:
                shares.append(len({h.chunk_id for h in approx} & {h.chunk_id for h in exact}) / len(exact))
        value = sum(shares) / len(shares) if shares else float("nan")
        self.memo.remember(self.memo.ann_recall, {key: value})
        return value


def _final(fused: list[Hit], order: list[int], limit: int) -> list[Hit]:
    """The first ``limit`` hits: the reranked head (``order``: positions in ``fused``), then the rest
    in fused order, with the fused score; ``leg_ranks`` gain the fused and (head) rerank ranks."""
    if not order:  # nothing reranked: rrf's hits (built for this call alone) gain their fused rank in place
        for f in fused[:limit]:
            f.leg_ranks["fused"] = f.rank
        return fused[:limit]
    out = []
    for pos, i in enumerate((order + list(range(len(order), len(fused))))[:limit], 1):
        f = fused[i]
        ranks = {**f.leg_ranks, "fused": f.rank, "rerank": pos} if i < len(order) else {**f.leg_ranks, "fused": f.rank}
        out.append(f.ranked(f.score, pos, ranks))
    return out
