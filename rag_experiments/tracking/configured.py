"""The metrics a set of runs was configured to report, read from the runs themselves.

No command hard-codes ``recall_at_5``: the objective is the run's ``objective`` param (or tag),
the headline cutoffs are its ``eval.ks`` / ``eval.mrr_k`` / ``eval.ndcg_k`` params. A preset
such as ``experiment=beir`` (ks 10 and 100, objective ndcg_at_10) is then summarised, compared,
promoted and gated on what it logged. Runs logged without those params (older runs) fall back
to the metric names they logged.
"""

from __future__ import annotations

from typing import Sequence

from ..errors import UserError
from ..evaluation.metric_key import HEADLINE, MetricKey, headline
from ..evaluation.rescore import params_from_flat
from .runs import RunView, get_run, search, sweep_children


def headline_metrics(run: RunView) -> list[str]:
    """recall@k for the run's ks, then mrr and ndcg at their cutoffs (the table's columns)."""
    p = run.params
    if p.get("eval.ks") and p.get("eval.mrr_k") and p.get("eval.ndcg_k"):
        ev = params_from_flat(p)
        names = [m.mlflow_name for m in headline(ev.ks, ev.mrr_k, ev.ndcg_k)]
        return [n for n in names if n in run.metrics] or names
    return headline_names(run.metrics)


def headline_names(names) -> list[str]:
    """The recall/mrr/ndcg@k names among ``names``, in table order (recall, mrr, ndcg; by k)."""
    keys = [k for k in map(MetricKey.parse, names) if k.metric in HEADLINE and k.k is not None and not k.segment]
    return [k.mlflow_name for k in sorted(keys, key=lambda k: (HEADLINE.index(k.metric), k.k))]


def objective(run: RunView) -> str | None:
    """The run's configured objective (``recall_at_5``, ``ndcg_at_10``, ``recall_at_5.exact``)."""
    return run.params.get("objective") or run.tags.get("objective") or None


def comparison_defaults(runs: Sequence[RunView]) -> tuple[list[str], str]:
    """(metric columns, primary metric) for comparing ``runs``: the baseline's configuration,
    keeping the columns every run logged."""
    if not runs:
        raise UserError("no runs to compare")
    base = runs[0]
    metrics = [m for m in headline_metrics(base) if all(m in r.metrics or _in_table(r, m) for r in runs)]
    primary = MetricKey.parse(objective(base)).column if objective(base) else (metrics[0] if metrics else None)
    if not primary:
        raise UserError(f"run {base.id} states no objective and logged no recall/mrr/ndcg metric",
                        hint="give --primary and --metrics")
    if primary not in metrics:
        metrics.insert(0, primary)
    return metrics, primary


def _in_table(run: RunView, metric: str) -> bool:
    return run.per_case is not None and metric in run.per_case


def configured_objective(runs: Sequence[RunView], what: str = "--metric") -> str:
    """The one objective these runs were configured with; a clear error when they disagree."""
    found = [o for o in (objective(r) for r in runs) if o]
    if not found:
        raise UserError(f"no run states its objective (param 'objective'); give {what}")
    distinct = list(dict.fromkeys(found))
    if len(distinct) > 1:
        raise UserError(f"the runs were configured with different objectives ({', '.join(distinct)}); "
                        f"give {what}")
    return distinct[0]


def store_objective(sweep: str | None = None, experiment: str | None = None, c=None) -> str:
    """The objective to promote on when none is given: the sweep's children's, else the newest
    finished run's (of ``experiment``, else of the store)."""
    if sweep:
        children = sweep_children(sweep, per_case=False, c=c)
        if not children:  # said as what it is, not as "no run states its objective" (a new user's trial)
            raise UserError(f"--sweep {sweep}: {_not_a_parent(sweep, c)}",
                            hint="give the sweep parent's id (the sweep prints it; the MLflow UI shows it above its "
                            "points), or leave --sweep out to choose among every run of the store")
        return configured_objective(children)
    newest = [r for r in search("attributes.status = 'FINISHED'", per_case=False, order="DESC", max_results=20,
                                c=c, experiment=experiment) if not r.is_sweep_parent and objective(r)]
    return configured_objective(newest[:1])


def _not_a_parent(run_id: str, c=None) -> str:
    """Why a --sweep id has no points: no such run, a sweep's point, or a run of its own."""
    try:
        run = get_run(run_id, per_case=False, c=c)
    except Exception:  # noqa: BLE001 - not found, or not an id at all: one sentence either way
        return "no run has this id in the store"
    if run.parent_id:
        return f"run {run.id[:12]} ({run.name}) is a point of sweep {run.parent_id}, not a sweep's parent"
    return f"run {run.id[:12]} ({run.name}) is not a sweep's parent: no run names it as its parent"
