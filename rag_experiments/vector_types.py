"""Which pgvector type indexes a strategy's vectors: ``vector(d)`` up to 2,000 dimensions (the
HNSW limit for ``vector``), ``halfvec(d)`` above, up to 4,000 (its limit). Vectors are stored in
dimensionless ``vector`` columns, so strategies of any dimension share one table; each
strategy's partial HNSW index casts to its own type, and the vector leg casts the same way so
the planner can use that index.
"""

from __future__ import annotations

from .errors import ConfigError

VECTOR_INDEX_MAX_DIM = 2000
HALFVEC_INDEX_MAX_DIM = 4000


def index_type(dim: int) -> str:
    """``vector`` or ``halfvec`` for a strategy of ``dim`` dimensions."""
    if not 1 <= dim <= HALFVEC_INDEX_MAX_DIM:
        raise ConfigError(f"embedding dimension {dim}: pgvector's HNSW indexes at most {HALFVEC_INDEX_MAX_DIM} "
                          "dimensions (halfvec)", hint="set embedding.dimensions to a smaller size the model supports")
    return "vector" if dim <= VECTOR_INDEX_MAX_DIM else "halfvec"


def cast_sql(dim: int) -> str:
    """``vector(384)`` / ``halfvec(3072)``: the cast both the index and the query use."""
    return f"{index_type(dim)}({int(dim)})"


def opclass(dim: int) -> str:
    return f"{index_type(dim)}_cosine_ops"
