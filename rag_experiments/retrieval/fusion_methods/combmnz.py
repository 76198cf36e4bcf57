"""CombMNZ (Fox & Shaw 1994; ranx ``mnz``): CombSUM times the number of legs that returned the
chunk (:mod:`..score_fusion`)."""

from __future__ import annotations

from functools import partial

from ..score_fusion import weighted_sum
from . import FusionMethod

METHOD = FusionMethod(
    name="combmnz", position=3, score_based=True, fuse=partial(weighted_sum, times_legs=True),
    summary="CombSUM times the number of legs that returned the chunk (Fox & Shaw 1994; ranx mnz)",
    describe=lambda get: f"combmnz {get('norm', 'minmax')}",
)
