"""Score-based fusion: normalisation and the weighted sum the score-based methods of
:mod:`.fusion_methods` share (``convex``, ``combsum``, ``combmnz``; the rank-based ones, ``rrf``
and ``isr``, need none of this).

Each leg's top-``depth`` candidates carry the leg's raw score (the vector leg's cosine
similarity ``1 - cosine distance``, the keyword leg's BM25 or ts_rank score); the candidate
cache keeps them, so a fusion-only sweep point runs no SQL. A leg's scores are normalised over
that leg's list for the query, then combined:

``sum over legs of weight_leg * norm_leg(chunk)``, times the number of legs that returned the
chunk for ``combmnz`` (each method's module says which weights it uses).

A chunk missing from one leg gets 0 from that leg, after normalisation, for all three methods.
That is ranx's convention, and it means "below everything that leg returned" only for min-max
and tmm.

Normalisations, over one leg's list for one query (ranx's denominators are floored at 1e-9, so a
list of equal scores does not divide by zero; ours are the same, for parity):

* ``minmax``: ``(s - min) / max(max - min, 1e-9)``;
* ``zscore`` (ZMUV): ``(s - mean) / max(std, 1e-9)``, population standard deviation;
* ``max``: ``s / max(max, 1e-9)``;
* ``tmm``, the theoretical min-max of Bruch et al.: ``(s - m) / max(max - m, 1e-9)`` where ``m`` is
  the leg's theoretical lower bound instead of the query's observed minimum (:data:`THEORETICAL_MIN`:
  -1 for cosine similarity, 0 for BM25 and ts_rank). One strong leg result is then not stretched to
  1 while a weak one sits at 0.

Ties on the fused score are broken by ``chunk_id`` ascending, as everywhere.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, NamedTuple, Sequence

from ..types import Hit
from .fusion_methods import leg_order, registry

NORMS = ("minmax", "zscore", "max", "tmm")
THEORETICAL_MIN = {"vector": -1.0, "keyword": 0.0}
FLOOR = 1e-9


class Knobs(NamedTuple):
    """What a score-based method reads of :class:`~.fusion.FusionParams` (for :func:`score_fuse`)."""

    norm: str
    depth: int


def normalise(scores: Sequence[float], norm: str, leg: str) -> list[float]:
    if not scores:
        return []
    if norm == "minmax":
        lo, hi = min(scores), max(scores)
        return [(s - lo) / max(hi - lo, FLOOR) for s in scores]
    if norm == "zscore":
        mean = math.fsum(scores) / len(scores)
        std = math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / len(scores))
        return [(s - mean) / max(std, FLOOR) for s in scores]
    if norm == "max":
        hi = max(scores)
        return [s / max(hi, FLOOR) for s in scores]
    if norm == "tmm":
        lo, hi = THEORETICAL_MIN.get(leg, 0.0), max(scores)  # another list (a query expansion's): from 0
        return [(s - lo) / max(hi - lo, FLOOR) for s in scores]
    raise ValueError(f"unknown normalisation {norm!r}")


def weighted_sum(legs: Mapping[str, Sequence[Hit]], weights: Mapping[str, float], params: Any,
                 limit: int | None = None, *, times_legs: bool = False) -> list[Hit]:
    """The fused list (its first ``limit``) of ``sum over legs of weight * normalised score``
    (``params.norm`` over each leg's top ``params.depth``), times the number of legs that returned
    the chunk when ``times_legs``; ``leg_ranks`` = each leg's rank."""
    order = leg_order(legs)
    ranks: dict[str, dict[str, int]] = {}
    norm_scores: dict[str, dict[str, float]] = {}
    meta: dict[str, Hit] = {}
    for leg in order:
        hits = list(legs[leg][: params.depth])
        for pos, (h, ns) in enumerate(zip(hits, normalise([h.score for h in hits], params.norm, leg)), start=1):
            if h.chunk_id not in ranks:
                ranks[h.chunk_id] = {}
                norm_scores[h.chunk_id] = {}
                meta[h.chunk_id] = h
            ranks[h.chunk_id][leg] = pos
            norm_scores[h.chunk_id][leg] = ns
    fused = []
    for cid, per_leg in norm_scores.items():
        score = 0.0
        for leg in order:  # a fixed summation order: the same float whatever the dict order
            if leg in per_leg:
                score += weights.get(leg, 1.0) * per_leg[leg]
        if times_legs:
            score *= len(per_leg)
        fused.append((-score, cid))
    fused.sort()
    picked = fused[:limit] if limit else fused
    return [meta[cid].ranked(-neg, i, ranks[cid]) for i, (neg, cid) in enumerate(picked, 1)]


def score_fuse(legs: Mapping[str, Sequence[Hit]], method: str, norm: str, depth: int,
               weights: Mapping[str, float], limit: int | None = None) -> list[Hit]:
    """A score-based method of the registry by name, with explicit weights (``convex``:
    ``{vector: alpha, keyword: 1 - alpha}``)."""
    m = registry().get(method)
    if m is None or not m.score_based:
        raise ValueError(f"unknown fusion method {method!r}")
    return m.fuse(legs, weights, Knobs(norm, depth), limit)
