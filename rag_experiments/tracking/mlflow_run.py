"""Everything a run logs to MLflow, in one place.

Per run: the resolved config as flattened params and as a YAML artifact (secrets redacted),
every metric (MLflow rejects ``@``: ``recall_at_5``, ``recall_at_5.exact``), the per-case
table (``mlflow.log_table``), the golden set and the corpus as input datasets whose digests are
the golden file's sha256 and the corpus manifest digest, git commit and dirty flag, and tags
for variant, strategy and label validation. The golden version is also recorded as a prefix of
its chain (tags ``golden_records``, ``golden_head``) and the full ranked list per case is kept
(``run.trec``), so a later run on a grown golden set can be compared on this run's cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from ..config import project_root
from ..redaction import redact_obj, redact_text
from .execution import execution_tags
from .ownership import owner_tags

PARENT_ENV = "RAG_EXP_PARENT_RUN_ID"


def tracking_uri(explicit: str | None = None) -> str:
    """Explicit > $MLFLOW_TRACKING_URI > sqlite:///<project>/mlruns/mlflow.db (absolute, so
    Hydra's per-job folders never scatter runs)."""
    uri = explicit or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    (project_root() / "mlruns").mkdir(parents=True, exist_ok=True)
    return tracking_uri_default()


def tracking_uri_default() -> str:
    return f"sqlite:///{project_root() / 'mlruns' / 'mlflow.db'}"


def artifact_root() -> str:
    return (project_root() / "mlruns" / "artifacts").as_uri()


def setup(uri: str | None, experiment: str) -> str:
    """Point MLflow at the store and make sure the experiment exists; return its id."""
    import mlflow

    from ..errors import UserError
    from .server import unreachable_reason

    # Decide before set_tracking_uri: it exports MLFLOW_TRACKING_URI, which would make every
    # store look user-chosen. Only our own sqlite default gets an explicit artifact folder
    # (mlruns/artifacts); a user's server keeps its own artifact root.
    user_chose = bool(uri or os.environ.get("MLFLOW_TRACKING_URI"))
    resolved = tracking_uri(uri)
    if why := unreachable_reason(resolved):
        raise UserError(f"the MLflow tracking server at {resolved} does not answer: {why}",
                        hint="start it (mlflow server ...) or fix MLFLOW_TRACKING_URI / tracking.uri")
    if not user_chose or resolved == tracking_uri_default():
        location = artifact_root()
    else:
        location = None
    mlflow.set_tracking_uri(resolved)
    _reap(resolved)
    exp = mlflow.get_experiment_by_name(experiment)
    if exp is not None:
        mlflow.set_experiment(experiment_id=exp.experiment_id)
        return exp.experiment_id
    try:
        exp_id = mlflow.create_experiment(experiment, artifact_location=location)
    except Exception:  # noqa: BLE001 - a parallel job created it first
        exp = mlflow.get_experiment_by_name(experiment)
        if exp is None:
            raise
        exp_id = exp.experiment_id
    mlflow.set_experiment(experiment_id=exp_id)
    return exp_id


def _reap(uri: str) -> None:
    """Close the runs left RUNNING by a dead process of this host (once per store and process)."""
    from mlflow.tracking import MlflowClient

    from .ownership import reap_dead_runs

    reap_dead_runs(MlflowClient(tracking_uri=uri), uri)


def redact(obj: Any, key: str = "") -> Any:
    """Config with secrets removed: API keys/passwords blanked, DB URL passwords masked
    (:func:`rag_experiments.redaction.redact_obj`)."""
    return redact_obj(obj, key)


def safe_tags(tags: dict[str, str]) -> dict[str, str]:
    """Tag values as MLflow may store them: every secret masked (a run name built from
    overrides, an error message quoting a connection string)."""
    return {k: redact_text(str(v)) for k, v in tags.items()}


def flatten(obj: Any, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}."))
    else:
        out[prefix[:-1]] = json.dumps(obj) if isinstance(obj, (list, dict)) else str(obj)
    return out


def git_state() -> dict[str, str]:
    root = project_root()
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": "unknown", "git_dirty": "unknown"}
    return {"git_commit": commit or "unknown", "git_dirty": str(bool(dirty)).lower()}


def per_case_for_mlflow(per_case: pd.DataFrame) -> pd.DataFrame:
    """The per-case table as logged: list columns stay lists (log_table writes JSON)."""
    return per_case.copy()


def log_experiment(result, config_dict: dict, *, run_name: str | None, extra_tags: dict[str, str] | None = None,
                   plots: bool = True, log_per_case: bool = True, judge_validation: dict | None = None,
                   ci: dict | None = None) -> str:
    """Log one finished experiment as an MLflow run (a child when a sweep parent exists)."""
    import mlflow

    s = result.settings
    exp_id = setup(s.tracking.get("uri"), s.tracking.get("experiment", "rag-experiments"))
    safe_config = redact(config_dict)
    tags = {
        "variant": s.retrieval.variant,
        "strategy": result.strategy["strategy_id"],
        "chunking": s.chunking.name,
        "embedding_model": result.embedding_model,
        "golden_set": Path(s.golden_path).name,
        **golden_version_tags(result.golden),  # golden_sha256 + golden_records/golden_head (the prefix)
        "corpus_digest": result.corpus_manifest["digest"],
        "eval_level": s.eval_level,
        "ingest.built": str(not result.ingest.unchanged).lower(),
        **git_state(),
        **execution_tags(),
        **owner_tags(),
    }
    if judge_validation is not None:
        status = judge_validation.get("status")  # validated | NOT-VALIDATED | no-machine-labels, as written
        tags["labels_validated"] = str(status) if status else str(bool(judge_validation.get("validated"))).lower()
    parent = os.environ.get(PARENT_ENV)
    if parent:
        tags["mlflow.parentRunId"] = parent
    tags.update(extra_tags or {})
    tags = safe_tags(tags)
    run_name = redact_text(run_name) if run_name else run_name
    with warnings.catch_warnings(), mlflow.start_run(experiment_id=exp_id, run_name=run_name, tags=tags) as run:
        # MLflow warns about dataset-source ambiguity and integer schema columns: noise here
        warnings.simplefilter("ignore", UserWarning)
        params = flatten(safe_config)
        items = list(params.items())
        for lo in range(0, len(items), 90):  # MLflow caps a log_params batch at 100
            mlflow.log_params(dict(items[lo : lo + 90]))
        mlflow.log_text(_to_yaml(safe_config), "config.yaml")
        metrics = {k: v for k, v in result.eval.metrics.items()}
        metrics.update({f"time.{k}": v for k, v in result.timings.items()})
        metrics.update({f"cache.{k}": float(v) for k, v in result.cache.items()})
        metrics.update(getattr(result, "usage", {}))  # paid API tokens and cost: embedding.*, rerank.*
        metrics.update({f"golden.anchors.{k}": float(v) for k, v in result.golden.anchor_counts().items()})
        metrics["golden.excluded_all_stale"] = float(len(result.eval.excluded))
        failed = getattr(result, "failed", {})
        metrics["retrieval.failed_queries"] = float(len(failed))
        metrics.update({f"golden.drift.{k}": float(v) for k, v in getattr(result, "drift", {}).items()})
        if ci:
            metrics.update(ci)
        mlflow.log_metrics(metrics)
        _log_datasets(result)
        if log_per_case and not result.eval.per_case.empty:
            mlflow.log_table(per_case_for_mlflow(result.eval.per_case), artifact_file="per_case.json")
        log_run_file(result, run_name)
        if result.eval.excluded:
            mlflow.log_dict({"all_stale_cases": list(result.eval.excluded)}, "golden_excluded.json")
        if failed:  # excluded from the metrics, never scored as misses
            mlflow.set_tag("retrieval_failed_queries", str(len(failed)))
            mlflow.log_dict({"failed_cases": failed}, "retrieval_failures.json")
        mlflow.log_dict(result.corpus_manifest, "corpus_manifest.json")
        if judge_validation is not None:
            mlflow.log_dict(judge_validation, "judge_validation.json")
        if plots and not result.eval.per_case.empty:
            from .plots import log_run_plots

            log_run_plots(result.eval.per_case)
        return run.info.run_id


def golden_version_tags(golden) -> dict[str, str]:
    """The golden version as a prefix of its chain (see rag_experiments.golden.versions)."""
    from ..golden.versions import GoldenVersion

    return GoldenVersion.of(golden).tags()


def log_run_file(result, run_name: str | None) -> None:
    """The full ranked list per case (``run.trec``), so the run can be rescored against another
    golden version without retrieving again (rag_experiments.evaluation.rescore)."""
    import mlflow

    from ..evaluation.runfile import ARTIFACT, run_file_text

    results = getattr(result, "results", None)
    if results:
        mlflow.log_text(run_file_text(results, run_name or "rag-exp"), ARTIFACT)


def _retrying(fn, *args, attempts: int = 5, **kwargs):
    """Parallel sweep jobs (hydra/launcher=joblib) log the same golden/corpus dataset at the same
    moment; the store's unique index lets one insert win and the other fail. Retrying finds the
    row the winner wrote. Also rides out sqlite's transient 'database is locked'."""
    import time as _time

    from mlflow.exceptions import MlflowException

    for attempt in range(attempts):
        try:
            return fn(*args, **kwargs)
        except MlflowException as exc:
            text = str(exc)
            if attempt == attempts - 1 or not ("UNIQUE constraint" in text or "locked" in text
                                                or "IntegrityError" in text or "UniqueViolation" in text):
                raise
            _time.sleep(0.2 * (attempt + 1))


def _log_datasets(result) -> None:
    import mlflow

    golden_df = pd.DataFrame([
        {"case_id": c.case_id, "query": c.query, "kind": c.kind, "doc_type": c.doc_type,
         "n_relevant": len(c.relevant)} for c in result.golden.cases
    ])
    golden_ds = mlflow.data.from_pandas(golden_df, source=str(result.golden.path),
                                        name=f"golden:{Path(result.golden.path).stem}",
                                        digest=result.golden.digest[:36])
    _retrying(mlflow.log_input, golden_ds, context="golden")
    docs = result.corpus_manifest["documents"]
    corpus_df = pd.DataFrame({"doc_id": list(docs), "content_hash": list(docs.values())})
    corpus_ds = mlflow.data.from_pandas(corpus_df, source=str(result.settings.corpus_path),
                                        name=f"corpus:{result.strategy['corpus']}",
                                        digest=result.corpus_manifest["digest"][:36])
    _retrying(mlflow.log_input, corpus_ds, context="corpus")


def _to_yaml(obj: dict) -> str:
    import yaml

    return yaml.safe_dump(obj, sort_keys=False)
