"""The one retriever protocol: what evaluation, tracking, the CLI and serving ask of a retriever.

The built-in variants (:class:`rag_experiments.retrieval.retriever.Retriever`: vector, keyword,
hybrid, hybrid_rerank over this project's index) and a team's own system
(:class:`rag_experiments.retrieval.external.ExternalRetriever`: a Python target or an HTTP
service, its passages placed in the corpus text) both implement it, and
:func:`rag_experiments.experiment.run_experiment` drives either through the same code: search
with progress and per-query failure accounting, evaluation, the run record. Nothing downstream
asks which one produced a ranked list: a hit is a span of a corpus document, and relevance is
span overlap with the golden set's evidence.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

from ..types import RankedList


class SearchSystem(Protocol):
    variant: str  # what the run's `variant` tag and the progress bar say
    conn: Any  # the harness's database connection (None when the system needs none)
    reranker: Any  # a loaded reranker whose usage is logged, or None
    stats: Any  # counters for the run's cache report

    def search_many(self, queries: Sequence[str], limit: int = 20,
                    on_query: Callable[[int], object] | None = None) -> list[RankedList]:
        """One ranked list per query, hits best first (at most ``limit``); ``on_query(1)`` after each."""
        ...

    def search(self, query: str, limit: int = 20) -> RankedList:
        """``search_many([query], limit)[0]``."""
        ...

    def ann_recall(self, queries: list[str]) -> float:
        """The share of exact nearest neighbours the ANN index returns (NaN: no index of ours)."""
        ...
