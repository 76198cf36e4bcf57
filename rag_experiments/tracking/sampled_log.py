"""A run scored on sampled labels in MLflow: its estimates logged, and read back by compare.

:mod:`rag_experiments.evaluation.sampled` computes the numbers. This module logs them into the run
(metrics ``ipw_recall_at_<k>`` with ``.ci_low`` / ``.ci_high``, the tag ``labels.sampled``, and for a
whole-case sample the per-case artifact ``sampled_labels.json``) and writes the lines compare,
promote and the gate show (:func:`sampled_lines`): against the baseline, each run's paired
difference of the estimates with its 95% interval, so two variants a sample cannot tell apart read
as a tie, not as whichever came out ahead.
"""

from __future__ import annotations

from typing import Sequence

from ..evaluation.sampled import ARTIFACT, table_difference, table_disagreement, table_problem
from .mlflow_run import dict_json, log_batch, log_files
from .runs import artifact_json

MARK = "ipw.population"  # logged by every run scored on sampled labels


def log_sampled(run_id: str, metrics: dict, summary: str, table: dict | None) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    log_batch(client, run_id, metrics=metrics, tags={"labels.sampled": summary})
    if table is not None:
        log_files(client, run_id, {ARTIFACT: dict_json(table)})


def read_sampled(run_id: str, client=None, artifact_uri: str = "") -> dict | None:
    """The run's ``sampled_labels.json``, or None when it logged none (or it cannot be read)."""
    return artifact_json(run_id, ARTIFACT, client, artifact_uri)


def _scored(run, ks) -> dict[str, dict[int, float]]:
    """The run's per-case recall@k (its per_case.json), case id -> {k: value}; {} for a run read
    without its table (nothing to cross-check against)."""
    frame = getattr(run, "per_case", None)
    if frame is None or "case_id" not in frame:
        return {}
    cols = {k: f"recall_at_{k}" for k in ks if f"recall_at_{k}" in frame}
    return {str(row["case_id"]): {k: float(row[c]) for k, c in cols.items()} for row in frame.to_dict("records")}


def sampled_lines(runs: Sequence, labels: Sequence[str]) -> list[str]:
    """Against the baseline ``runs[0]``, one line per other run scored on the same whole-case
    sample: recall@k's paired difference of the IPW estimates, its 95% interval, and the difference
    scored with unjudged = miss beside it. Nothing when no run was scored on sampled labels."""
    if not any(MARK in r.metrics for r in runs):
        return []
    tables = {r.id: read_sampled(r.id, artifact_uri=getattr(r, "artifact_uri", "")) if MARK in r.metrics else None
              for r in runs}
    base, base_table = runs[0], tables[runs[0].id]
    lines = []
    for r, label in zip(runs[1:], labels[1:]):
        table = tables[r.id]
        if base_table is None or table is None:
            who = "the baseline" if base_table is None else label
            lines.append(f"sampled labels: {who} has no per-case estimate (no whole-case sample when it ran): "
                         "no paired estimate against the baseline")
            continue
        bad = [(who, why) for who, t in (("the baseline", base_table), (label, table)) if (why := table_problem(t))]
        if bad:
            who, why = bad[0]
            lines.append(f"sampled labels: {who}'s {ARTIFACT} cannot be read ({why}): no paired estimate against "
                         "the baseline")
            continue
        wrong = [(who, why) for who, t, run in (("the baseline", base_table, base), (label, table, r))
                 if (why := table_disagreement(t, _scored(run, t["ks"])))]
        if wrong:  # an artifact edited by hand: its numbers are not the run's
            who, why = wrong[0]
            lines.append(f"sampled labels: {who}'s {ARTIFACT} disagrees with its own per_case.json ({why}): "
                         "no paired estimate against the baseline")
            continue
        parts = []
        for k in table["ks"]:
            d, why = table_difference(base_table, table, k)
            if d is None:
                parts = [why]
                break
            plain = [x.metrics.get(f"recall_at_{k}") for x in (base, r)]
            verdict = "excludes 0 *" if not d.low <= 0 <= d.high else "holds 0: a tie at this sample size"
            part = f"recall@{k} Δ{d.value:+.3f} [{d.low:+.3f}, {d.high:+.3f}] ({verdict})"
            if None not in plain:
                part += f", scored with unjudged = miss Δ{plain[1] - plain[0]:+.3f}"
            parts.append(part)
        lines.append(f"sampled labels {label} vs {labels[0]}: " + "; ".join(parts))
    if lines:
        lines.append("sampled labels: Δ estimates recall with the whole pool judged, paired on the same case sample "
                     "(95% label-sampling interval; the cases are taken as given); * = the interval excludes 0")
    return lines
