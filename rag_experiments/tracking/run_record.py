"""What one run records, split by where a person looks for it (pure functions, no MLflow).

MLflow's metric list is what the runs table, the chart view and Compare show: it holds the
headline metrics (the names the run's ``eval`` config defines: ``recall_at_<k>`` for its ks,
``mrr_at_<k>``, ``ndcg_at_<k>``, ``hit_at_<k>``, ``judged_at_<k>``) overall and per segment,
``n_cases`` and the query latency percentiles, plus the objective's 95% interval (promote
breaks ties on it). Everything else would bury those rows (a run used to log 239 metrics:
every value with ``.ci_low``/``.ci_high`` twins, timings, cache counters, anchor and drift
counts), so it goes elsewhere:

* every interval: the ``intervals.json`` table artifact (metric, low, high), and as metrics
  only with ``tracking.log_intervals=true``;
* timings, cache counters, anchor/drift counts, ANN recall: ``diagnostics.json``, with the
  few that explain a surprising number also as tags (``ann_recall_at_depth``, ``time.total_s``).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import pandas as pd

from ..evaluation.metric_key import MetricKey

#: result measures that are not retrieval-quality metrics but belong next to them
RESULT_EXTRAS = ("n_cases", "latency_ms_p50", "latency_ms_p95")
#: eval.metrics entries that are diagnostics, not results
DIAGNOSTIC_METRICS = ("ann_recall_at_depth",)
INTERVALS_ARTIFACT = "intervals.json"
FAILURES_ARTIFACT = "failures.json"
DIAGNOSTICS_ARTIFACT = "diagnostics.json"


def run_metrics(eval_metrics: Mapping[str, float], headline: Sequence[str], objective: str,
                intervals: Mapping[str, float], log_intervals: bool = False) -> dict[str, float]:
    """The metrics a run logs: headline metrics with their segments, the result extras, and
    intervals for the objective only (all of them with ``log_intervals``)."""
    out = {k: float(v) for k, v in eval_metrics.items() if MetricKey.parse(k).column in headline
           or k in RESULT_EXTRAS}
    if log_intervals:
        out.update({k: float(v) for k, v in intervals.items()})
    else:
        for bound in ("ci_low", "ci_high"):
            key = f"{objective}.{bound}"
            if key in intervals:
                out[key] = float(intervals[key])
    return {k: v for k, v in out.items() if not (isinstance(v, float) and math.isnan(v))}


def intervals_frame(intervals: Mapping[str, float]) -> pd.DataFrame:
    """``{'recall_at_5.exact.ci_low': .., '.ci_high': ..}`` as one row per metric: metric, low, high."""
    rows: dict[str, dict[str, Any]] = {}
    for key, value in intervals.items():
        name, _, bound = key.rpartition(".")
        if bound not in ("ci_low", "ci_high"):
            continue
        rows.setdefault(name, {"metric": name, "low": None, "high": None})["low" if bound == "ci_low" else "high"] = value
    return pd.DataFrame(list(rows.values()), columns=["metric", "low", "high"])


def diagnostics(timings: Mapping[str, float], cache: Mapping[str, int], anchors: Mapping[str, int],
                drift: Mapping[str, int], excluded: int, eval_metrics: Mapping[str, float]) -> dict[str, Any]:
    """How the run went (not how good it was): one JSON document per run."""
    return {
        "time_s": {k.removesuffix("_s"): round(float(v), 4) for k, v in timings.items()},
        "cache": {k: int(v) for k, v in cache.items()},
        "golden": {"anchors": dict(anchors), "drift": dict(drift), "excluded_all_stale": int(excluded)},
        **{k: eval_metrics[k] for k in DIAGNOSTIC_METRICS if k in eval_metrics},
    }


def diagnostic_tags(diag: Mapping[str, Any]) -> dict[str, str]:
    """The diagnostics worth a glance in the runs table (tags are filterable, not charted)."""
    tags = {}
    if "ann_recall_at_depth" in diag:
        tags["ann_recall_at_depth"] = f"{diag['ann_recall_at_depth']:.3f}"
    total = diag.get("time_s", {}).get("total")
    if total is not None:
        tags["time.total_s"] = f"{total:.2f}"
    stale = diag.get("golden", {}).get("anchors", {}).get("stale")
    if stale:
        tags["golden.stale_spans"] = str(stale)
    return tags


def failure_cutoff(objective: str) -> str:
    """The per-case column a failure is read from: recall at the objective's cutoff
    (``ndcg_at_10`` -> ``recall_at_10``; a cutoff-less objective: ``recall_at_5``)."""
    key = MetricKey.parse(objective)
    return f"recall_at_{key.k if key.k is not None else 5}"


def failures_frame(per_case: pd.DataFrame, objective: str, depth: int) -> pd.DataFrame:
    """The cases whose evidence missed the objective's cutoff (recall@k = 0), worst first: where
    the first relevant hit sat (its rank, or not in the ``depth`` hits retrieved), the query, its
    kind and document type. Short by design: the Artifacts tab answers "which questions failed"."""
    column = failure_cutoff(objective)
    if column not in per_case:
        column = MetricKey.parse(objective).column
    cols = ["case_id", "kind", "doc_type", "query", "first_relevant_rank"]
    if column not in per_case:
        return pd.DataFrame(columns=[*cols, "where"])
    failed = per_case[per_case[column].astype(float) == 0.0]
    out = failed[[c for c in cols if c in failed]].copy()
    rank = out["first_relevant_rank"] if "first_relevant_rank" in out else pd.Series([None] * len(out), index=out.index)
    out["where"] = [f"rank {int(r)}" if pd.notna(r) else f"not in the top {depth}" for r in rank]
    out.insert(1, column, failed[column].astype(float))
    # never retrieved first, then the deepest ranks: the worst failures on top
    order = rank.fillna(float(depth) + 1).astype(float)
    return out.loc[order.sort_values(ascending=False, kind="stable").index].reset_index(drop=True)
