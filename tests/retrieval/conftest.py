from __future__ import annotations

import pytest

from rag_experiments.chunking import ChunkingParams
from rag_experiments.chunk_index import ingest, strategy_info


@pytest.fixture
def mini_strategy(conn, mini_docs, embedder):
    report = ingest(conn, mini_docs, ChunkingParams("heading", 60), embedder)
    return strategy_info(conn, report.strategy_id)


@pytest.fixture
def many_chunks_strategy(conn, mini_docs, embedder):
    """~350 tiny chunks: enough rows to exercise HNSW depth and filters."""
    report = ingest(conn, mini_docs, ChunkingParams("fixed", 3, 0, breadcrumbs=False), embedder)
    return strategy_info(conn, report.strategy_id)


@pytest.fixture(scope="session")
def synthetic_corpus(tmp_path_factory):
    """(documents, 150 queries): 4,000 one-section chunks of recombined demo sentences (the scale
    benchmark's generator and seed) with queries whose evidence is known, common and rare words
    as at scale. For the BM25 search tests (pruned, native)."""
    from rag_experiments import bench_scale
    from rag_experiments.corpus.loader import load_corpus
    from rag_experiments.golden.resolve import load_golden

    pool, _ = bench_scale.sentence_pool(None)
    corpus = bench_scale.build_corpus(tmp_path_factory.mktemp("bm25-4k") / "prune-4k", 4000, pool, (150,),
                                      progress=False)
    return load_corpus(corpus.root, corpus.name), [c.query for c in load_golden(corpus.golden[150]).scorable]


SYNTHETIC_CHUNKING = ChunkingParams("heading", 200, 0, breadcrumbs=True)
