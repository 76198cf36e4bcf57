"""A run's judge-corrected metrics in MLflow: logged beside its own, read back by compare.

The numbers come from :mod:`rag_experiments.evaluation.judge_corrected`; this module only puts
them into the run (metrics ``judge_corrected_<metric>`` with ``.ci_low`` / ``.ci_high``, the
artifact ``judge_corrected.json``) and reads the artifact back.
"""

from __future__ import annotations

import json

from ..evaluation.judge_corrected import ARTIFACT, JudgeCorrected


def log_judge_corrected(run_id: str | None, corrected: JudgeCorrected | None) -> None:
    """Log ``corrected`` into the run (nothing when either is None)."""
    if run_id is None or corrected is None:
        return
    from mlflow.tracking import MlflowClient

    from .mlflow_run import dict_json, log_batch, log_files

    client = MlflowClient()
    log_batch(client, run_id, metrics=corrected.metrics(),
              tags={"judge_corrected": f"{len(corrected.cases)} cases of {corrected.n_all}"})
    log_files(client, run_id, {ARTIFACT: dict_json(corrected.to_json())})


def read_judge_corrected(run_id: str, client=None) -> dict | None:
    """The run's ``judge_corrected.json``, or None when it logged none (or it cannot be read)."""
    import tempfile
    from pathlib import Path

    if client is None:
        from mlflow.tracking import MlflowClient

        client = MlflowClient()
    try:
        names = {f.path for f in client.list_artifacts(run_id)}
        if ARTIFACT not in names:
            return None
        with tempfile.TemporaryDirectory(prefix="rag_exp_jc_") as tmp:
            path = client.download_artifacts(run_id, ARTIFACT, tmp)
            return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
