"""Hydra's basic sweeper without the second composition of every sweep point.

``BasicSweeper.sweep`` composes every job's config to validate the batch, then the launcher
composes each again to run it: two compositions per point, 0.3 to 1 s each on this project's
config tree, which was most of a fusion-only point's cost (the point itself reuses every cached
candidate list; measured on the 100-point rrf_k x keyword_weight sweep: 112 s of validation
before the first point, 66 s for all 100 points). This sweeper validates the first point of
each batch (a misspelt key, a missing group option, a schema type error shared by all points)
and leaves the rest to the launcher, which composes each point before running it: a bad value
in a later point still stops the sweep with Hydra's own message, when that point starts.
Selected by ``conf/hydra/sweeper/basic.yaml``; ``hydra/sweeper=optuna`` and presets pick others.
"""

from __future__ import annotations

from typing import Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper


class BasicSweeperComposingOnce(BasicSweeper):
    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        super().validate_batch_is_legal(list(batch)[:1])
