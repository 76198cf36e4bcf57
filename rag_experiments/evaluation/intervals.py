"""A run's bootstrap intervals under their MLflow names: every headline metric, overall and per segment.

The resampling itself is stats.bootstrap (it knows nothing of metrics or segments); this module
names what it computes the way a run logs it."""

from __future__ import annotations

import pandas as pd

from ..stats.bootstrap import bootstrap_interval
from .metric_key import by_segment


def ci_metrics(per_case: pd.DataFrame, names: list[str], samples: int = 1000, seed: int = 13) -> dict[str, float]:
    """``<metric>[.<segment>].ci_low`` / ``.ci_high`` for every metric, overall and per segment."""
    if per_case.empty or samples <= 0:
        return {}
    cis = {k.mlflow_name: bootstrap_interval(v.to_numpy(), samples, seed) for k, v in by_segment(per_case, names)}
    return {f"{name}.{bound}": ci[i] for name, ci in cis.items() for i, bound in enumerate(("ci_low", "ci_high"))}
