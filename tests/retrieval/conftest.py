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
