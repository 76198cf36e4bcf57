"""Score-based fusion of the two legs (the rank-based one, RRF, is :mod:`.fusion`).

Each leg's top-``depth`` candidates carry the leg's raw score (the vector leg's cosine
similarity ``1 - cosine distance``, the keyword leg's BM25 or ts_rank score); the candidate
cache keeps them, so a fusion-only sweep point runs no SQL. A leg's scores are normalised over
that leg's list for the query, then combined:

* ``convex``: ``alpha * norm_vector + (1 - alpha) * norm_keyword`` (Bruch, Gai & Ingber 2023,
  "An Analysis of Fusion Functions for Hybrid Retrieval"; ranx's ``wsum`` with weights
  ``[alpha, 1 - alpha]``);
* ``combsum``: ``w_vector * norm_vector + w_keyword * norm_keyword`` (Fox & Shaw 1994; ranx
  ``sum`` with unit weights, the defaults);
* ``combmnz``: combsum times the number of legs that returned the chunk (ranx ``mnz``).

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
from typing import Mapping, Sequence

from ..types import Hit

LEG_ORDER = ("vector", "keyword")
METHODS = ("convex", "combsum", "combmnz")
NORMS = ("minmax", "zscore", "max", "tmm")
THEORETICAL_MIN = {"vector": -1.0, "keyword": 0.0}
FLOOR = 1e-9


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
        lo, hi = THEORETICAL_MIN[leg], max(scores)
        return [(s - lo) / max(hi - lo, FLOOR) for s in scores]
    raise ValueError(f"unknown normalisation {norm!r}")


def score_fuse(legs: Mapping[str, Sequence[Hit]], method: str, norm: str, depth: int,
               weights: Mapping[str, float], limit: int | None = None) -> list[Hit]:
    """The fused list (its first ``limit``): score = the fused score, rank = the fused position,
    ``leg_ranks`` = each leg's rank. ``weights``: per leg (convex: ``{vector: alpha, keyword: 1 - alpha}``)."""
    if method not in METHODS:
        raise ValueError(f"unknown fusion method {method!r}")
    ranks: dict[str, dict[str, int]] = {}
    norm_scores: dict[str, dict[str, float]] = {}
    meta: dict[str, Hit] = {}
    for leg in LEG_ORDER:
        hits = list(legs.get(leg, ())[:depth])
        for pos, (h, ns) in enumerate(zip(hits, normalise([h.score for h in hits], norm, leg)), start=1):
            if h.chunk_id not in ranks:
                ranks[h.chunk_id] = {}
                norm_scores[h.chunk_id] = {}
                meta[h.chunk_id] = h
            ranks[h.chunk_id][leg] = pos
            norm_scores[h.chunk_id][leg] = ns
    fused = []
    for cid, per_leg in norm_scores.items():
        score = 0.0
        for leg in LEG_ORDER:  # a fixed summation order: the same float whatever the dict order
            if leg in per_leg:
                score += weights[leg] * per_leg[leg]
        if method == "combmnz":
            score *= len(per_leg)
        fused.append((-score, cid))
    fused.sort()
    picked = fused[:limit] if limit else fused
    return [meta[cid].ranked(-neg, i, ranks[cid]) for i, (neg, cid) in enumerate(picked, 1)]
