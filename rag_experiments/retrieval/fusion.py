"""Fusion of the legs: :class:`FusionParams` (the ``fusion`` config group) and :func:`fuse`, which
runs the configured method of the registry :mod:`.fusion_methods` (one module per method: ``rrf``,
the pure-Python reference whose SQL twin is :mod:`.hybrid_sql`; the score-based ``convex``,
``combsum``, ``combmnz`` over :mod:`.score_fusion`; ``isr``). A method's formula is in its module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ..errors import ConfigError
from ..types import Hit
from .fusion_methods import LEG_ORDER, FusionMethod, registry
from .score_fusion import NORMS

__all__ = ["LEG_ORDER", "FusionParams", "fuse", "fuse_lists", "method", "rrf", "rrf_lists"]


@dataclass(frozen=True)
class FusionParams:
    rrf_k: int = 60
    vector_weight: float = 1.0
    keyword_weight: float = 1.0
    depth: int = 50
    engine: str = "python"  # python (cached legs + Python RRF) | sql (one statement)
    method: str = "rrf"  # a method of rag_experiments/retrieval/fusion_methods/ (one module each)
    alpha: float = 0.5  # convex: alpha * vector + (1 - alpha) * keyword, after normalisation
    norm: str = "minmax"  # score-based methods: minmax | zscore | max | tmm (theoretical min-max)

    def __post_init__(self) -> None:
        methods = registry()
        if self.method not in methods:
            raise ConfigError(f"fusion.method: must be one of {', '.join(methods)}, got {self.method!r}")
        if not 0.0 <= self.alpha <= 1.0:
            raise ConfigError(f"fusion.alpha: must be within 0..1, got {self.alpha}")
        if self.norm not in NORMS:
            raise ConfigError(f"fusion.norm: must be one of {', '.join(NORMS)}, got {self.norm!r}")
        if self.engine == "sql" and not methods[self.method].sql:
            raise ConfigError(f"fusion.engine=sql: the SQL twin implements RRF only, not fusion.method={self.method}",
                              hint="use fusion.engine=python (the default) for score-based fusion")
        if self.rrf_k <= 0:
            raise ConfigError(f"fusion.rrf_k: must be > 0, got {self.rrf_k}")
        if self.vector_weight < 0:
            raise ConfigError(f"fusion.vector_weight: must be >= 0, got {self.vector_weight}")
        if self.keyword_weight < 0:
            raise ConfigError(f"fusion.keyword_weight: must be >= 0, got {self.keyword_weight}")
        if self.vector_weight == 0 and self.keyword_weight == 0:
            raise ConfigError("fusion: vector_weight and keyword_weight are both 0; at least one must be > 0")
        if self.depth <= 0:
            raise ConfigError(f"fusion.depth: must be > 0, got {self.depth}")
        if self.engine not in ("python", "sql"):
            raise ConfigError(f"fusion.engine: must be 'python' or 'sql', got {self.engine!r}")

    def weights(self) -> dict[str, float]:
        return {"vector": self.vector_weight, "keyword": self.keyword_weight}


def method(name: str) -> FusionMethod:
    return registry()[name]


def fuse(legs: Mapping[str, Sequence[Hit]], params: FusionParams, limit: int | None = None) -> list[Hit]:
    """The configured method over the legs (by name), with the method's per-leg weights."""
    m = registry()[params.method]
    return m.fuse(legs, m.weights(params), params, limit)


def rrf(legs: Mapping[str, Sequence[Hit]], params: FusionParams, limit: int | None = None) -> list[Hit]:
    """Reciprocal rank fusion with ``params``' weights, whatever ``params.method`` says."""
    return registry()["rrf"].fuse(legs, params.weights(), params, limit)


def fuse_lists(lists: Sequence[Sequence[Hit]], params: FusionParams) -> list[Hit]:
    """The ranked lists of one query's expansions (``query.rewrite``: ``q0`` = the question's, then
    each rewrite's) merged by the configured ``fusion.method``, each list a leg of equal weight 1,
    cut to ``fusion.depth``; ties by chunk id. ``leg_ranks`` keep the leg ranks of a hit's first
    appearance (vector, keyword, fused) plus its rank in each list. With ``fusion.method=rrf`` this
    is :func:`rrf_lists`, float for float (the lists are summed in list order). A score-based
    method normalises each list by ``fusion.norm``; under ``tmm`` an expansion list counts from 0
    (a fused list's scores are >= 0; a vector-only variant's cosine lists, bounded by -1, too)."""
    legs = {f"q{i}": hits for i, hits in enumerate(lists)}
    first: dict[str, Hit] = {}
    for hits in lists:
        for h in hits[: params.depth]:
            first.setdefault(h.chunk_id, h)
    fused = registry()[params.method].fuse(legs, dict.fromkeys(legs, 1.0), params, None)
    return [f.ranked(f.score, f.rank, {**first[f.chunk_id].leg_ranks, **f.leg_ranks}) for f in fused]


def rrf_lists(lists: Sequence[Sequence[Hit]], k: int, depth: int) -> list[Hit]:
    """Reciprocal rank fusion of ranked lists of one query's expansions (``query.rewrite``): score
    = sum over lists of ``1 / (k + rank)``, each list cut to ``depth``, equal weights; ties by chunk
    id. ``leg_ranks`` keep the first list's leg ranks of a hit plus its rank in each list
    (``q0`` = the question's list)."""
    ranks: dict[str, dict[str, int]] = {}
    meta: dict[str, Hit] = {}
    for i, hits in enumerate(lists):
        for pos, h in enumerate(hits[:depth], start=1):
            if h.chunk_id not in ranks:
                ranks[h.chunk_id] = {}
                meta[h.chunk_id] = h
            ranks[h.chunk_id].setdefault(f"q{i}", pos)
    fused = sorted((-sum(1.0 / (k + pos) for pos in r.values()), cid) for cid, r in ranks.items())
    return [meta[cid].ranked(-neg, i, {**meta[cid].leg_ranks, **ranks[cid]}) for i, (neg, cid) in enumerate(fused, 1)]
