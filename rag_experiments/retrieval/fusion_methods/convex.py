"""Convex combination of normalised leg scores (Bruch, Gai & Ingber 2023, "An Analysis of Fusion
Functions for Hybrid Retrieval"; ranx's ``wsum`` with weights ``[alpha, 1 - alpha]``):
``alpha * norm(vector) + (1 - alpha) * norm(keyword)``, normalisation by ``fusion.norm``
(:mod:`..score_fusion`)."""

from __future__ import annotations

from ..score_fusion import weighted_sum
from . import FusionMethod, num

METHOD = FusionMethod(
    name="convex", position=1, score_based=True, fuse=weighted_sum,
    weights=lambda p: {"vector": p.alpha, "keyword": 1.0 - p.alpha},
    summary="alpha * norm(vector) + (1 - alpha) * norm(keyword), normalised by fusion.norm "
            "(Bruch, Gai & Ingber 2023; ranx wsum)",
    describe=lambda get: f"convex alpha={num(get('alpha', '?'))} {get('norm', 'minmax')}",
)
