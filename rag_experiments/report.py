"""The summary table a run prints: overall and per segment, one row each."""

from __future__ import annotations

from rich.table import Table

from .evaluation.metric_key import segment_groups
from .terminal import console
from .tracking.ui_links import line, run_route


def short_name(metric: str) -> str:
    """recall_at_5 -> r@5 (column headers that fit a terminal)."""
    return metric.replace("recall_at_", "r@").replace("_at_", "@")


def summary_table(result, title: str | None = None) -> Table:
    ev = result.eval
    names = list(ev.summary or ev.headline)
    table = Table(title=title or (
        f"{result.settings.retrieval.variant} | {result.strategy.strategy_id} | "
        f"golden {result.golden.digest[:12]} ({ev.n_cases} cases)"))
    table.add_column("segment")
    table.add_column("n", justify="right")
    for n in names:
        table.add_column(short_name(n), justify="right")
    pc = ev.per_case

    def row(label: str, grp) -> None:
        table.add_row(label, str(len(grp)), *[f"{grp[n].mean():.3f}" for n in names])

    for seg, grp in segment_groups(pc):
        row("all" if seg is None else f"{seg.column}={seg.value}", grp)
    return table


def point_line(result, run_id: str | None, job_num: int | None, overrides: list[str]) -> str:
    """A sweep point in one line: what the point set, its headline metrics over all cases, its
    run. (The full per-segment table of every point would scroll a 100-point sweep past; the
    sweep's parent run holds the comparison.)"""
    ev = result.eval
    values = " | ".join(f"{short_name(n)} {ev.metrics[n]:.3f}" for n in ev.summary or ev.headline if n in ev.metrics)
    head = f"#{job_num} " if job_num is not None else ""
    run = f" | run {run_id}" if run_id else ""
    return f"{head}{' '.join(overrides) or '(defaults)'}: {values} ({ev.n_cases} cases, " \
           f"{result.timings.get('total_s', 0):.2f}s){run}"


def print_summary(result, run_id: str | None) -> None:
    out = console()
    out.print(summary_table(result))
    t = result.timings
    out.print(
        f"ingest: {result.ingest.summary()}\n"
        f"time: total {t.get('total_s', 0):.2f}s (ingest {t.get('ingest_s', 0):.2f}s, retrieval "
        f"{t.get('retrieval_s', 0):.2f}s, evaluate {t.get('evaluate_s', 0):.2f}s) | cache: {result.cache}"
    )
    if result.eval.excluded:
        out.print(f"[yellow]{len(result.eval.excluded)} case(s) excluded: all their evidence is stale "
                      "(rag-exp golden check lists them)[/yellow]")
    if run_id:
        out.print(f"MLflow run: {run_id}")
        out.print(run_link_line(run_id), soft_wrap=True)  # one line: a wrapped URL cannot be clicked


def run_link_line(run_id: str) -> str:
    """The run's page in the MLflow UI (Model training mode)."""
    import mlflow
    from mlflow.tracking import MlflowClient

    exp_id = MlflowClient().get_run(run_id).info.experiment_id
    return line("this run", run_route(exp_id, run_id), mlflow.get_tracking_uri())
