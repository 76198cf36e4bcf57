"""A single run's plots are drawn in its forked work process (issue 44 item 8): the logging process,
which imports MLflow and its store meanwhile, never imports matplotlib, and what it logs is what
MLflow's ``log_figure`` logged (the same artifact paths, the same PNG bytes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parent.parent


def _per_case() -> pd.DataFrame:
    curve = [min(1.0, k / 10) for k in range(1, 21)]
    return pd.DataFrame({
        "case_id": ["a", "b", "c", "d"],
        "kind": ["exact", "paraphrase", "exact", "production"],
        "recall_curve": [curve, [0.0] * 20, [1.0] * 20, curve[::-1]],
        "first_relevant_rank": [3.0, None, 1.0, 25.0],
    })


def test_warming_the_tracking_imports_leaves_matplotlib_to_the_work_process(tmp_path):
    """Plots on: the logging process imports MLflow and its SQL store, not matplotlib (before, it
    imported pyplot too, on the run's critical path)."""
    code = f"""
import json, sys
from types import SimpleNamespace
from rag_experiments.pipeline import warm_tracking_imports
warm_tracking_imports(SimpleNamespace(tracking=SimpleNamespace(uri="sqlite:///{tmp_path}/mlflow.db", plots=True)))
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("mlflow", "matplotlib"))))
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ})
    assert proc.returncode == 0, proc.stderr[-3000:]
    modules = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "mlflow.store.tracking.sqlalchemy_store" in modules
    assert not [m for m in modules if m.startswith("matplotlib")]


def test_plots_drawn_elsewhere_log_what_log_figure_logged(tmp_path):
    """The PNG bytes drawn by :func:`run_plot_pngs` (in the work process) and logged by
    :func:`log_run_plots` are those MLflow's own ``log_figure`` stores for the same figures; with
    no bytes given, ``log_run_plots`` draws them itself, identically."""
    from rag_experiments.tracking.plots import RUN_PLOTS, log_run_plots, pyplot, run_plot_pngs

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.create_experiment("plots", artifact_location=(tmp_path / "artifacts").as_uri())
    per_case = _per_case()
    runs = [client.create_run(exp).info.run_id for _ in range(3)]
    for name, draw in RUN_PLOTS.items():  # what the logging did before: log_figure per plot
        fig = draw(per_case)
        client.log_figure(runs[0], fig, name)
        pyplot().close(fig)
    assert log_run_plots(per_case, client=client, run_id=runs[1], pngs=run_plot_pngs(per_case)) == list(RUN_PLOTS)
    log_run_plots(per_case, client=client, run_id=runs[2])

    def logged(run_id: str) -> dict[str, bytes]:
        folder = Path(client.download_artifacts(run_id, "", str(tmp_path / run_id)))
        return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}

    before = logged(runs[0])
    assert sorted(before) == ["plots/first_relevant_rank.png", "plots/recall_at_k.png"]
    assert all(data.startswith(b"\x89PNG") for data in before.values())
    assert logged(runs[1]) == before
    assert logged(runs[2]) == before
