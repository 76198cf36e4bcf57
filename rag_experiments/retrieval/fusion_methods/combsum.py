"""CombSUM (Fox & Shaw 1994; ranx ``sum`` with unit weights, the defaults):
``vector_weight * norm(vector) + keyword_weight * norm(keyword)``, normalisation by ``fusion.norm``
(:mod:`..score_fusion`)."""

from __future__ import annotations

from ..score_fusion import weighted_sum
from . import FusionMethod

METHOD = FusionMethod(
    name="combsum", position=2, score_based=True, fuse=weighted_sum,
    summary="vector_weight * norm(vector) + keyword_weight * norm(keyword), normalised by fusion.norm "
            "(Fox & Shaw 1994; ranx sum)",
    describe=lambda get: f"combsum {get('norm', 'minmax')}",
)
