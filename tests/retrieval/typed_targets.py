"""Team systems that return the typed contract, ``rag_experiments.Passage`` (for test_passage_contract)."""

from __future__ import annotations

from rag_experiments import Passage

from . import external_targets


def typed_oracle(query: str, k: int, rank: int = 1, mode: str = "offsets") -> list[Passage]:
    """external_targets.oracle's answer, each passage as a Passage."""
    return [Passage(p.get("source_uri") or p["doc_id"], p.get("start"), p.get("end"), p.get("text"), p.get("score"), p.get("id"))
            for p in external_targets.oracle(query, k, rank, mode)]


def bare(query: str, k: int) -> list[Passage]:
    """A document named with neither offsets nor text: only a stored run may name whole documents."""
    return [Passage(external_targets._evidence(query)[0].source_uri)]


def nan_score(query: str, k: int) -> list[Passage]:
    return [Passage("x.html", 0, 5, score=float("nan"))]
