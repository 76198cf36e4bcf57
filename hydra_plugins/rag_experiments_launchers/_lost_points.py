"""A sweep point whose worker or node died cannot close its own MLflow run: the Ray launcher does.

Here beside the launcher, its only caller (was rag_experiments/scale/lost_points.py: the scale
layer sits below tracking, and this writes MLflow runs; issue 46 item 3). The leading underscore
keeps Hydra's plugin scan from importing it at every start-up.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig


def finished_run(cfg: DictConfig, parent_id: str | None) -> str | None:
    """The point's FINISHED child run, when its worker died after logging it but before Ray
    returned its result: the point's work is done and recorded, so it is not lost."""
    from mlflow.tracking import MlflowClient

    from rag_experiments.tracking.mlflow_run import setup  # MLflow: only when a point was lost

    if not parent_id:
        return None  # without the parent, a FINISHED run could be another sweep's point
    exp_id = setup(cfg.tracking.uri, cfg.tracking.experiment)
    runs = MlflowClient().search_runs([exp_id], f"tags.`sweep.job_num` = '{cfg.hydra.job.num}' and "
                                      f"tags.mlflow.parentRunId = '{parent_id}' and attributes.status = 'FINISHED'")
    return runs[0].info.run_id if runs else None


def record_lost_point(cfg: DictConfig, overrides: list[str], error: BaseException, parent_id: str | None) -> str:
    """Mark the point's child run FAILED, or create it FAILED if it died before logging."""
    from mlflow.tracking import MlflowClient

    from rag_experiments.tracking.mlflow_run import redact, setup

    exp_id = setup(cfg.tracking.uri, cfg.tracking.experiment)
    client = MlflowClient()
    job = str(cfg.hydra.job.num)
    reason = f"lost: {type(error).__name__} (its Ray worker or node died)"
    parent_filter = f" and tags.mlflow.parentRunId = '{parent_id}'" if parent_id else ""
    running = client.search_runs([exp_id], f"tags.`sweep.job_num` = '{job}'{parent_filter}"
                                 " and attributes.status = 'RUNNING'")
    for run in running:
        client.set_tag(run.info.run_id, "error", reason)
        client.set_terminated(run.info.run_id, status="FAILED")
    if running:
        return running[0].info.run_id
    tags: dict[str, Any] = {"sweep.job_num": job, "error": reason}
    if parent_id:
        tags["mlflow.parentRunId"] = parent_id
    params = redact({k.lstrip("+~"): v for k, _, v in (o.partition("=") for o in overrides)
                     if k and not k.lstrip("+~").startswith("hydra")})
    name = " ".join(f"{k}={v}" for k, v in params.items())
    run = client.create_run(exp_id, run_name=name[:240] or f"job {job}", tags=tags)
    for key, value in params.items():
        client.log_param(run.info.run_id, key, str(value)[:6000])
    client.set_terminated(run.info.run_id, status="FAILED")
    return run.info.run_id
