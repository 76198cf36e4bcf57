"""Fusion of the two legs: :func:`fuse` picks the configured method. Reciprocal rank fusion is
here, the pure-Python reference (the SQL twin is :mod:`.hybrid_sql`, for RRF only); the
score-based methods (convex, CombSUM, CombMNZ) are in :mod:`.score_fusion`.

``score(chunk) = sum over legs of weight_leg / (rrf_k + rank_leg(chunk))`` where rank is the
1-based position in the leg's top-``depth`` list (a leg that did not return the chunk adds 0).
Terms are summed in the fixed leg order ``vector, keyword`` so floating-point results equal
the SQL version's bit for bit. Ties are broken by ``chunk_id`` ascending, as in SQL.
(Cormack, Clarke & Buettcher 2009; ranx's ``rrf`` uses the same formula with unit weights.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ..errors import ConfigError
from ..types import Hit

LEG_ORDER = ("vector", "keyword")


@dataclass(frozen=True)
class FusionParams:
    rrf_k: int = 60
    vector_weight: float = 1.0
    keyword_weight: float = 1.0
    depth: int = 50
    engine: str = "python"  # python (cached legs + Python RRF) | sql (one statement)
    method: str = "rrf"  # rrf | convex | combsum | combmnz (the score-based ones: .score_fusion)
    alpha: float = 0.5  # convex: alpha * vector + (1 - alpha) * keyword, after normalisation
    norm: str = "minmax"  # score-based methods: minmax | zscore | max | tmm (theoretical min-max)

    def __post_init__(self) -> None:
        from .score_fusion import METHODS, NORMS

        if self.method not in ("rrf", *METHODS):
            raise ConfigError(f"fusion.method: must be one of rrf, {', '.join(METHODS)}, got {self.method!r}")
        if not 0.0 <= self.alpha <= 1.0:
            raise ConfigError(f"fusion.alpha: must be within 0..1, got {self.alpha}")
        if self.norm not in NORMS:
            raise ConfigError(f"fusion.norm: must be one of {', '.join(NORMS)}, got {self.norm!r}")
        if self.engine == "sql" and self.method != "rrf":
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


def fuse(legs: Mapping[str, Sequence[Hit]], params: FusionParams, limit: int | None = None) -> list[Hit]:
    """The configured fusion: RRF (rank-based) or a score-based method (:mod:`.score_fusion`)."""
    if params.method == "rrf":
        return rrf(legs, params, limit)
    from .score_fusion import score_fuse

    weights = ({"vector": params.alpha, "keyword": 1.0 - params.alpha} if params.method == "convex"
               else params.weights())
    return score_fuse(legs, params.method, params.norm, params.depth, weights, limit)


def rrf(legs: Mapping[str, Sequence[Hit]], params: FusionParams, limit: int | None = None) -> list[Hit]:
    """The fused list (its first ``limit``): score = the RRF score, rank = the fused position,
    ``leg_ranks`` = each leg's rank. Only the returned hits are built (sweep points fuse often)."""
    weights = params.weights()
    k = params.rrf_k
    ranks: dict[str, dict[str, int]] = {}
    meta: dict[str, Hit] = {}
    for leg in LEG_ORDER:
        for pos, h in enumerate(legs.get(leg, ())[: params.depth], start=1):
            r = ranks.get(h.chunk_id)
            if r is None:
                ranks[h.chunk_id] = {leg: pos}
                meta[h.chunk_id] = h
            else:
                r[leg] = pos
    fused = []
    for cid, leg_ranks in ranks.items():
        score = 0.0
        for leg in LEG_ORDER:  # same summation order as SQL (a missing leg adds 0.0 there too)
            pos = leg_ranks.get(leg)
            score = score + (weights[leg] / (k + pos) if pos is not None else 0.0)
        fused.append((-score, cid))
    fused.sort()
    return [meta[cid].ranked(-neg, i, ranks[cid]) for i, (neg, cid) in enumerate(fused[:limit] if limit else fused, 1)]


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
