"""The hit a served retriever returns: one shape for ``Retriever.search``, ``predict`` and HTTP.

A :class:`SearchHit` is :class:`rag_experiments.types.Hit` made self-contained for a caller who
has no access to the corpus: it carries the chunk's text and the heading breadcrumb, and each
leg's rank as its own field (``None`` when that leg did not return the chunk). ``predict``
returns the same fields as DataFrame columns, one row per hit, with the ``query`` in front.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

#: the stages that rank a chunk, in pipeline order (see ``types.Hit.leg_ranks``)
LEGS = ("vector", "keyword", "fused", "rerank")


@dataclass(frozen=True)
class SearchHit:
    rank: int
    chunk_id: str
    doc_id: str
    source_uri: str
    start: int
    end: int
    score: float
    text: str
    heading: str  # "Page > Section > Subsection" enclosing the chunk's start
    vector_rank: int | None = None
    keyword_rank: int | None = None
    fused_rank: int | None = None
    rerank_rank: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


HIT_COLUMNS = tuple(f.name for f in fields(SearchHit))
RANK_COLUMNS = tuple(f"{leg}_rank" for leg in LEGS)


def hits_frame(per_query: list[tuple[str, list[SearchHit]]]):
    """One row per hit, ``query`` first. Rank columns are object dtype so a missing leg is
    ``None`` (JSON ``null``) rather than NaN, which is not valid JSON."""
    import pandas as pd

    rows = [{"query": q, **h.to_dict()} for q, hits in per_query for h in hits]
    df = pd.DataFrame(rows, columns=["query", *HIT_COLUMNS])
    for col in RANK_COLUMNS:
        df[col] = df[col].astype(object).where(df[col].notna(), None)
    return df
