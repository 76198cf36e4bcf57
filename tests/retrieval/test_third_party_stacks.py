"""Retrieval stacks written by others, each with its own chunker, measured through the span-
anchored golden set (examples/): LangChain (RecursiveCharacterTextSplitter + BM25Retriever over
rank_bm25) and LlamaIndex (SentenceSplitter + BM25Retriever over bm25s), on the mini corpus.

Independent check: every hit each stack returned is placed by its own offsets, the placed span's
text is the stack's chunk text, and recall@20 equals a count done here from the stack's raw
chunks (a case is found when one of its top 20 chunks covers half its evidence span or more)."""

from __future__ import annotations

import pytest

from rag_experiments.experiment import run_experiment
from rag_experiments.golden.resolve import load_golden

from .test_external import MINI, golden_env, settings  # noqa: F401 - the fixture


def _independent_recall_at_20(golden_path, search) -> float:
    found = 0
    cases = load_golden(golden_path).scorable
    for case in cases:
        span = case.relevant[0].span
        for p in search(case.query, 20):
            uri, start, end = p
            if uri == span.source_uri:
                covered = max(0, min(end, span.end) - max(start, span.start))
                if covered >= 0.5 * (span.end - span.start):
                    found += 1
                    break
    return found / len(cases)


@pytest.mark.parametrize("target, init", [
    ("examples.langchain_bm25:LangChainBM25", "chunk_size=400"),
    ("examples.llamaindex_bm25:LlamaIndexBM25", "chunk_size=128"),
])
def test_a_third_party_stack_is_measured_on_its_own_chunks(golden_env, target, init):
    pytest.importorskip("langchain_community" if "langchain" in target else "llama_index.retrievers.bm25")
    import importlib

    from rag_experiments.config import free_mapping_overrides, settings_from_cfg

    from ..test_config import _compose

    key, value = init.split("=")
    s = settings_from_cfg(_compose(free_mapping_overrides([
        f"corpus.path={MINI}", "corpus.name=mini", f"golden.path={golden_env}", "progress=false",
        "eval.bootstrap_samples=100", "retrieval=external", f"retrieval.external.target={target}",
        f"retrieval.external.init.corpus={MINI}", f"retrieval.external.init.{key}={value}"])))
    result = run_experiment(s)
    a = result.external
    n_hits = sum(len(r.hits) for r in result.results.values())
    assert a["alignment.offsets"] == n_hits > 0 and a["alignment.failed"] == 0 == a["alignment.unknown_document"]

    module, cls = target.split(":")
    system = getattr(importlib.import_module(module), cls)(corpus=str(MINI), **{key: int(value)})

    def raw(query, k):
        out = []
        for p in system.search(query, k):
            if hasattr(p, "page_content"):
                out.append((p.metadata["source"], p.metadata["start_index"],
                            p.metadata["start_index"] + len(p.page_content)))
            else:
                out.append((p.node.metadata["source_uri"], p.node.start_char_idx, p.node.end_char_idx))
        return out

    assert result.eval.metrics["recall_at_20"] == pytest.approx(_independent_recall_at_20(golden_env, raw))
    docs = {d.doc_id: d for d in __import__("rag_experiments.corpus.loader", fromlist=["x"]).load_corpus(MINI, "mini")}
    first = next(iter(result.results.values())).hits[0]
    chunk = system.search(next(iter(result.results.values())).query, 20)[0]
    text = chunk.page_content if hasattr(chunk, "page_content") else chunk.node.get_content()
    assert docs[first.doc_id].text[first.start:first.end] == text
