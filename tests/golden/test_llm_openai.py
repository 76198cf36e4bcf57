"""Provider ``openai``: the real ``openai`` SDK against a local OpenAI-compatible stub (the wire
format of vLLM / Ollama / a gateway), for llm.complete, golden generate and label (CLI, resume,
cost, errors), the llm reranker through Hydra composition, and the config checks."""

from __future__ import annotations

import json
import sys
import time
import types

import openai
import pytest

from rag_experiments import cli, llm
from rag_experiments.errors import ConfigError
from rag_experiments.golden import GoldenFile
from rag_experiments.golden import generate as gen
from rag_experiments.golden import label as lab

from .openai_stub import TEST_KEY, client_for, ostub, status, system_of, text  # noqa: F401  (ostub: fixture)
from .test_generate import FakeSession, corpus, good_answer, passage_of
from .test_label import golden, hit  # noqa: F401  (golden: fixture)


# -- llm.complete through the openai SDK ----------------------------------------------------------
def test_complete_sends_a_chat_completion_and_reads_its_usage(ostub):
    client = client_for(ostub, max_retries=0)
    assert llm.provider_of(client) == "openai"
    ostub.queue(text("hello", prompt_tokens=11, completion_tokens=2))
    answer, usage = llm.complete(client, "say hello", model="Qwen/Qwen2.5-7B-Instruct", system="be brief",
                                 max_tokens=50)
    assert (answer, usage) == ("hello", llm.Usage(11, 2, 1))
    (req,) = ostub.requests()
    assert req["body"] == {"model": "Qwen/Qwen2.5-7B-Instruct", "max_tokens": 50,
                           "messages": [{"role": "system", "content": "be brief"},
                                        {"role": "user", "content": "say hello"}]}
    assert req["authorization"] == f"Bearer {TEST_KEY}"


def test_a_server_without_usage_is_estimated_not_free(ostub):
    ostub.queue(text("x" * 35, usage=False))
    _, usage = llm.complete(client_for(ostub), "y" * 70, model="m")
    assert usage == llm.Usage(llm.estimate_tokens("\n" + "y" * 70), 10, 1)


def test_key_rule_placeholder_for_a_self_hosted_server(ostub, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        llm.make_client(provider="openai")  # OpenAI itself: a key is required
    client = llm.make_client(provider="openai", base_url=ostub.base_url)  # your server: a placeholder
    llm.complete(client, "p", model="m")
    assert ostub.requests()[-1]["authorization"] == "Bearer EMPTY"
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", ostub.base_url)
    llm.complete(llm.make_client(provider="openai"), "p", model="m")
    assert ostub.requests()[-1]["authorization"] == f"Bearer {TEST_KEY}"


def test_sdk_retries_429_and_5xx_honouring_retry_after(ostub):
    ostub.queue(status(429), status(503), text("[]"))
    t0 = time.monotonic()
    assert llm.complete(client_for(ostub, max_retries=3), "p", model="m")[0] == "[]"
    assert len(ostub.requests()) == 3 and time.monotonic() - t0 < 3  # retry-after: 0.01 s honoured
    ostub.queue(status(500), status(500), status(500))
    with pytest.raises(openai.InternalServerError) as exc:
        llm.complete(client_for(ostub, max_retries=2), "p", model="m")
    assert llm.is_api_error(exc.value) and llm.fatal_api_error(exc.value) is None
    assert "HTTP 500" in llm.describe_api_error(exc.value)


@pytest.mark.parametrize("code, words", [(401, "refused the credentials"), (403, "refused the credentials"),
                                         (404, "not found")])
def test_fatal_errors_are_recognised(ostub, code, words):
    ostub.queue(status(code))
    with pytest.raises(openai.APIStatusError) as exc:
        llm.complete(client_for(ostub, max_retries=0), "p", model="m")
    fatal = llm.fatal_api_error(exc.value)
    assert isinstance(fatal, llm.LLMFatalError) and words in str(fatal)
    assert ostub.root_url in str(fatal) and TEST_KEY not in str(fatal)


def test_unreachable_server_is_fatal():
    client = llm.make_client(api_key=TEST_KEY, base_url="http://127.0.0.1:9/v1", provider="openai", max_retries=0)
    with pytest.raises(openai.APIConnectionError) as exc:
        llm.complete(client, "p", model="m")
    assert "unreachable at http://127.0.0.1:9" in str(llm.fatal_api_error(exc.value))


# -- prices and config ------------------------------------------------------------------------------
def test_no_built_in_price_for_provider_openai_and_zero_is_explicit():
    assert llm.price_for("claude-sonnet-4-5", "openai") is None  # a gateway's name is not Anthropic's bill
    est = llm.estimate_cost("m", ["x" * 35], output_tokens_per_request=10, provider="openai")
    assert est.usd is None and "unknown cost" in est.describe() and "(openai provider)" in est.describe()
    est = llm.estimate_cost("m", ["x" * 35], output_tokens_per_request=10, provider="openai", price=llm.Price(0, 0))
    assert est.usd == 0 and "~$0.00" in est.describe()
    assert llm.parse_price("0,0") == llm.Price(0.0, 0.0)
    for bad in ("1", "a,b", "-1,2", "1,2,3"):
        with pytest.raises(ConfigError, match="--price"):
            llm.parse_price(bad)


@pytest.mark.parametrize("overrides, message", [
    (["llm.provider=vllm"], "llm.provider: unknown provider 'vllm'; use one of anthropic, openai"),
    (["llm.base_url=localhost:8000/v1"], "llm.base_url: 'localhost:8000/v1' is not an http(s) URL"),
    (["llm.base_url=ftp://host/v1"], "llm.base_url: 'ftp://host/v1' is not an http(s) URL"),
    (["llm.price=[1]"], "llm.price: expected IN,OUT"),
    (["llm.provider=openai", "rerank=llm"], "rerank.model: rerank=llm with llm.provider=openai needs a model name"),
    (["llm.provider=openai", "query.rewrite=multi_query"], "query.model: query.rewrite with llm.provider=openai"),
])
def test_bad_llm_settings_are_refused_by_name(overrides, message):
    import re

    from rag_experiments.config import settings_from_cfg

    from ..test_config import _compose

    with pytest.raises(ConfigError, match=re.escape(message)):
        settings_from_cfg(_compose(overrides))


def test_unknown_provider_on_the_command_line_is_refused(capsys):
    with pytest.raises(SystemExit):
        cli.main(["golden", "generate", "--provider", "vllm", "--yes"])
    assert "invalid choice: 'vllm'" in capsys.readouterr().err


def test_the_llm_node_reaches_the_reranker_through_hydra(ostub, monkeypatch):
    from rag_experiments.config import settings_from_cfg
    from rag_experiments.retrieval.rerank import LLMReranker, cached_scores, load_reranker

    from ..test_config import _compose

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings = settings_from_cfg(_compose(["retrieval=hybrid_rerank", "rerank=llm", "rerank.model=llama3.1:8b",
                                           "llm.provider=openai", f"llm.base_url={ostub.base_url}",
                                           "llm.price=[0,0]"]))
    assert settings.llm == llm.LLMParams("openai", ostub.base_url, (0.0, 0.0))
    params = settings.retriever_params.rerank
    assert params.llm == settings.llm and settings.query.llm == settings.llm
    reranker = load_reranker(params)
    assert isinstance(reranker, LLMReranker) and reranker.model_id == "llm:openai:llama3.1:8b:rerank-v1"
    ostub.queue(status(429), text([2, 9, 5], prompt_tokens=100, completion_tokens=7))
    assert cached_scores(None, reranker, "q", ["a", "b", "c"]) == [2.0, 9.0, 5.0]
    assert len(ostub.requests()) == 2 and ostub.requests()[-1]["body"]["model"] == "llama3.1:8b"
    assert reranker.usage() == {"rerank.requests": 1.0, "rerank.input_tokens": 100.0, "rerank.output_tokens": 7.0,
                                "rerank.malformed": 0.0, "rerank.cost_usd": 0.0}
    ostub.queue(status(401))
    with pytest.raises(llm.LLMFatalError, match="refused the credentials"):
        reranker.score("q2", ["a"])


# -- golden generate / label through the CLI ----------------------------------------------------------
def _fake_session(monkeypatch, session) -> None:
    """The command's database session replaced (as test_generate does); Hydra composition kept."""
    from rag_experiments.session import compose_settings

    monkeypatch.setitem(sys.modules, "rag_experiments.session", types.SimpleNamespace(
        open_retriever=lambda overrides=None: session, compose_settings=compose_settings))


def _openai_args(ostub, *extra: str) -> list[str]:
    return ["--provider", "openai", "--base-url", ostub.base_url, "--model", "llama3.1:8b", *extra]


def test_cli_generate_resumes_after_an_interruption_without_paying_twice(ostub, tmp_path, monkeypatch, capsys):
    chunks = corpus(3)  # 9 chunks
    golden_path = tmp_path / "experiments" / "golden" / "g.jsonl"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # a slow server: the interruption comes while most chunks are still unanswered
    ostub.responder = lambda body: text(good_answer(passage_of(body)), delay=0.15)
    seen = []

    def crash_after_3(entry):
        seen.append(entry["key"])
        if len(seen) == 3:
            raise KeyboardInterrupt

    # first run: interrupted after 3 outcomes (the library call the command makes)
    plan = gen.plan_generation(chunks, golden_path, model="llama3.1:8b", provider="openai", price=llm.Price(0, 0))
    with pytest.raises(KeyboardInterrupt):
        gen.run_generation(plan, client_for(ostub), concurrency=1, on_progress=crash_after_3)
    first = len(ostub.requests())
    done = {json.loads(x)["key"] for x in plan.checkpoint_path.read_text().splitlines()}
    assert first == len(done) and 3 <= first < 9

    # no price: nothing is sent, one clear line
    _fake_session(monkeypatch, FakeSession(chunks))
    rc = cli.main(["golden", "generate", "--golden", str(golden_path), "--yes", *_openai_args(ostub)])
    err = capsys.readouterr().err
    assert rc == 2 and "no price for model 'llama3.1:8b' (provider openai)" in err and "--price 0,0" in err
    assert len(ostub.requests()) == first
    # --batch is Anthropic's
    rc = cli.main(["golden", "generate", "--golden", str(golden_path), "--yes", "--batch",
                   *_openai_args(ostub, "--price", "0,0")])
    err = capsys.readouterr().err
    assert rc == 2 and "--batch: the Message Batches API is Anthropic's" in err and "Traceback" not in err

    # the rerun through the command: only the chunks without an outcome are asked
    ostub.responder = lambda body: text(good_answer(passage_of(body)))
    rc = cli.main(["golden", "generate", "--golden", str(golden_path), "--yes",
                   *_openai_args(ostub, "--price", "0,0")])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert f"LLM: provider openai at {ostub.base_url}, model llama3.1:8b" in out.out
    assert f"to send: {9 - first}" in out.out
    assert "Estimate: " in out.out and "(openai provider)" in out.out and "~$0.00" in out.out
    assert "cost $0.0000" in out.out
    assert len(ostub.requests()) == 9  # each chunk paid for once
    resumed = {passage_of(r["body"]) for r in ostub.requests()[first:]}
    assert not resumed & {c["text"] for c in chunks if c["chunk_id"] in done}
    records = GoldenFile(golden_path).read()
    assert len(records) == 18  # 2 per chunk, the interrupted run's reconciled from the checkpoint
    assert {(r["provenance"]["provider"], r["provenance"]["model"]) for r in records} == {("openai", "llama3.1:8b")}
    assert all(r["provider"] == "openai" for r in map(json.loads, plan.checkpoint_path.read_text().splitlines()))
    # a third run sends nothing
    assert cli.main(["golden", "generate", "--golden", str(golden_path), "--yes",
                     *_openai_args(ostub, "--price", "0,0")]) == 0
    assert "to send: 0" in capsys.readouterr().out and len(ostub.requests()) == 9


def test_cli_generate_401_is_one_clear_line(ostub, tmp_path, monkeypatch, capsys):
    _fake_session(monkeypatch, FakeSession(corpus(1)))
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    ostub.responder = lambda body: status(401)
    rc = cli.main(["golden", "generate", "--golden", str(tmp_path / "g.jsonl"), "--yes", "--max-retries", "0",
                   *_openai_args(ostub, "--price", "0,0")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and TEST_KEY not in err
    lines = err.strip().splitlines()
    assert lines[0] == (f"error: OpenAI-compatible API at {ostub.root_url} refused the credentials "
                        "(AuthenticationError, HTTP 401)")
    assert lines[1:] == ["  hint: check OPENAI_API_KEY (the key your server or gateway expects)"]


def test_cli_needs_a_model_name_for_provider_openai(ostub, tmp_path, capsys):
    rc = cli.main(["golden", "generate", "--golden", str(tmp_path / "g.jsonl"), "--yes", "--provider", "openai",
                   "--base-url", ostub.base_url])
    assert rc == 2 and "--model: provider openai has no default model" in capsys.readouterr().err
    rc = cli.main(["golden", "generate", "--golden", str(tmp_path / "g.jsonl"), "--provider", "openai",
                   "--base-url", "localhost:8000", "--model", "m"])
    assert rc == 2 and "--base-url: 'localhost:8000' is not an http(s) URL" in capsys.readouterr().err
    assert not ostub.requests()


def test_cli_label_with_provider_openai_from_the_config_node(ostub, golden, monkeypatch, capsys):
    path, c1, c2 = golden

    class Session:
        def search(self, query, k):
            return [hit(300, 400), hit(1200, 1300)][:k]

        def close(self):
            pass

    _fake_session(monkeypatch, Session())
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ostub.responder = lambda body: text('{"verdict": "NO", "reason": "other topic"}')
    # provider, base URL and price from the llm node (--set, as a project's config would)
    sets = ["--set", "llm.provider=openai", "--set", f"llm.base_url={ostub.base_url}", "--set", "llm.price=[0,0]"]
    assert cli.main(["golden", "label", "--golden", str(path), "-k", "2", "--dry-run", "--model", "qwen", *sets]) == 0
    out = capsys.readouterr().out
    assert "Estimate: 4 requests to qwen (openai provider)" in out and "~$0.00" in out and not ostub.requests()
    assert cli.main(["golden", "label", "--golden", str(path), "-k", "2", "--yes", "--model", "qwen", *sets]) == 0
    out = capsys.readouterr().out
    assert "judgements appended: 4" in out and len(ostub.requests()) == 4
    assert all(system_of(r["body"]) == lab.SYSTEM_PROMPT for r in ostub.requests())
    judgements = [r for r in GoldenFile(path).read() if r["type"] == "judgement" and r["judge"]["kind"] == "llm"]
    assert [j["judge"] for j in judgements] == [{"kind": "llm", "provider": "openai", "model": "qwen",
                                                 "prompt_version": lab.PROMPT_VERSION}] * 4
    # resume: nothing left, nothing sent
    assert cli.main(["golden", "label", "--golden", str(path), "-k", "2", "--yes", "--model", "qwen", *sets]) == 0
    assert "to send: 0" in capsys.readouterr().out and len(ostub.requests()) == 4
    # judge validation sees the new judge like any other (unvalidated until a human spot-check)
    assert cli.main(["golden", "stats", "--golden", str(path)]) == 0
    out = capsys.readouterr().out
    assert "qwen" in out and "not validated" in out


def test_open_anthropic_batch_is_not_collected_by_another_provider(ostub, tmp_path):
    chunks = corpus(1)
    golden_path = tmp_path / "g.jsonl"
    cp = gen.checkpoint_path(golden_path, "generate")
    cp.write_text(json.dumps({"event": "batch_submitted", "batch_id": "msgbatch_x", "model": "m",
                              "prompt_version": gen.PROMPT_VERSION, "items": {}}) + "\n")
    plan = gen.plan_generation(chunks, golden_path, model="m", provider="openai", price=llm.Price(0, 0))
    with pytest.raises(Exception, match="msgbatch_x.*submitted to Anthropic"):
        gen.run_generation(plan, client_for(ostub))
    assert not ostub.requests()


def test_an_unpriced_anthropic_model_is_refused_too(tmp_path, monkeypatch, capsys):
    """No price, no requests, whichever provider: a model missing from the table needs --price."""
    from .anthropic_stub import AnthropicStub

    _fake_session(monkeypatch, FakeSession(corpus(1)))
    with AnthropicStub() as anth:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anth.base_url)
        args = ["golden", "generate", "--golden", str(tmp_path / "g.jsonl"), "--model", "claude-future-9"]
        assert cli.main([*args, "--dry-run"]) == 0
        out = capsys.readouterr().out
        assert "unknown cost (no price for this model)" in out and "a real run needs --price" in out
        assert cli.main([*args, "--yes"]) == 2
        assert "no price for model 'claude-future-9' (provider anthropic)" in capsys.readouterr().err
        assert not anth.requests()
        assert cli.main([*args, "--yes", "--price", "3,15"]) == 0
        assert len(anth.requests()) == 3
