"""The hit a served retriever returns: one shape for ``Retriever.search``, ``predict`` and HTTP.

A :class:`SearchHit` is :class:`rag_experiments.types.Hit` made self-contained for a caller who
has no access to the corpus: it carries the chunk's text and the heading breadcrumb, and each
leg's rank as its own field (``None`` when that leg did not return the chunk). ``predict``
returns the same fields as DataFrame columns, one row per hit, with the ``query`` in front.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from ..types import Hit

#: the served model's artifacts and default k (see :mod:`.pyfunc_model`)
ARTIFACT_CONFIG = "config"  # the resolved config (YAML)
ARTIFACT_MANIFEST = "manifest"  # digests, run, package version (JSON)
DEFAULT_K = 10

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

    @classmethod
    def from_hit(cls, h: Hit, text: str, heading: str) -> "SearchHit":
        r = h.leg_ranks
        return cls(h.rank, h.chunk_id, h.doc_id, h.source_uri, h.start, h.end, float(h.score), text, heading,
                   *(r.get(leg) for leg in LEGS))

    def to_dict(self) -> dict:
        return asdict(self)


HIT_COLUMNS = tuple(f.name for f in fields(SearchHit))
RANK_COLUMNS = tuple(f"{leg}_rank" for leg in LEGS)


NUMERIC_COLUMNS = {"rank": "int64", "start": "int64", "end": "int64", "score": "float64"}


def hits_frame(per_query: list[tuple[str, list[SearchHit]]]):
    """One row per hit, ``query`` first. Rank columns are object arrays so a missing leg is
    ``None`` (JSON ``null``) rather than NaN, which is not valid JSON. Built column by column
    from arrays: building from row dicts and then masking NaNs cost ~8x more, about as much as
    the search itself (measured in ``rag-exp bench``'s serving section)."""
    import numpy as np
    import pandas as pd

    hits = [h for _, hs in per_query for h in hs]
    cols: dict = {"query": [q for q, hs in per_query for _ in hs]}
    for c in HIT_COLUMNS:
        values = [getattr(h, c) for h in hits]
        if c in RANK_COLUMNS:
            cols[c] = np.empty(len(values), dtype=object)
            cols[c][:] = values
        elif c in NUMERIC_COLUMNS:
            cols[c] = np.asarray(values, dtype=NUMERIC_COLUMNS[c])
        else:
            cols[c] = values
    return pd.DataFrame(cols, copy=False)


def signature():
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema
    from mlflow.types.schema import AnyType

    types = {"rank": "long", "start": "long", "end": "long", "score": "double"}
    outputs = [ColSpec("string", "query")] + [
        ColSpec("long" if c in RANK_COLUMNS else types.get(c, "string"), c, required=c not in RANK_COLUMNS)
        for c in HIT_COLUMNS]
    # one unnamed column: MLflow's schema enforcement then accepts a plain list of queries as well
    # as a DataFrame with a ``query`` column (a named column rejects the list). Of type Any, not
    # string: a string column made the server cast ``{"inputs": [1, 2]}`` to the queries "1" and
    # "2"; uncast, a query that is not a string reaches predict and is refused there (HTTP 400).
    # Params: ``k`` only. Ingesting is an operator's decision (rag-exp ingest, Retriever.from_config(
    # ingest=True)), never a request parameter: any HTTP client could otherwise start one.
    return ModelSignature(
        inputs=Schema([ColSpec(AnyType())]),
        outputs=Schema(outputs),
        params=ParamSchema([ParamSpec("k", "long", DEFAULT_K)]),
    )


def input_example():
    import pandas as pd

    return pd.DataFrame({"query": ["how much memory can a sort use"]}), {"k": DEFAULT_K}
