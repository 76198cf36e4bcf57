"""Inverse square rank (Mourão, Martins & Magalhães 2015; ranx ``isr``, with unit weights):
``score(chunk) = n_legs(chunk) * sum over legs of weight_leg / rank_leg(chunk) ** 2`` where rank is
the 1-based position in the leg's top-``depth`` list and ``n_legs`` the number of legs that returned
the chunk (ISR is CombMNZ over the legs' 1 / rank² scores). Rank-based: no normalisation, no
``rrf_k``; the top of each list weighs much more than under RRF. Ties by ``chunk_id`` ascending.

    python run.py fusion.method=isr           # with fusion.vector_weight / keyword_weight if wanted
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ...types import Hit
from . import FusionMethod, describe_weights, leg_order


def fuse(legs: Mapping[str, Sequence[Hit]], weights: Mapping[str, float], params: Any,
         limit: int | None = None) -> list[Hit]:
    order = leg_order(legs)
    ranks: dict[str, dict[str, int]] = {}
    meta: dict[str, Hit] = {}
    for leg in order:
        for pos, h in enumerate(legs[leg][: params.depth], start=1):
            ranks.setdefault(h.chunk_id, {})[leg] = pos
            meta.setdefault(h.chunk_id, h)
    fused = []
    for cid, leg_ranks in ranks.items():
        score = 0.0
        for leg in order:
            if leg in leg_ranks:
                score += weights.get(leg, 1.0) / leg_ranks[leg] ** 2
        fused.append((-(score * len(leg_ranks)), cid))
    fused.sort()
    picked = fused[:limit] if limit else fused
    return [meta[cid].ranked(-neg, i, ranks[cid]) for i, (neg, cid) in enumerate(picked, 1)]


METHOD = FusionMethod(
    name="isr", fuse=fuse,
    summary="inverse square rank: legs returning the chunk times the sum of weight / rank² "
            "(Mourão et al. 2015; ranx isr)",
    describe=lambda get: "isr" + describe_weights(get),
)
