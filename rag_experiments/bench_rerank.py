"""Bench rows ``rerank``: what the configured reranker costs at the ``hybrid_rerank`` point — time
per query and per (query, passage) pair scored — cold (every passage new to the reranker: the
first run of a golden set) and warm (scores read back from ``rerank_cache``: what a
``rerank.cutoff`` sweep pays for the candidates an earlier point scored), plus the pairs a
cutoff raised by 10 scores anew (only the new candidates: the cache is keyed by model, query
and passage text).

Issue 58: ``experiment=compare_variants`` spent 537 of its 555 s in this point (MaxSim over the
bundled MiniLM's token vectors) for recall@5 0.780 against hybrid's 0.786.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable

from .retrieval.rerank import cached_scores, load_reranker
from .retrieval.retriever import Retriever, RetrievalParams


def bench_rerank(add: Callable[[str, str, str], None], conn, strategy, embedder, queries: list[str],
                 params: RetrievalParams) -> dict[str, float]:
    """Rows through ``add(section, what, value)``; returns the measured numbers."""
    cutoff = params.rerank.cutoff
    fused = Retriever(conn, strategy, embedder, replace(params, variant="hybrid", use_cache=False))
    fused.embed_queries(queries)
    heads = []
    for q in queries:
        hits = fused.search(q, cutoff + 10).hits
        texts = fused.chunk_texts([h.chunk_id for h in hits])
        heads.append((q, [texts[h.chunk_id] for h in hits]))
    reranker = load_reranker(params.rerank)
    model = reranker.model_id
    conn.execute("DELETE FROM rerank_cache WHERE model = %s", (model,))  # cold: nothing scored before

    def timed(depth: int) -> tuple[float, int]:
        scored = [0]
        t = time.perf_counter()
        for q, texts in heads:
            cached_scores(conn, reranker, q, texts[:depth], on_scored=lambda n: scored.__setitem__(0, scored[0] + n))
        return time.perf_counter() - t, scored[0]

    cold_s, cold_pairs = timed(cutoff)
    warm_s, _ = timed(cutoff)
    more_s, more_pairs = timed(cutoff + 10)
    n = len(heads)
    add("rerank", f"{model} (rerank.cutoff {cutoff}, {n} queries): cold, ms per query / per pair scored",
        f"{1000 * cold_s / n:.0f} / {1000 * cold_s / max(cold_pairs, 1):.1f}")
    add("rerank", "the same again (scores from rerank_cache), ms per query", f"{1000 * warm_s / n:.1f}")
    add("rerank", f"cutoff {cutoff} -> {cutoff + 10}: pairs scored anew / ms per query",
        f"{more_pairs} (of {n * (cutoff + 10)}) / {1000 * more_s / n:.0f}")
    return {"cold_ms_per_query": 1000 * cold_s / n, "cold_ms_per_pair": 1000 * cold_s / max(cold_pairs, 1),
            "warm_ms_per_query": 1000 * warm_s / n, "new_pairs": more_pairs}
