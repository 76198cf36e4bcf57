"""Near-miss labelling of an external retriever's hits (`rag-exp golden label` with
retrieval=external): the judge reads the placed passage's text, the judgement's span is where the
passage was placed, and a passage that could not be placed is never sent. The real anthropic
SDK against the local stub on 127.0.0.1."""

from __future__ import annotations

import pytest

from rag_experiments.cli import main as cli
from rag_experiments.golden.golden_file import GoldenFile

from ..golden.anthropic_stub import stub, text  # noqa: F401 - the fixture
from .test_external import MINI, TARGETS, golden_env  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


def test_external_hits_are_judged_on_their_placed_text(golden_env, stub, monkeypatch):
    from rag_experiments.corpus.loader import load_corpus

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
    stub.responder = lambda body: text('{"verdict": "NO", "reason": "another topic"}')
    sets = [f"corpus.path={MINI}", "corpus.name=mini", "retrieval=external",
            f"retrieval.external.target={TARGETS}:near_miss"]
    assert cli(["golden", "label", "--golden", str(golden_env), "-k", "3", "--yes",
                *[a for s in sets for a in ("--set", s)]]) == 0
    prompts = stub.prompts()
    assert len(prompts) == 10  # one near-miss a case: the evidence is credited, the unplaced one skipped
    assert not any("not in the corpus" in p for p in prompts)
    doc = next(d for d in load_corpus(MINI, "mini") if "createindex" in d.doc_id)
    judged = [r for r in GoldenFile(golden_env).read() if r["type"] == "judgement"]
    assert len(judged) == 10 and all(j["judge"]["kind"] == "llm" for j in judged)
    span = judged[0]["span"]
    assert span["doc_id"] == doc.doc_id and doc.text[span["start"]:span["end"]] in prompts[0]
