"""Which config knobs a run logs: only those of the parts it used."""

from __future__ import annotations

from rag_experiments.tracking.mlflow_run import _without_unused_llm

LLM = {"provider": "openai", "base_url": "http://127.0.0.1:8000/v1", "price": [0, 0]}


def test_llm_node_is_logged_only_by_runs_that_call_an_llm():
    base = {"retrieval": {"variant": "hybrid"}, "rerank": {"name": "maxsim"}, "query": {"rewrite": "none"},
            "llm": LLM}
    assert "llm" not in _without_unused_llm(base)
    assert _without_unused_llm({**base, "rerank": {"name": "llm", "model": "m"}})["llm"] == LLM
    assert _without_unused_llm({**base, "query": {"rewrite": "hyde"}})["llm"] == LLM
    assert _without_unused_llm({"retrieval": {}}) == {"retrieval": {}}  # no node: unchanged
