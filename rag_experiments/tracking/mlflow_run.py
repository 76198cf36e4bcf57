"""Everything a run logs to MLflow, in one place.

Per run: the resolved config as flattened params and as a YAML artifact (secrets redacted),
the headline metrics and their segments (MLflow rejects ``@``: ``recall_at_5``,
``recall_at_5.exact``; see :mod:`.run_record` for what is a metric and what goes to
``intervals.json`` / ``diagnostics.json``), the per-case table (``log_table``), the golden set
and the corpus as input datasets whose digests are the golden file's sha256 and the corpus
manifest digest, git commit and dirty flag, and tags for variant, strategy, objective and label
validation. The golden version is also recorded as a prefix of its chain (tags
``golden_records``, ``golden_head``) and the full ranked list per case is kept (``run.trec``),
so a later run on a grown golden set can be compared on this run's cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time as _time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml

from ..errors import UserError
from ..evaluation.runfile import ARTIFACT, run_file_text
from ..golden.versions import LINES_ARTIFACT, GoldenVersion, line_hashes_text
from ..paths import artifact_root, default_tracking_uri, project_root, tracking_uri
from ..redaction import redact_obj, redact_text
from ..retrieval.systems import owned_config
from . import run_record as R
from .execution import execution_tags
from .ownership import owner_tags, reap_dead_runs
from .server import check_store, open_store
from .ui_links import VIEW_TAG, runs_route, view_state

if TYPE_CHECKING:  # the annotation only: tracking sits above experiment, nothing imported at run time
    from ..experiment import ExperimentResult

PARENT_ENV = "RAG_EXP_PARENT_RUN_ID"


def setup(uri: str | None, experiment: str) -> str:
    """Point MLflow at the store and make sure the experiment exists; return its id."""
    import mlflow

    # Decide before set_tracking_uri: it exports MLFLOW_TRACKING_URI, which would make every
    # store look user-chosen. Only our own sqlite default gets an explicit artifact folder
    # (mlruns/artifacts); a user's server keeps its own artifact root.
    user_chose = bool(uri or os.environ.get("MLFLOW_TRACKING_URI"))
    resolved = tracking_uri(uri)
    check_store(resolved)  # a server that is down, a database refusing the password: one line, at once
    if resolved.startswith(("file:", "/", "./", "../")) and os.environ.get("MLFLOW_ALLOW_FILE_STORE") != "true":
        # MLflow 3.17 refuses its file store with a 30-line traceback, after the run's work is done
        raise UserError(f"tracking.uri: {resolved} is MLflow's file store, which this MLflow refuses "
                        "(maintenance mode)", hint="use sqlite:///path/to/mlflow.db (the default store is "
                        "sqlite under mlruns/), or set MLFLOW_ALLOW_FILE_STORE=true")
    if not user_chose or resolved == default_tracking_uri():
        location = artifact_root()
    else:
        location = None
    mlflow.set_tracking_uri(resolved)
    open_store(resolved, check=False)  # a fresh sqlite store: created and migrated by one process at a time
    _reap(resolved)
    exp = mlflow.get_experiment_by_name(experiment)
    if exp is not None:
        missing = {k: v for k, v in EXPERIMENT_TAGS.items() if exp.tags.get(k) is None}  # an older store
        if missing:
            from mlflow.tracking import MlflowClient

            for k, v in missing.items():
                MlflowClient().set_experiment_tag(exp.experiment_id, k, v)
        mlflow.set_experiment(experiment_id=exp.experiment_id)
        return exp.experiment_id
    try:
        exp_id = mlflow.create_experiment(experiment, artifact_location=location, tags=EXPERIMENT_TAGS)
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

    reap_dead_runs(MlflowClient(tracking_uri=uri), uri)


#: MLflow 3's UI opens an experiment of unknown kind on its GenAI overview (traces, prompts);
#: declaring the kind makes it open on the runs table ("Model training"), where sweeps are.
#: the shared view the printed runs link opens (headline metrics as columns, :mod:`.ui_links`)
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development", VIEW_TAG: view_state()}


def runs_view_url(base: str, experiment_id: str) -> str:
    """The MLflow UI's runs table of one experiment (the page to compare sweeps on), in the UI's
    "Model training" mode (:mod:`.ui_links`)."""
    return f"{base.rstrip('/')}/{runs_route(experiment_id)}"


def print_ui_url(base: str, experiment: str = "rag-experiments") -> None:
    """``make ui``: the runs-view URL of the project's experiment (created if missing, so the id
    is known before the first run)."""
    exp_id = setup(None, experiment)
    print(f"MLflow UI, runs of {experiment!r}: {runs_view_url(base, exp_id)}")


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
    """The project tree's commit and whether tracked files differ from it. ``unknown`` for what
    git cannot say (no git, not a repository, a repository without a commit): a failed ``git
    status`` prints nothing, which read as a clean tree (``git_dirty=false``) before."""
    unknown = {"git_commit": "unknown", "git_dirty": "unknown"}
    root = project_root()
    try:
        head = subprocess.run(["git", "rev-parse", "--verify", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=5)
        if head.returncode != 0 or not head.stdout.strip():
            return unknown
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return unknown
    dirty = "unknown" if status.returncode != 0 else str(bool(status.stdout.strip())).lower()
    return {"git_commit": head.stdout.strip(), "git_dirty": dirty}


def per_case_for_mlflow(per_case: pd.DataFrame) -> pd.DataFrame:
    """The per-case table as logged: list columns stay lists (log_table writes JSON)."""
    return per_case.copy()


def log_experiment(result: ExperimentResult, config_dict: dict, *, run_name: str | None, extra_tags: dict[str, str] | None = None,
                   plots: bool = True, log_per_case: bool = True, judge_validation: dict | None = None,
                   ci: dict | None = None, plot_pngs: dict[str, bytes] | None = None) -> str:
    """Log one finished experiment as an MLflow run (a child when a sweep parent exists).

    Batched: the run is created with its tags, then params, metrics and the remaining tags go
    in one ``log_batch`` request (a sweep point used to make a request per ``log_params`` chunk,
    per metric group and per tag), then the artifacts. What is a metric and what goes to
    ``diagnostics.json`` / ``intervals.json``: :mod:`rag_experiments.tracking.run_record`.
    ``plot_pngs``: the plots already drawn (:func:`rag_experiments.tracking.plots.run_plot_pngs`).
    """
    from mlflow.tracking import MlflowClient

    s = result.settings
    exp_id = setup(s.tracking.uri, s.tracking.experiment)
    safe_config = redact(_without_unused_llm(_only_the_variants_own(config_dict)))
    tags = {
        "variant": s.retrieval.variant,
        "strategy": result.strategy.strategy_id,
        "corpus.language": result.strategy.language,  # the keyword leg's text search configuration
        "chunking": s.chunking.name,
        "embedding_model": result.embedding_model,
        "golden_set": s.golden.file.name,
        **golden_version_tags(result.golden),  # golden_sha256 + golden_records/golden_head (the prefix)
        "corpus_digest": result.corpus_manifest["digest"],
        "eval_level": s.eval.level,
        "ingest.built": str(not result.ingest.unchanged).lower(),
        # how many of the texts built had their vectors read from the demo's shipped file, not embedded
        "ingest.shipped_vectors": str(result.ingest.shipped_vectors),
        "objective": s.objective,
        **git_state(),
        **execution_tags(),
        **owner_tags(),
    }
    copies = result.corpus_manifest.get("copies")  # corpus.copies: the list is in corpus_manifest.json
    if copies:
        tags["corpus.copies_found"] = str(copies["n_copies"])
    if judge_validation is not None:
        status = judge_validation.get("status")  # validated | NOT-VALIDATED | no-machine-labels, as written
        tags["labels_validated"] = str(status) if status else str(bool(judge_validation.get("validated"))).lower()
    parent = os.environ.get(PARENT_ENV)
    if parent:
        tags["mlflow.parentRunId"] = parent
    diag = R.diagnostics(result.timings, result.cache, result.golden.anchor_counts(), result.drift,
                         len(result.eval.excluded), result.eval.metrics)
    if result.golden_quality:
        diag["golden"]["quality"] = result.golden_quality  # is the golden set any good (golden.quality)
    tags.update(R.diagnostic_tags(diag))
    tags.update(result.external_tags)  # a team's system: its answer cache's check (external.cache_check)
    tags.update(extra_tags or {})
    tags = safe_tags(tags)
    run_name = redact_text(run_name) if run_name else run_name
    intervals = ci or {}
    metrics = R.run_metrics(result.eval.metrics, result.eval.headline or s.eval.metric_names(), s.objective,
                            intervals, s.tracking.log_intervals)
    metrics.update(result.usage)  # paid API tokens and cost: embedding.*, rerank.*
    metrics.update(result.external)  # a team's system: alignment.*, its own latency
    failed = result.failed
    metrics["retrieval.failed_queries"] = float(len(failed))  # excluded from the metrics, never scored as misses
    unanswered = result.eval.unanswered  # imported queries no label answers yet: not scored
    if unanswered:
        metrics["golden.unanswered_queries"] = float(len(unanswered))
    tables = {}
    if log_per_case and not result.eval.per_case.empty:
        tables["per_case.json"] = per_case_for_mlflow(result.eval.per_case)
    if intervals:
        tables[R.INTERVALS_ARTIFACT] = R.intervals_frame(intervals)
    if log_per_case and not result.eval.per_case.empty:
        # the questions that failed, on one page (the per-case table holds every case)
        tables[R.FAILURES_ARTIFACT] = R.failures_frame(result.eval.per_case, s.objective, s.eval.depth_needed)
    if tables:
        tags[LOGGED_ARTIFACTS_TAG] = json.dumps([{"path": p, "type": "table"} for p in tables])
    if failed:
        tags["retrieval_failed_queries"] = str(len(failed))
    client = MlflowClient()
    # the run starts when the work began (retrieval, evaluation), so its duration brackets it
    run_id = create_run(client, exp_id, run_name, tags, result.started_at)
    try:
        with warnings.catch_warnings():
            # MLflow warns about dataset-source ambiguity and integer schema columns: noise here
            warnings.simplefilter("ignore", UserWarning)
            log_batch(client, run_id, params=flatten(safe_config), metrics=metrics)
            _log_datasets(client, run_id, result)
            files = {"config.yaml": _to_yaml(safe_config)}
            files.update({path: table_json(frame) for path, frame in tables.items()})
            files.update(run_file_artifact(result, run_name))
            files[R.DIAGNOSTICS_ARTIFACT] = dict_json(diag)
            if result.eval.excluded or unanswered:
                files["golden_excluded.json"] = dict_json({"all_stale_cases": list(result.eval.excluded),
                                                           "unanswered_cases": list(unanswered)})
            if failed:
                files["retrieval_failures.json"] = dict_json({"failed_cases": failed})
            files["corpus_manifest.json"] = dict_json(result.corpus_manifest)
            files.update(golden_lines_artifact(result.golden))
            if result.alignment_failures:
                files["alignment_failures.json"] = dict_json({"unplaced_passages": result.alignment_failures})
            if judge_validation is not None:
                files["judge_validation.json"] = dict_json(judge_validation)
            log_files(client, run_id, files)
            if plots and not result.eval.per_case.empty:
                from .plots import log_run_plots

                log_run_plots(result.eval.per_case, client=client, run_id=run_id, pngs=plot_pngs)
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    return run_id


#: the run tag MLflow's UI reads to show a JSON artifact as a table (what ``log_table`` sets)
LOGGED_ARTIFACTS_TAG = "mlflow.loggedArtifacts"


def table_json(frame: pd.DataFrame) -> str:
    """What ``MlflowClient.log_table`` writes (pandas' ``split`` JSON)."""
    return frame.to_json(orient="split", index=False, date_format="iso")


def dict_json(d: dict) -> str:
    """What ``MlflowClient.log_dict`` writes for a ``.json`` file."""
    return json.dumps(d, indent=2, default=str)


def log_files(client, run_id: str, files: dict[str, str]) -> None:
    """Text artifacts (relative path -> content) in one upload: a sweep point's nine files were
    nine ``log_text``/``log_dict`` calls, each with its own temporary folder and store round trip."""
    with tempfile.TemporaryDirectory(prefix="rag_exp_artifacts_") as tmp:
        for rel, text in files.items():
            path = Path(tmp) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        client.log_artifacts(run_id, tmp)


def create_run(client, experiment_id: str, run_name: str | None, tags: dict[str, str],
               started_at: float | None = None) -> str:
    """A RUNNING run with ``tags`` plus the context tags ``mlflow.start_run`` would add (source
    name and type, user, git commit), so runs created through the client look like any other.
    ``started_at`` (epoch seconds): when the work it records began (default: now)."""
    from mlflow.tracking.context.registry import resolve_tags

    start_ms = int(started_at * 1000) if started_at is not None else None
    run = client.create_run(experiment_id, run_name=run_name, tags=resolve_tags(tags, ignore=_no_git_context()),
                            start_time=start_ms)
    return run.info.run_id


def _no_git_context() -> list:
    """MLflow's git context (tags ``mlflow.source.git.*``) when it can only find nothing: it looks
    for a repository at ``sys.argv[0]``, which under ``rag-exp run`` is the program name Hydra shows
    (``rag-exp run``), no path, so GitPython raises and no tag is set; importing GitPython to learn
    that cost the logging process 25-40 ms (issue 44 item 8). A path that exists is looked up as
    before (``python run.py`` in a repository gets the tags). The run's own ``git_commit`` and
    ``git_dirty`` tags come from :func:`git_state`."""
    from mlflow.tracking.context.git_context import GitRunContext

    main = sys.argv[0] if sys.argv and sys.argv[0] else None  # what MLflow's context reads (_get_main_file)
    return [] if main is not None and os.path.exists(main) else [GitRunContext]


def log_batch(client, run_id: str, params: dict[str, str] | None = None, metrics: dict[str, float] | None = None,
              tags: dict[str, str] | None = None) -> None:
    """Params, metrics and tags in as few requests as MLflow's batch limits allow (100 params,
    1000 entities per request)."""
    from mlflow.entities import Metric, Param, RunTag

    now = int(_time.time() * 1000)
    p = [Param(k, str(v)[:6000]) for k, v in (params or {}).items()]
    m = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items()]
    t = [RunTag(k, str(v)) for k, v in (tags or {}).items()]
    while p or m or t:
        bp, p = p[:100], p[100:]
        room = 1000 - len(bp)
        bt, t = t[:min(100, room)], t[min(100, room):]
        room -= len(bt)
        bm, m = m[:room], m[room:]
        client.log_batch(run_id, metrics=bm, params=bp, tags=bt)


def _only_the_variants_own(config: dict) -> dict:
    """The config without the knobs of retrievers this run did not use (what each system owns:
    :func:`rag_experiments.retrieval.systems.owned_config`)."""
    retrieval = config.get("retrieval") if isinstance(config, dict) else None
    if not isinstance(retrieval, dict):
        return config
    return {**config, "retrieval": owned_config(retrieval)}


def _without_unused_llm(config: dict) -> dict:
    """The config without the ``llm`` node when the run calls no LLM (neither ``rerank=llm`` nor
    a query rewrite): otherwise every run would log ``llm.provider`` / ``base_url`` / ``price``,
    and a run from before the node existed would differ from today's by three knobs it never
    used (compare labels runs by the knobs that differ)."""
    if not isinstance(config, dict) or "llm" not in config:
        return config
    rerank = config.get("rerank") if isinstance(config.get("rerank"), dict) else {}
    query = config.get("query") if isinstance(config.get("query"), dict) else {}
    if rerank.get("name") == "llm" or query.get("rewrite") not in (None, "none"):
        return config
    return {k: v for k, v in config.items() if k != "llm"}


def golden_lines_artifact(golden) -> dict[str, str]:
    """Each line's hash of the golden version scored, so a comparison with a file that is not a
    continuation of it can name the first line that differs (rag_experiments.golden.versions)."""
    text = line_hashes_text(golden.path, GoldenVersion.of(golden))
    return {LINES_ARTIFACT: text} if text is not None else {}


def golden_version_tags(golden) -> dict[str, str]:
    """The golden version as a prefix of its chain (see rag_experiments.golden.versions)."""
    return GoldenVersion.of(golden).tags()


def run_file_artifact(result, run_name: str | None) -> dict[str, str]:
    """The full ranked list per case (``run.trec``), so the run can be rescored against another
    golden version without retrieving again (rag_experiments.evaluation.rescore)."""
    results = result.results
    return {ARTIFACT: run_file_text(results, run_name or "rag-exp")} if results else {}


def _retrying(fn, *args, attempts: int = 5, **kwargs):
    """Parallel sweep jobs (hydra/launcher=joblib) log the same golden/corpus dataset at the same
    moment; the store's unique index lets one insert win and the other fail. Retrying finds the
    row the winner wrote. Also rides out sqlite's transient 'database is locked'."""
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


def _log_datasets(client, run_id: str, result) -> None:
    """The golden set and the corpus as the run's input datasets, in one request."""
    _retrying(client.log_inputs, run_id, _dataset_inputs(result))


_DATASET_INPUTS: dict[tuple, list] = {}


def _dataset_inputs(result) -> list:
    """The two dataset entities, built once per golden version and corpus (a sweep's points
    share them: building one hashes and serialises the whole frame)."""
    import mlflow
    from mlflow.entities import DatasetInput, InputTag

    key = (str(result.golden.path), result.golden.digest, len(result.golden.cases), str(result.settings.corpus.path),
           result.strategy.corpus, result.corpus_manifest["digest"])
    if key in _DATASET_INPUTS:
        return _DATASET_INPUTS[key]
    golden_df = pd.DataFrame([
        {"case_id": c.case_id, "query": c.query, "kind": c.kind, "doc_type": c.doc_type,
         "n_relevant": len(c.relevant)} for c in result.golden.cases
    ])
    golden_ds = mlflow.data.from_pandas(golden_df, source=str(result.golden.path),
                                        name=f"golden:{Path(result.golden.path).stem}",
                                        digest=result.golden.digest[:36])
    docs = result.corpus_manifest["documents"]
    corpus_df = pd.DataFrame({"doc_id": list(docs), "content_hash": list(docs.values())})
    corpus_ds = mlflow.data.from_pandas(corpus_df, source=str(result.settings.corpus.path),
                                        name=f"corpus:{result.strategy.corpus}",
                                        digest=result.corpus_manifest["digest"][:36])
    inputs = [DatasetInput(ds._to_mlflow_entity(), [InputTag("mlflow.data.context", context)])
              for ds, context in ((golden_ds, "golden"), (corpus_ds, "corpus"))]
    _DATASET_INPUTS.clear()  # one entry: a process evaluates one golden set and corpus at a time
    _DATASET_INPUTS[key] = inputs
    return inputs


def _to_yaml(obj: dict) -> str:
    return yaml.safe_dump(obj, sort_keys=False)
