"""The one retriever protocol: what evaluation, tracking, the CLI and serving ask of a retriever.

Every registered system (:mod:`rag_experiments.retrieval.systems`) builds one: the built-in
variants (:class:`rag_experiments.retrieval.retriever.Retriever`: vector, keyword, hybrid,
hybrid_rerank over this project's index), a second keyword engine
(:mod:`rag_experiments.retrieval.systems.bm25s`) and a team's own system
(:class:`rag_experiments.retrieval.external.ExternalRetriever`: a Python target, an HTTP service or
a stored run, its passages placed in the corpus text). :func:`rag_experiments.experiment.run_experiment`
drives any of them through the same code: search with progress and per-query failure accounting,
evaluation, the run record. Nothing downstream asks which one produced a ranked list: a hit is a
span of a corpus document, and relevance is span overlap with the golden set's evidence.

:class:`SearchSystem` is what evaluation needs: a name and ranked lists. What only some systems
offer is a *capability*, asked for by type with :func:`capability` (None when the system has
none): :class:`ChunkTexts` (the text of its hits: serving shows it), :class:`CacheCounts` (the
run's cache report), :class:`Usage` (paid API usage: a reranker, query rewriting),
:class:`AnnIndex` (the recall of an approximate index against exact search).
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence, TypeVar

from ..types import RankedList

T = TypeVar("T")


class SearchSystem(Protocol):
    variant: str  # what the run's `variant` tag and the progress bar say

    def search_many(self, queries: Sequence[str], limit: int = 20,
                    on_query: Callable[[int], object] | None = None) -> list[RankedList]:
        """One ranked list per query, hits best first (at most ``limit``); ``on_query(1)`` after each."""
        ...

    def search(self, query: str, limit: int = 20) -> RankedList:
        """``search_many([query], limit)[0]``."""
        ...


class ChunkTexts(Protocol):
    def chunk_texts(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        """The text of each hit (by chunk id) of this system's searches."""
        ...


class CacheCounts(Protocol):
    def cache_counts(self) -> dict[str, int]:
        """Counters for the run's cache report (lists computed and cached, answers asked...)."""
        ...


class Usage(Protocol):
    def usage(self) -> dict[str, float]:
        """Paid API usage of the searches so far (requests, tokens, cost); {} when none."""
        ...


class AnnIndex(Protocol):
    def ann_recall(self, queries: list[str]) -> float:
        """The share of exact nearest neighbours the ANN index returns."""
        ...


def capability(system: object, kind: type[T]) -> T | None:
    """``system``'s implementation of the capability ``kind`` (one of this module's protocols), or
    None: a system declares what it offers in ``capability(kind)``; one without that method offers
    nothing beyond :class:`SearchSystem`."""
    ask = getattr(system, "capability", None)
    return ask(kind) if callable(ask) else None
