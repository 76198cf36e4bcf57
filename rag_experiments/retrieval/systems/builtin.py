"""The built-in variants over this project's index: ``vector``, ``keyword``, ``hybrid`` (the two
legs fused by ``fusion.method``), ``hybrid_rerank`` (fused, then the top ``rerank.cutoff``
reranked). One class implements all four (:class:`rag_experiments.retrieval.retriever.Retriever`):
each entry here names the legs it fuses and whether it reranks."""

from __future__ import annotations

from ..fusion_methods import num, registry as fusion_registry
from ..retriever import RetrievalParams, Retriever
from . import BuildInputs, Getter, SystemType


def fusion_text(get: Getter) -> str:
    """The fusion method's own ``describe`` from a run's config: ``rrf_k=30`` (weights only when not
    1), ``convex alpha=0.5 minmax``, ``combmnz zscore``, ``isr``."""
    method = str(get("fusion.method", "rrf") or "rrf")
    known = fusion_registry().get(method)
    if known is None:  # a run logged by a version that had a method this one has not
        return f"{method} {get('fusion.norm', 'minmax')}"
    return known.describe(lambda key, default=None: get(f"fusion.{key}", default))


def _build(inputs: BuildInputs) -> Retriever:
    return Retriever(inputs.conn, inputs.strategy, inputs.embedder, inputs.settings.retriever_params)


def _describe(legs: tuple[str, ...], rerank: bool):
    def describe(get: Getter, chunking: str, embedding: str) -> str:
        parts = [str(get("retrieval.variant", "?")), chunking]
        if "vector" in legs:
            parts.append(embedding)
        if len(legs) > 1:
            parts.append(fusion_text(get))
        if rerank:
            parts.append(f"rerank {get('rerank.name', '?')}@{get('rerank.cutoff', '?')}")
        return ", ".join(str(p) for p in parts)
    return describe


_LEG_TEXT = {"vector": "vector search (pgvector)", "keyword": "keyword search (BM25 in PostgreSQL)"}


def _sentence(legs: tuple[str, ...], rerank: bool):
    def sentence(get: Getter) -> str:
        head = f"`{get('retrieval.variant', '?')}`: "
        if len(legs) == 1:
            return head + _LEG_TEXT[legs[0]]
        return (head + f"vector + keyword search fused ({fusion_text(get)}, candidate depth "
                f"{num(get('fusion.depth', '?'))})"
                + (f", reranked by {get('rerank.name', '?')} over the top {get('rerank.cutoff', '?')}" if rerank else ""))
    return sentence


def _system(name: str, legs: tuple[str, ...], summary: str, position: int, rerank: bool = False,
            sql_twin: bool = False) -> SystemType:
    return SystemType(name=name, summary=summary, kind="index", params=RetrievalParams, build=_build,
                      describe=_describe(legs, rerank), sentence=_sentence(legs, rerank), legs=legs, rerank=rerank,
                      sql_twin=sql_twin, rewrites=True, filters=True, position=position)


SYSTEMS = (
    _system("vector", ("vector",), "pgvector cosine nearest neighbours of the query's embedding (exact or HNSW)", 0),
    _system("keyword", ("keyword",), "PostgreSQL full-text search ranked by BM25 (retrieval.keyword.*)", 1),
    _system("hybrid", ("vector", "keyword"), "the vector and keyword legs fused by fusion.method", 2, sql_twin=True),
    _system("hybrid_rerank", ("vector", "keyword"), "hybrid, then the reranker re-orders the top rerank.cutoff",
            3, rerank=True),
)
