"""Reciprocal rank fusion (Cormack, Clarke & Buettcher 2009; ranx ``rrf``, with unit weights).

``score(chunk) = sum over legs of weight_leg / (rrf_k + rank_leg(chunk))`` where rank is the
1-based position in the leg's top-``depth`` list (a leg that did not return the chunk adds 0).
Terms are summed in :func:`leg_order` so floating-point results equal the SQL version's
(:mod:`..hybrid_sql`) bit for bit. Ties are broken by ``chunk_id`` ascending, as in SQL.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ...types import Hit
from . import FusionMethod, describe_weights, leg_order, num


def fuse(legs: Mapping[str, Sequence[Hit]], weights: Mapping[str, float], params: Any,
         limit: int | None = None) -> list[Hit]:
    """Only the returned hits are built (sweep points fuse often)."""
    k = params.rrf_k
    order = leg_order(legs)
    ranks: dict[str, dict[str, int]] = {}
    meta: dict[str, Hit] = {}
    for leg in order:
        for pos, h in enumerate(legs[leg][: params.depth], start=1):
            r = ranks.get(h.chunk_id)
            if r is None:
                ranks[h.chunk_id] = {leg: pos}
                meta[h.chunk_id] = h
            else:
                r[leg] = pos
    fused = []
    for cid, leg_ranks in ranks.items():
        score = 0.0
        for leg in order:  # same summation order as SQL (a missing leg adds 0.0 there too)
            pos = leg_ranks.get(leg)
            score = score + (weights.get(leg, 1.0) / (k + pos) if pos is not None else 0.0)
        fused.append((-score, cid))
    fused.sort()
    return [meta[cid].ranked(-neg, i, ranks[cid]) for i, (neg, cid) in enumerate(fused[:limit] if limit else fused, 1)]


METHOD = FusionMethod(
    name="rrf", position=0, sql=True, fuse=fuse,
    summary="reciprocal rank fusion: sum over legs of weight / (rrf_k + rank); rank-based, no normalisation",
    describe=lambda get: f"rrf_k={num(get('rrf_k', '?'))}" + describe_weights(get),
)
