"""One MLflow parent run per Hydra multirun, with every sweep point as a nested child.

``on_multirun_start`` creates the parent and publishes its id in the environment (same-process
launchers, and joblib/loky workers spawned afterwards inherit it) and in
``<sweep dir>/mlflow_parent_run_id`` (for launchers on other machines). ``on_multirun_end``
closes it: FAILED if any child failed or is missing, else FINISHED. A job that crashes marks its
own child FAILED (see :mod:`rag_experiments.pipeline`), and an ``atexit`` guard closes a parent
left RUNNING if Hydra aborts the sweep, so no run stays RUNNING forever.
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from ..errors import UserError
from ..redaction import redact_text
from .mlflow_run import PARENT_ENV, setup
from .ownership import owner_tags


class MlflowSweepCallback(Callback):
    def __init__(self) -> None:
        self.parent_id: str | None = None
        self.n_jobs = 0
        self.summary = True
        self.primary = "recall_at_5"

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from ..sweep_preflight import check_sweep_or_exit

        check_sweep_or_exit(config)  # every point valid, before the parent run exists
        if not config.tracking.enabled:
            return
        import mlflow
        from mlflow.tracking import MlflowClient

        try:
            exp_id = setup(config.tracking.uri, config.tracking.experiment)
        except UserError as exc:  # Hydra would turn an exception here into a warning and go on
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(exc.exit_code)
        self.summary = bool(config.tracking.get("sweep_summary", True))
        self.primary = str(config.get("objective", "recall_at_5")).split(".")[0]
        overrides = list(config.hydra.overrides.task)
        sweep = {k: str(v) for k, v in (config.hydra.sweeper.get("params") or {}).items()}
        name = "sweep " + " ".join(f"{k}={v}" for k, v in sweep.items()) if sweep else "sweep"
        client = MlflowClient()
        # mask before cutting: a cut through a URL would leave a password no pattern recognises
        run = client.create_run(exp_id, run_name=redact_text(name)[:240], tags={
            "sweep": "parent", "sweep_overrides": redact_text(" ".join(overrides))[:5000],
            "sweep_params": redact_text(str(sweep))[:5000], **owner_tags()})
        self.parent_id = run.info.run_id
        os.environ[PARENT_ENV] = self.parent_id
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / "mlflow_parent_run_id").write_text(self.parent_id + "\n")
        atexit.register(self._close_if_running)
        del mlflow

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        self.n_jobs += 1

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._finish()

    def _finish(self) -> None:
        if not self.parent_id:
            return
        from mlflow.tracking import MlflowClient

        client = MlflowClient()
        parent = client.get_run(self.parent_id)
        children = client.search_runs([parent.info.experiment_id],
                                      filter_string=f"tags.mlflow.parentRunId = '{self.parent_id}'")
        statuses = [c.info.status for c in children]
        failed = any(s != "FINISHED" for s in statuses) or len(children) < self.n_jobs
        client.set_tag(self.parent_id, "children", str(len(children)))
        client.set_tag(self.parent_id, "children_failed", str(sum(s != "FINISHED" for s in statuses)))
        client.set_terminated(self.parent_id, status="FAILED" if failed else "FINISHED")
        if self.summary and sum(s == "FINISHED" for s in statuses) >= 2:
            self._log_summary(self.parent_id)
        os.environ.pop(PARENT_ENV, None)
        self.parent_id = None

    def _log_summary(self, parent_id: str) -> None:
        """The sweep's comparison (plots, Markdown table with paired tests) on the parent run, so
        the MLflow UI shows it without a second command. Never fails the sweep."""
        try:
            from .compare import build_comparison, log_plots
            from .runs import get_run, sweep_children

            children = [r for r in sweep_children(parent_id) if r.status == "FINISHED"]
            cmp = build_comparison(children, primary=self.primary, n_resamples=2000)
            _, paths = log_plots(cmp, get_run(parent_id, per_case=False))
            print(f"sweep summary logged to parent run {parent_id}: {', '.join(paths)}")
        except Exception as exc:  # noqa: BLE001 - a summary is a convenience, the runs are logged
            print(f"warning: could not log the sweep summary to {parent_id}: {exc}")

    def _close_if_running(self) -> None:
        if self.parent_id:
            try:
                from mlflow.tracking import MlflowClient

                client = MlflowClient()
                client.set_tag(self.parent_id, "aborted", "true")
                # say how many points failed (a lost Ray node, a crashing point), as _finish does
                parent = client.get_run(self.parent_id)
                children = client.search_runs([parent.info.experiment_id],
                                              filter_string=f"tags.mlflow.parentRunId = '{self.parent_id}'")
                client.set_tag(self.parent_id, "children", str(len(children)))
                client.set_tag(self.parent_id, "children_failed",
                               str(sum(c.info.status != "FINISHED" for c in children)))
                client.set_terminated(self.parent_id, status="FAILED")
            except Exception:  # noqa: BLE001 - best effort at interpreter exit
                pass
            self.parent_id = None
