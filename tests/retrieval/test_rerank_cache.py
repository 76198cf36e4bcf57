"""A ``rerank.cutoff`` sweep costs the new candidates only (issue 58): scores are cached by
(model, query, passage text), so raising the cutoff from 5 to 8 scores 3 pairs a query, and the
5 scored before keep their scores. The offline reranker says what it was measured to be worth
when it loads."""

from __future__ import annotations

from rag_experiments.retrieval import rerank
from rag_experiments.retrieval.rerank import RerankParams
from rag_experiments.retrieval.retriever import Retriever, RetrievalParams

QUERIES = ("which setting bounds the memory a sort may use (cutoff sweep test)",
           "how are search results ranked by relevance (cutoff sweep test)")


def test_a_raised_cutoff_scores_only_the_new_candidates(conn, mini_strategy, embedder, capsys, monkeypatch):
    monkeypatch.setattr(rerank, "_NOTED", set())  # the note is said once per process: this one's
    first = Retriever(conn, mini_strategy, embedder, RetrievalParams(variant="hybrid_rerank", rerank=RerankParams(cutoff=5)))
    for q in QUERIES:
        first.search(q, 5)
    assert first.stats.rerank_scored == 5 * len(QUERIES)
    assert "rerank=maxsim" in capsys.readouterr().err and "not better than its input" in rerank.MAXSIM_NOTE

    raised = Retriever(conn, mini_strategy, embedder, RetrievalParams(variant="hybrid_rerank",
                                                                      rerank=RerankParams(cutoff=8)))
    after = {q: raised.search(q, 8) for q in QUERIES}
    assert raised.stats.rerank_scored == 3 * len(QUERIES)  # the 3 new candidates of each query, no more
    again = Retriever(conn, mini_strategy, embedder, RetrievalParams(variant="hybrid_rerank",
                                                                     rerank=RerankParams(cutoff=8)))
    assert [again.search(q, 8).hits for q in QUERIES] == [r.hits for r in after.values()]
    assert again.stats.rerank_scored == 0
    assert "rerank=maxsim" not in capsys.readouterr().err  # once per process
