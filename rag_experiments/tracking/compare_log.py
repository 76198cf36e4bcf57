"""Log a comparison to MLflow: its plots and Markdown table, on the sweep parent or a new run
tagged ``comparison=true``."""

from __future__ import annotations

from .compare import Comparison
from .compare_plots import comparison_figures
from .ownership import owner_tags
from .plots import pyplot
from .runs import RunView, client


def log_plots(cmp: Comparison, parent: RunView | None = None, c=None) -> tuple[str, list[str]]:
    """Log the plots (and the Markdown table) to the sweep parent, else to a new comparison run.

    The parent is the named sweep, else the parent every run shares. Returns (run id, paths).
    """
    c = c or client()
    runs = [r.run for r in cmp.rows]
    if parent is None:
        parents = {r.parent_id for r in runs}
        if len(parents) == 1 and None not in parents:
            parent_id = parents.pop()
        else:
            parent_id = None
    else:
        parent_id = parent.id
    if parent_id is None:
        created = c.create_run(runs[0].experiment_id, run_name=f"compare {len(runs)} runs"[:240], tags={
            "comparison": "true", "compared_runs": ",".join(r.id for r in runs)[:5000],
            "baseline_run": runs[0].id, "primary_metric": cmp.primary, **owner_tags()})
        parent_id = created.info.run_id
        c.set_terminated(parent_id, status="FINISHED")
    plt = pyplot()
    paths = []
    for fig, name in comparison_figures(cmp):
        c.log_figure(parent_id, fig, name)
        plt.close(fig)
        paths.append(name)
    c.log_text(parent_id, cmp.to_markdown(), "comparison/table.md")
    paths.append("comparison/table.md")
    return parent_id, paths
