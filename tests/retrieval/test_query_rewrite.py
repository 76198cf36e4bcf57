"""LLM query rewriting (query.rewrite=multi_query|hyde): the real anthropic SDK against a local
stub, the real PostgreSQL cache and retriever, real Hydra composition."""

from __future__ import annotations

import json
import re

import pytest

from rag_experiments.config import settings_from_cfg
from rag_experiments.errors import ConfigError, UserError
from rag_experiments.retrieval.fusion import rrf_lists
from rag_experiments.retrieval.query_rewrite import expansions, parse
from rag_experiments.types import Hit

from ..golden.anthropic_stub import TEST_KEY, prompt_of, status, stub, text  # noqa: F401 - the fixture
from ..test_config import _compose
from ..test_pipeline import _mini_overrides

QUESTION = re.compile(r"question:\n\n(.*?)\n\n", re.S)


def _hit(cid: str) -> Hit:
    return Hit(chunk_id=cid, doc_id="d", source_uri="d", doc_type="t", start=0, end=1, score=0.0, rank=0,
               leg_ranks={})


def test_rrf_of_the_expansions_lists_hand_worked():
    # k=10: a = 1/11 + 1/12 = 0.174242..., b = 1/12 + 1/11 (same), c = 1/13; ties by chunk id
    fused = rrf_lists([[_hit("a"), _hit("b")], [_hit("b"), _hit("a"), _hit("c")]], k=10, depth=50)
    assert [h.chunk_id for h in fused] == ["a", "b", "c"]
    assert fused[0].score == pytest.approx(1 / 11 + 1 / 12, abs=1e-15)
    assert fused[2].score == pytest.approx(1 / 13, abs=1e-15)
    assert fused[0].leg_ranks == {"q0": 1, "q1": 2} and fused[2].leg_ranks == {"q1": 3}
    # depth cuts each list before fusing: c is beyond the second list's top 2
    assert [h.chunk_id for h in rrf_lists([[_hit("a")], [_hit("b"), _hit("a"), _hit("c")]], 10, 2)] == ["a", "b"]


def test_expansions_and_answers():
    assert expansions("multi_query", "q", ["r1", "q", "r2"]) == [("q", "q"), ("r1", "r1"), ("r2", "r2")]
    assert expansions("hyde", "q", ["p1", "p2"]) == [("p1", "q"), ("p2", "q")]  # keyword keeps the question
    assert parse('```json\n["a", " b "]\n```', 3, "q") == ["a", "b"]
    assert parse('["a", "b", "c", "d"]', 2, "q") == ["a", "b"]
    with pytest.raises(UserError, match="not JSON"):
        parse("Sure! Here are some queries: a, b", 2, "how do I vacuum")
    with pytest.raises(UserError, match="not a JSON list of strings"):
        parse('{"queries": ["a"]}', 2, "how do I vacuum")


@pytest.mark.parametrize("overrides, message", [
    (["query.rewrite=rewrite_all"], "query.rewrite: must be one of none, multi_query, hyde"),
    (["query.rewrite=multi_query", "query.n=0"], "query.n: must be within 1..10"),
    (["query.rewrite=hyde", "retrieval=keyword"], "retrieval=keyword has no vector leg"),
    (["query.rewrite=multi_query", "fusion.engine=sql"], "the SQL fusion twin searches the question only"),
])
def test_bad_rewrite_settings_are_refused_by_name(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        settings_from_cfg(_compose(overrides))


def _rewriting_stub(stub, mode: str):
    """Answers each rewrite request with n strings built from the question (deterministic)."""
    def responder(body):
        prompt = prompt_of(body)
        q = QUESTION.search(prompt).group(1)
        n = int(re.search(r"Write (\d+) different", prompt).group(1))
        words = "configuration parameter setting" if mode == "multi_query" else "The documentation explains that"
        return text(json.dumps([f"{words} {i}: {q}" for i in range(n)]), input_tokens=120, output_tokens=30)
    stub.responder = responder
    return stub


def _run(mini_golden, *extra):
    from rag_experiments.experiment import run_experiment

    return run_experiment(settings_from_cfg(_compose(_mini_overrides(mini_golden, *extra))))


@pytest.fixture
def api(monkeypatch, stub):
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
    return stub


def test_multi_query_searches_every_rewrite_and_a_second_run_pays_nothing(project, mini_golden, api):
    _rewriting_stub(api, "multi_query")
    first = _run(mini_golden, "query.rewrite=multi_query", "query.n=2", "query.confirm=false")
    n_queries = len({c.query for c in first.golden.scorable})
    prompts = api.prompts()
    assert len(prompts) == n_queries  # one request per distinct question
    assert all("Write 2 different search queries" in p for p in prompts)
    assert first.usage["rewrite.requests"] == n_queries and first.usage["rewrite.cached"] == 0
    assert first.usage["rewrite.input_tokens"] == 120 * n_queries
    assert first.usage["rewrite.output_tokens"] == 30 * n_queries
    assert first.usage["rewrite.cost_usd"] == pytest.approx((120 * 3.0 + 30 * 15.0) * n_queries / 1e6)
    # every question's list fuses three lists: the question's (q0) and its two rewrites' (q1, q2)
    ranks = {k for rl in first.results.values() for h in rl.hits for k in h.leg_ranks}
    assert {"q0", "q1", "q2"} <= ranks
    # the same config again (another sweep point, a re-run): the rewrites come from PostgreSQL
    second = _run(mini_golden, "query.rewrite=multi_query", "query.n=2", "query.confirm=false")
    assert len(api.prompts()) == n_queries
    assert second.usage["rewrite.requests"] == 0 and second.usage["rewrite.cached"] == n_queries
    assert {k: [h.chunk_id for h in v.hits] for k, v in second.results.items()} == \
           {k: [h.chunk_id for h in v.hits] for k, v in first.results.items()}
    # rewriting changes what is retrieved (else the knob would be a no-op)
    plain = _run(mini_golden)
    assert "rewrite.requests" not in plain.usage
    assert any([h.chunk_id for h in plain.results[k].hits] != [h.chunk_id for h in first.results[k].hits]
               for k in plain.results)


def test_hyde_embeds_the_passages_for_the_vector_leg_and_keeps_the_question_for_bm25(project, mini_golden, api):
    _rewriting_stub(api, "hyde")
    result = _run(mini_golden, "query.rewrite=hyde", "query.n=1", "query.confirm=false")
    assert all("short passages" in p for p in api.prompts())
    from rag_experiments.db.connect import connect, resolve_database_url

    with connect(resolve_database_url(None, None)) as conn:
        texts = {row[0] for row in conn.execute(
            "SELECT rewrites->>0 FROM query_rewrites WHERE mode = 'hyde'").fetchall()}
    assert texts and all(t.startswith("The documentation explains that 0: ") for t in texts)
    assert result.cache["query_embeddings_computed"] >= len(texts)  # the passages were embedded
    assert all(set(h.leg_ranks) >= {"q0"} and "q1" not in h.leg_ranks for rl in result.results.values()
               for h in rl.hits)


def test_paying_needs_a_confirmation_and_without_a_terminal_nothing_is_asked(project, mini_golden, api):
    _rewriting_stub(api, "multi_query")
    with pytest.raises(UserError, match="needs a confirmation and there is no terminal") as info:
        _run(mini_golden, "query.rewrite=multi_query")  # query.confirm defaults to true
    assert "query.confirm=false" in info.value.hint
    assert api.prompts() == []  # refused before the first request


def test_an_interrupted_rewrite_resumes_without_paying_twice(project, mini_golden, api):
    _rewriting_stub(api, "multi_query")
    answer = api.responder
    calls = {"n": 0}

    def failing_after_three(body):
        calls["n"] += 1
        return answer(body) if calls["n"] <= 3 else status(400)  # a non-retryable error on the 4th
    api.responder = failing_after_three
    with pytest.raises(UserError, match="query.rewrite: the request for .* failed: BadRequestError"):
        _run(mini_golden, "query.rewrite=multi_query", "query.confirm=false")
    api.responder = answer
    paid_before = len(api.prompts())
    result = _run(mini_golden, "query.rewrite=multi_query", "query.confirm=false")
    n_queries = len({c.query for c in result.golden.scorable})
    assert result.usage["rewrite.cached"] == 3  # the three answered before the failure
    assert len(api.prompts()) - paid_before == n_queries - 3


def test_rewrites_through_an_openai_compatible_server_with_a_zero_price(project, mini_golden, monkeypatch):
    """llm.provider=openai llm.base_url=...: the real openai SDK; llm.price=[0,0] (your own server)
    is an estimate of $0, so no confirmation is needed; the cache keys the model by provider."""
    from ..golden.openai_stub import OpenAIStub
    from ..golden.openai_stub import prompt_of as chat_prompt
    from ..golden.openai_stub import text as chat_text

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAIStub() as oai:
        def responder(body):
            q = QUESTION.search(chat_prompt(body)).group(1)
            return chat_text(json.dumps([f"configuration parameter setting {i}: {q}" for i in range(2)]),
                             prompt_tokens=120, completion_tokens=30)
        oai.responder = responder
        overrides = ("query.rewrite=multi_query", "query.n=2", "query.model=llama3.1:8b", "llm.provider=openai",
                     f"llm.base_url={oai.base_url}", "llm.price=[0,0]")
        first = _run(mini_golden, *overrides)
        n_queries = len({c.query for c in first.golden.scorable})
        assert len(oai.requests()) == n_queries and {r["body"]["model"] for r in oai.requests()} == {"llama3.1:8b"}
        assert first.usage["rewrite.requests"] == n_queries and first.usage["rewrite.cost_usd"] == 0
        assert first.usage["rewrite.input_tokens"] == 120 * n_queries
        second = _run(mini_golden, *overrides)
        assert second.usage["rewrite.cached"] == n_queries and len(oai.requests()) == n_queries
    from rag_experiments.db.connect import connect, resolve_database_url

    with connect(resolve_database_url(None, None)) as conn:
        models = {row[0] for row in conn.execute(
            "SELECT DISTINCT model FROM query_rewrites WHERE model LIKE %s", ("%llama3.1:8b",)).fetchall()}
    assert models == {"openai:llama3.1:8b"}
