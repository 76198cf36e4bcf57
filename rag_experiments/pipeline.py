"""The pipeline layer: Hydra config in, MLflow run and summary table out.

The only layer (with ``tracking``) that touches hydra, omegaconf and mlflow; it converts the
composed config into typed settings, runs :func:`rag_experiments.experiment.run_experiment`,
logs the run and returns the objective (so ``hydra/sweeper=optuna`` can maximise it; on the dev cases
when the golden set has a frozen split, :mod:`.tracking.held_out`).
"""

from __future__ import annotations

import os
import sys

from omegaconf import DictConfig, OmegaConf

from .config import Settings, settings_from_cfg
from .db.embedded import install_sigterm_handler
from .errors import UserError
from .experiment import ExperimentResult, run_experiment
from .overlap import run_overlapped
from .paths import artifact_root, tracking_uri
from .redaction import redact_text
from .report import point_line, print_summary
from .retrieval.systems import system_type
from .tracking.store_space import out_of_space, quiet_store_full_logs, store_full_line


def _in_multirun() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.get().mode == RunMode.MULTIRUN
    except Exception:  # noqa: BLE001 - not under Hydra (tests calling directly)
        return False


def _run_name(cfg: DictConfig, settings: Settings) -> str:
    """The run name: the user's, else the overrides (secrets masked: a db.url override carries
    a password), else variant and chunking."""
    if settings.run_name:
        return redact_text(settings.run_name)
    try:
        from hydra.core.hydra_config import HydraConfig

        overrides = [o for o in HydraConfig.get().overrides.task if not o.startswith("experiment=")]
    except Exception:  # noqa: BLE001
        overrides = []
    return redact_text(" ".join(overrides)) if overrides else f"{settings.retrieval.variant} ({settings.chunking.name})"


def _log_failed_child(cfg: DictConfig, error: BaseException) -> None:
    """A crashing sweep point still leaves a FAILED child under its parent."""
    if not cfg.tracking.enabled:
        return
    import mlflow

    from .tracking.execution import execution_tags
    from .tracking.mlflow_run import PARENT_ENV, redact, setup
    from .tracking.ownership import owner_tags

    exp_id = setup(cfg.tracking.uri, cfg.tracking.experiment)
    tags = {"error": redact_text(f"{type(error).__name__}: {error}")[:5000], **execution_tags(), **owner_tags()}
    if os.environ.get(PARENT_ENV):
        tags["mlflow.parentRunId"] = os.environ[PARENT_ENV]
    with mlflow.start_run(experiment_id=exp_id, run_name=_run_name(cfg, _NoSettings()), tags=tags):
        mlflow.log_dict(redact(OmegaConf.to_container(cfg, resolve=True)), "config.json")
        mlflow.end_run(status="FAILED")


class _NoSettings:
    run_name = None

    class retrieval:  # noqa: N801 - mimics Settings attributes for _run_name
        variant = "failed"

    class chunking:  # noqa: N801
        name = "?"


def _judge_validation(golden_path) -> dict:
    """Whether the LLM judge behind this golden set's labels agrees with a human spot-check."""
    from .golden.spotcheck import judge_validation

    try:
        return judge_validation(golden_path)
    except UserError as exc:
        return {"validated": False, "reason": str(exc)}


def label_status(result: ExperimentResult) -> dict:
    """Judge validation plus a one-word status: labels made by a machine judge (the LLM judge,
    ``llm``, or any other machine such as an AI coding agent, ``agent``) are trusted only after a
    human spot-check agrees (rag-exp golden spotcheck); say so loudly otherwise."""
    from collections import Counter

    from .golden.spotcheck import machine_judged_pairs

    validation = _judge_validation(result.settings.golden.file)
    kinds = Counter(j.judge_kind for j in machine_judged_pairs(result.golden.records))
    n_machine = sum(kinds.values())
    validation["machine_judgements"] = n_machine
    validation["llm_judgements"] = kinds.get("llm", 0)
    validation["agent_judgements"] = kinds.get("agent", 0)
    if n_machine == 0:
        validation["status"] = "no-machine-labels"
    else:
        validation["status"] = "validated" if validation.get("validated") else "NOT-VALIDATED"
    return validation


def log_result(result: ExperimentResult, cfg: DictConfig, run_name: str, validation: dict | None = None,
               plot_pngs: dict[str, bytes] | None = None) -> str | None:
    """Log a finished experiment (``plot_pngs``: its plots already drawn, :func:`overlapped_work`)."""
    s = result.settings
    if not s.tracking.enabled:
        return None
    from .evaluation.intervals import ci_metrics
    from .tracking.mlflow_run import log_experiment

    ci = ci_metrics(result.eval.per_case, list(result.eval.headline), s.eval.bootstrap_samples, s.eval.seed)
    validation = validation or label_status(result)
    config_dict = OmegaConf.to_container(cfg, resolve=True)
    plots = s.tracking.plots and (not _in_multirun() or s.tracking.child_plots)
    extra = {}
    if system_type(s.retrieval.variant).embeds_queries:  # a variant with a vector leg
        # exact or HNSW, and under auto why: an HNSW run's numbers move with the index build
        extra["retrieval.vector.search"] = s.retrieval.vector.describe(result.strategy.n_chunks)
    run_id = log_experiment(
        result, config_dict, run_name=run_name, plots=plots,
        log_per_case=s.tracking.log_per_case,
        judge_validation=validation, ci=ci, extra_tags=extra, plot_pngs=plot_pngs,
    )
    # people's labels on a random sample of cases (golden spotcheck --cases): judge-corrected metrics
    from .evaluation.judge_corrected import judge_corrected
    from .tracking.judge_corrected_log import log_judge_corrected

    corrected = judge_corrected(result.golden, result.results, s.eval, result.eval.per_case)
    log_judge_corrected(run_id, corrected)
    if corrected is not None and not _in_multirun():
        print("\n".join(corrected.lines()))
    return run_id


def warm_tracking_imports(settings: Settings) -> None:
    """Import what :func:`log_result` will need (MLflow, its SQL store for a database URI), so a
    single run pays for them while its work runs (:func:`rag_experiments.overlap.run_overlapped`).
    Not matplotlib: the work process draws the plots (:func:`overlapped_work`)."""
    from .tracking import mlflow_run  # noqa: F401 - imported now, while the work runs

    uri = tracking_uri(settings.tracking.uri)
    import mlflow  # noqa: F401

    if uri.split(":", 1)[0].split("+", 1)[0] in {"sqlite", "postgresql", "mysql", "mssql"}:
        from mlflow.store.tracking import sqlalchemy_store  # noqa: F401
    from .stats import bootstrap  # noqa: F401


def overlapped_work(settings: Settings) -> tuple[ExperimentResult, dict, dict[str, bytes] | None]:
    """What a single run's forked work process does (:mod:`rag_experiments.overlap`): the experiment,
    then what needs only its result, off the logging process's path (which is importing MLflow
    meanwhile, the longer of the two): the label status, and the plots as PNG bytes (None when off
    or when drawing them fails here: the logging process then draws them and fails as it did)."""
    result = run_experiment(settings)
    validation = label_status(result)
    pngs = None
    if settings.tracking.plots and not result.eval.per_case.empty:
        try:
            from .tracking.plots import run_plot_pngs

            pngs = run_plot_pngs(result.eval.per_case)
        except Exception:  # noqa: BLE001 - drawn again while logging, where a failure marks the run FAILED
            pngs = None
    return result, validation, pngs


def _mirror_champion_record() -> None:
    """A fresh store's registry gets the committed champion (a failure here never fails the run)."""
    from .serving.model_logging import ensure_registered

    try:
        ensure_registered("default")
    except Exception as exc:  # noqa: BLE001 - the run is logged; say why the registry is not populated
        print(f"WARNING: the registry was not populated from experiments/promoted/default.record.json "
              f"({type(exc).__name__}: {redact_text(str(exc)).splitlines()[0] if str(exc) else ''}); "
              "`rag-exp serve` or `rag-exp search` will retry", file=sys.stderr)


_WARNED: set = set()


def _first_warning(golden_file) -> bool:
    """A sweep says the labels are unvalidated once (per golden set and process), not per point."""
    key = str(golden_file)
    if key in _WARNED:
        return False
    _WARNED.add(key)
    return True


def _job_identity() -> tuple[int | None, list[str]]:
    """This sweep point's number and overrides (Hydra's runtime config)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        hc = HydraConfig.get()
        return int(hc.job.num), [redact_text(o) for o in hc.overrides.task]
    except Exception:  # noqa: BLE001 - not under Hydra
        return None, []


def run_from_hydra(cfg: DictConfig) -> float:
    install_sigterm_handler()
    quiet_store_full_logs()
    multirun = _in_multirun()
    debug = os.environ.get("HYDRA_FULL_ERROR") == "1"
    try:
        settings = settings_from_cfg(cfg)
        if settings.tracking.enabled and not multirun:
            # the work in a forked child while this process imports what logging needs (overlap.py)
            result, validation, pngs = run_overlapped(lambda: overlapped_work(settings),
                                                      lambda: warm_tracking_imports(settings))
        else:
            result, pngs = run_experiment(settings), None
            validation = label_status(result)
        run_id = log_result(result, cfg, _run_name(cfg, settings), validation, plot_pngs=pngs)
    except UserError as exc:
        if multirun:
            _log_failed_child(cfg, exc)
            raise
        if debug:
            raise
        print(f"error: {redact_text(str(exc))}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except BaseException as exc:
        if multirun and not isinstance(exc, KeyboardInterrupt):
            _log_failed_child(cfg, exc)
        if not multirun and not debug and out_of_space(exc):  # one line, not MLflow's and Hydra's tracebacks
            uri = tracking_uri((cfg.get("tracking") or {}).get("uri"))
            print(f"error: {redact_text(store_full_line(uri, artifact_root()))}", file=sys.stderr)
            sys.exit(2)
        raise
    if multirun:
        print(point_line(result, run_id, *_job_identity()), flush=True)
    else:
        print_summary(result, run_id)
        if run_id is not None:
            _mirror_champion_record()
    # labels drawn by `golden label --sample` / `--budget`: recall@k as IPW estimates with intervals
    from .evaluation.sampled import sampled_metrics

    sampled, sampled_lines, sampled_cases = sampled_metrics(result)
    if sampled and run_id is not None:
        from .tracking.sampled_log import log_sampled

        log_sampled(run_id, sampled, sampled_lines[0], sampled_cases)
    if sampled_lines and not multirun:
        print("\n".join(sampled_lines))
    from .embedding.cost import describe_usage

    usage_line = describe_usage(result.usage)
    if usage_line:
        print(usage_line)
    if result.failed:
        print(f"WARNING: {len(result.failed)} of {len(result.failed) + result.eval.n_cases} queries could not be "
              "searched and are EXCLUDED from the metrics (not scored as misses; MLflow metric "
              "retrieval.failed_queries):", file=sys.stderr)
        for case_id, why in list(result.failed.items())[:10]:
            print(f"  {case_id}: {why}", file=sys.stderr)
    if validation["status"] == "NOT-VALIDATED" and _first_warning(result.settings.golden.file):
        print(f"WARNING: labels_validated=NOT-VALIDATED: {validation['machine_judgements']} labels in "
              f"{result.settings.golden.file.name} come from machine judges ({validation['llm_judgements']} LLM, "
              f"{validation['agent_judgements']} agent) that no human spot-check has validated "
              "(rag-exp golden spotcheck); treat the metrics as provisional.", file=sys.stderr)
    from .tracking.held_out import dev_objective  # a frozen dev/test split: the sweeper chooses on dev

    on_dev = dev_objective(result.eval.per_case, settings.objective, result.settings.golden.file)
    return float(result.eval.metrics.get(settings.objective, float("nan")) if on_dev is None else on_dev)
