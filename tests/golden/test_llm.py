"""rag_experiments.llm against the stub: the real anthropic SDK, retries, batches, JSON, prices."""

from __future__ import annotations

import math
import time

import anthropic
import pytest

from rag_experiments import llm
from rag_experiments.errors import ConfigError

from .anthropic_stub import TEST_KEY, client_for, status, stub, text  # noqa: F401  (stub is a fixture)

# the SDK warns that the default model is deprecated; the stub does not care
pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


# -- JSON extraction ------------------------------------------------------------------------------
@pytest.mark.parametrize("answer, expected", [
    ('[{"a": 1}]', [{"a": 1}]),
    ('  {"verdict": "YES"}\n', {"verdict": "YES"}),
    ('```json\n[1, 2]\n```', [1, 2]),
    ('```\n{"x": null}\n```', {"x": None}),
    ('```json\n[]```', []),
])
def test_extract_json_accepts_plain_and_fenced(answer, expected):
    assert llm.extract_json(answer) == expected


@pytest.mark.parametrize("answer", [
    "", "Here you go: [1]", "[1]\nHope this helps", "```json\n[1]\n```\nmore", "```json\n[1,]\n```",
    "```json\n[1]", "[1] [2]", "{'a': 1}",
])
def test_extract_json_is_strict(answer):
    with pytest.raises(llm.JSONExtractionError):
        llm.extract_json(answer)


# -- prices and estimates -------------------------------------------------------------------------
def test_price_table_and_cost():
    assert llm.price_for(llm.DEFAULT_MODEL) == llm.Price(3.0, 15.0)
    assert llm.price_for("claude-sonnet-4-5-20250929") == llm.Price(3.0, 15.0)
    assert llm.price_for("claude-haiku-4-5-20251001") == llm.Price(1.0, 5.0)
    assert llm.price_for("no-such-model") is None
    assert llm.cost_usd("claude-sonnet-4-5", 1_000_000, 100_000) == pytest.approx(3.0 + 1.5)
    assert llm.cost_usd("claude-sonnet-4-5", 1_000_000, 100_000, batch=True) == pytest.approx(2.25)
    assert llm.cost_usd("mystery", 10, 10) is None
    assert llm.cost_usd("mystery", 1_000_000, 0, price=llm.Price(2.0, 4.0)) == pytest.approx(2.0)


def test_estimate_tokens_is_chars_over_3_5():
    assert llm.estimate_tokens("x" * 35) == 10
    assert llm.estimate_tokens("x" * 36) == math.ceil(36 / 3.5)
    est = llm.estimate_cost("claude-sonnet-4-5", ["x" * 350, "y" * 700], output_tokens_per_request=100)
    assert (est.requests, est.input_tokens, est.output_tokens) == (2, 300, 200)
    assert est.usd == pytest.approx((300 * 3 + 200 * 15) / 1e6)
    assert "2 requests" in est.describe()


# -- client ---------------------------------------------------------------------------------------
def test_missing_key_is_a_config_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        llm.make_client()


def test_client_from_environment_and_complete(stub, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
    client = llm.make_client(max_retries=0)
    stub.queue(text("hello", input_tokens=11, output_tokens=2))
    answer, usage = llm.complete(client, "say hello", system="be brief", max_tokens=50)
    assert answer == "hello"
    assert usage == llm.Usage(11, 2, 1)
    (req,) = stub.requests()
    assert req["has_api_key"]
    assert req["body"]["model"] == llm.DEFAULT_MODEL
    assert req["body"]["system"] == "be brief" and req["body"]["max_tokens"] == 50


def test_sdk_retries_429_and_529_then_succeeds(stub):
    client = client_for(stub, max_retries=3)
    stub.queue(status(429), status(529), text("[]"))
    t0 = time.monotonic()
    answer, _ = llm.complete(client, "p")
    assert answer == "[]"
    assert len(stub.requests()) == 3  # two refused + one answered: the SDK retried
    assert time.monotonic() - t0 < 3  # retry-after-ms: 10 was honoured


def test_retries_exhausted_raise(stub):
    client = client_for(stub, max_retries=2)
    stub.queue(status(529), status(529), status(529), text("never"))
    with pytest.raises(anthropic.APIStatusError) as exc:
        llm.complete(client, "p")
    assert exc.value.status_code == 529
    assert len(stub.requests()) == 3


def test_fatal_errors_are_recognised(stub):
    client = client_for(stub, max_retries=0)
    stub.queue(status(401))
    with pytest.raises(anthropic.AuthenticationError) as exc:
        llm.complete(client, "p")
    fatal = llm.fatal_api_error(exc.value)
    assert isinstance(fatal, llm.LLMFatalError)
    assert TEST_KEY not in str(fatal)


# -- batches --------------------------------------------------------------------------------------
def test_batch_create_poll_results(stub):
    client = client_for(stub)
    stub.responder = lambda body: (status(400) if "bad" in body["messages"][0]["content"] else text("ok"))
    stub.batch_polls = 2
    reqs = [llm.batch_request("r1", "good prompt"), llm.batch_request("r2", "bad prompt")]
    batch_id = llm.create_batch(client, reqs)
    statuses = []
    batch = llm.poll_batch(client, batch_id, interval=0.01, on_status=lambda b: statuses.append(b.processing_status))
    assert batch.processing_status == "ended"
    assert statuses == ["in_progress", "in_progress", "ended"]
    results = {r.custom_id: r for r in llm.batch_results(client, batch_id)}
    assert results["r1"].text == "ok" and results["r1"].error is None and results["r1"].usage.requests == 1
    assert results["r2"].text is None and "invalid_request_error" in results["r2"].error
    assert not stub.requests()  # nothing went through /v1/messages


def test_poll_timeout_raises_batch_pending(stub):
    client = client_for(stub)
    stub.batch_polls = 10_000
    batch_id = llm.create_batch(client, [llm.batch_request("r1", "p")])
    with pytest.raises(llm.BatchPending, match=batch_id):
        llm.poll_batch(client, batch_id, interval=0.01, timeout=0.05)


def test_batch_request_validates_custom_id():
    with pytest.raises(ValueError):
        llm.batch_request("has space", "p")
    with pytest.raises(ValueError):
        llm.batch_request("x" * 65, "p")
