"""The API embedders through the real voyageai / openai SDKs against the local provider stub."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("voyageai")
pytest.importorskip("openai")

from rag_experiments.chunking import ChunkingParams  # noqa: E402
from rag_experiments.db.connect import connect  # noqa: E402
from rag_experiments.embedding.api import ApiError, OpenAIEmbedder, VoyageEmbedder  # noqa: E402
from rag_experiments.embedding.cost import CostGate, EstimateOnly, estimate  # noqa: E402
from rag_experiments.embedding.options import EmbeddingOptions  # noqa: E402
from rag_experiments.errors import ConfigError, UserError  # noqa: E402
from rag_experiments.chunk_index import HnswParams, embed_with_cache, hnsw_index_name, ingest, strategy_info  # noqa: E402

from .provider_stub import fake_vector, malformed, status, wrong_dim  # noqa: E402

PROVIDERS = {"voyage": VoyageEmbedder, "openai": OpenAIEmbedder}


def make(provider, stub, **kw):
    kw.setdefault("model", "stub-a")
    return PROVIDERS[provider](EmbeddingOptions(base_url=stub.url(provider), max_retries=2, **kw))


@pytest.fixture
def fresh(fresh_db_url):
    c = connect(fresh_db_url)
    yield c
    c.close()


@pytest.mark.parametrize("provider", ["voyage", "openai"])
def test_well_formed_answers_become_unit_vectors_and_usage(api_stub, api_keys, provider):
    e = make(provider, api_stub)
    vecs = e.embed(["Create an index concurrently", "work_mem limits a sort"], input_type="document")
    assert vecs.shape == (2, 48) and e.dim == 48
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0)
    assert np.allclose(vecs[0], fake_vector("stub-a", "Create an index concurrently", 48), atol=1e-6)
    assert e.usage.tokens == 8 and e.usage.requests == 1  # what the stub billed (words)
    body = api_stub.requests(f"{provider}/embeddings")[0]["body"]
    assert body["model"] == "stub-a"
    if provider == "voyage":
        e.embed(["q"], input_type="query")
        assert body["input_type"] == "document" and api_stub.requests()[-1]["body"]["input_type"] == "query"


def test_output_dimension_and_dimensions_are_sent(api_stub, api_keys):
    assert make("voyage", api_stub, dimensions=24).embed(["a b"]).shape == (1, 24)
    assert api_stub.requests()[-1]["body"]["output_dimension"] == 24
    assert make("openai", api_stub, dimensions=16).embed(["a b"]).shape == (1, 16)
    assert api_stub.requests()[-1]["body"]["dimensions"] == 16
    make("openai", api_stub, model="stub-b").embed(["a"])
    assert "dimensions" not in api_stub.requests()[-1]["body"]  # unset: not sent (compatible servers reject it)


@pytest.mark.parametrize("provider", ["voyage", "openai"])
def test_429_then_success_is_retried_by_the_sdk(api_stub, api_keys, provider):
    e = make(provider, api_stub)
    api_stub.queue(status(429))
    assert e.embed(["autovacuum"]).shape == (1, 48)
    assert len(api_stub.requests()) == 2 and e.usage.requests == 1


@pytest.mark.parametrize("provider", ["voyage", "openai"])
def test_malformed_json_is_one_clear_error(api_stub, api_keys, provider):
    e = make(provider, api_stub)
    api_stub.queue(malformed())
    with pytest.raises(ApiError) as err:
        e.embed(["autovacuum"])
    text = str(err.value)
    assert f"{provider} API" in text and "stub-a" in text and "Traceback" not in text
    assert api_keys["VOYAGE_API_KEY"] not in text and api_keys["OPENAI_API_KEY"] not in text


@pytest.mark.parametrize("provider", ["voyage", "openai"])
def test_a_dimension_other_than_the_configured_one_is_a_clear_error(api_stub, api_keys, provider):
    e = make(provider, api_stub, dimensions=32)
    api_stub.queue(wrong_dim(20))
    with pytest.raises(ConfigError) as err:
        e.embed(["autovacuum"])
    assert "embedding.dimensions: configured 32" in str(err.value) and "returned 20-dimensional" in str(err.value)


def test_requests_stay_within_the_providers_limits(api_stub, api_keys):
    e = make("openai", api_stub, max_batch_texts=3, max_batch_tokens=10)
    texts = [f"text number {i} here" for i in range(8)]  # 4-5 WordPiece tokens each
    plans = e.plan_requests(texts)
    assert all(len(p) <= 3 and sum(e.count_tokens(texts[i]) for i in p) <= 10 for p in plans)
    assert sorted(i for p in plans for i in p) == list(range(8))
    e.embed(texts)
    assert len(api_stub.requests()) == len(plans)


def test_cache_is_keyed_by_input_type_and_dimensions(fresh, api_stub, api_keys):
    e = make("voyage", api_stub)
    embed_with_cache(fresh, e, ["what is fillfactor"], input_type="document")
    embed_with_cache(fresh, e, ["what is fillfactor"], input_type="query")  # another space: paid
    embed_with_cache(fresh, e, ["what is fillfactor"], input_type="query")  # cached
    embed_with_cache(fresh, make("voyage", api_stub, dimensions=24), ["what is fillfactor"])  # another space
    assert len(api_stub.requests()) == 3
    spaces = fresh.execute("SELECT input_type, dimensions FROM embedding_spaces ORDER BY 1, 2").fetchall()
    assert spaces == [("document", 24), ("document", None), ("query", None)]
    keys = [r[0] for r in fresh.execute("SELECT model FROM embedding_cache")]
    assert all(len(k) == 64 for k in keys) and len(set(keys)) == 3


def test_cost_gate_estimates_asks_and_stops_before_paying(fresh, api_stub, api_keys, mini_docs, capsys):
    e = make("voyage", api_stub, model="voyage-3.5", dimensions=32)
    texts = [d.text for d in mini_docs]
    est = estimate(e, texts)
    assert est.tokens == sum(e.count_tokens(t) for t in texts) and est.usd == pytest.approx(est.tokens * 0.06 / 1e6)
    with pytest.raises(UserError, match="cancelled"):
        ingest(fresh, mini_docs, ChunkingParams("heading", 60), e, before_paying=CostGate(e, ask=lambda _: "n"))
    with pytest.raises(EstimateOnly):
        ingest(fresh, mini_docs, ChunkingParams("heading", 60), e, before_paying=CostGate(e, dry_run=True))
    with pytest.raises(UserError, match="no terminal"):  # pytest's stdin is not a terminal
        ingest(fresh, mini_docs, ChunkingParams("heading", 60), e, before_paying=CostGate(e))
    assert api_stub.requests() == []  # nothing paid
    assert "through voyage:voyage-3.5@32: ~" in capsys.readouterr().err
    gate = CostGate(e, ask=lambda _: "yes")
    report = ingest(fresh, mini_docs, ChunkingParams("heading", 60), e, before_paying=gate)
    assert report.texts_embedded == report.n_chunks and gate.metrics()["embedding.estimated_tokens"] > 0


def test_an_ingest_in_groups_asks_once_for_all_of_them_and_sends_what_it_priced(fresh, api_stub, api_keys,
                                                                                 mini_docs, monkeypatch):
    """Chunked in groups of documents, an ingest still asks once, before the first request, for the
    price of every group; the estimate's texts and requests are the ones then sent."""
    from rag_experiments import chunk_index
    from rag_experiments.chunking import chunk_corpus

    monkeypatch.setattr(chunk_index, "INGEST_GROUP_CHARS", 1)  # each document its own group
    e = make("voyage", api_stub, model="voyage-3.5", dimensions=32)
    asked = []
    gate = CostGate(e, ask=lambda _: asked.append(len(api_stub.requests())) or "yes")
    report = ingest(fresh, mini_docs, ChunkingParams("heading", 60), e, before_paying=gate)
    assert asked == [0]  # one question, before any request
    [est] = gate.estimates
    texts = {c.indexed_text for c in chunk_corpus(mini_docs, ChunkingParams("heading", 60), e)}
    assert est.texts == len(texts) == report.texts_embedded == len(api_stub.texts_sent())
    assert est.tokens == estimate(e, sorted(texts)).tokens
    assert est.requests == len(api_stub.requests("voyage/embeddings"))
    assert report.n_chunks == len(fresh.execute("SELECT 1 FROM chunks").fetchall())


def test_strategies_of_every_dimension_coexist_with_their_own_index(fresh, api_stub, api_keys, mini_docs, embedder):
    """384 (MiniLM), 512, 1024, 1536 and 3072 dimensions in one database: vector(d) indexes up to
    2,000 dimensions, halfvec(d) above; each strategy's index serves its own KNN queries."""
    from rag_experiments.retrieval.legs import vector_search

    docs = mini_docs[:2]
    strategies = {384: strategy_info(fresh, ingest(fresh, docs, ChunkingParams("heading", 60), embedder).strategy_id)}
    for dim in (512, 1024, 1536, 3072):
        e = make("openai", api_stub, dimensions=dim)
        strategies[dim] = strategy_info(fresh, ingest(fresh, docs, ChunkingParams("heading", 60), e).strategy_id)
    for dim, s in strategies.items():
        assert s.dim == dim
        (indexdef,) = fresh.execute("SELECT indexdef FROM pg_indexes WHERE indexdef LIKE %s",
                                    (f"%{s.strategy_id}%",)).fetchone()
        kind = "halfvec" if dim > 2000 else "vector"
        assert f"{kind}({dim})" in indexdef and f"{kind}_cosine_ops" in indexdef
        qvec = np.ones(dim, dtype=np.float32) / np.sqrt(dim)
        hits = vector_search(fresh, s.strategy_id, qvec, 5, dim)
        assert len(hits) == 5
        own_index = hnsw_index_name(s.strategy_id, HnswParams())
        assert own_index in _plan(fresh, dim, qvec, s.strategy_id)  # its own index serves its queries


def _plan(conn, dim, qvec, sid) -> str:
    """EXPLAIN of the vector leg with every other way to order the rows priced out (the mini
    table is so small that the planner would otherwise sort it)."""
    from psycopg import sql

    from rag_experiments.retrieval.filters import Filters
    from rag_experiments.retrieval.legs import vector_sql

    stmt, bind = vector_sql(dim, Filters())
    with conn.transaction():
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            conn.execute(f"SET LOCAL {setting} = off")
        rows = conn.execute(sql.SQL("EXPLAIN ") + stmt, {**bind, "qvec": qvec, "sid": sid, "depth": 5}).fetchall()
    return "\n".join(r[0][:120] for r in rows)


def test_dimensions_beyond_the_halfvec_limit_are_rejected_before_work():
    with pytest.raises(ConfigError, match="embedding.dimensions"):
        EmbeddingOptions(dimensions=4096)
