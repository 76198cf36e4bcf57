"""``hydra/launcher=ray``: the Hydra Ray launcher plugin's job body (``hydra-ray-launcher``), with three
things a sweep on a shared cluster needs that the plugin leaves out.

* **Environment.** Ray workers are started by their raylet, not by the process that runs
  the sweep, so they do not inherit ``DATABASE_URL``, ``MLFLOW_TRACKING_URI``, ``RAG_EXP_HOME``
  or the sweep's parent-run id. Each job carries them as an argument of its task (task
  arguments live in Ray's object store, never in its logs) and sets them before it runs.
* **Pre-flight.** Before any point is submitted: the cluster must answer, the tracking server
  must answer, and every node must reach the database and the tracking server. Each failure is
  one line naming what is unreachable from where, and the sweep stops (exit 2) with its parent
  run closed, never a traceback or a run left RUNNING.
* **Partial failure.** The plugin gathers results with ``ray.get`` in submission order, so one
  lost node aborts the whole sweep while the other points are still running. Here results are
  gathered as they complete; a point whose worker or node died ends as a FAILED job whose
  MLflow child is marked FAILED (or created FAILED if it died before logging), the others
  finish, and the parent run counts the failures (:mod:`..tracking.hydra_callback`). Ray's own
  task retries are off by default (``max_retries: 0``), so a lost point is reported, not
  silently re-run elsewhere; re-running the sweep recomputes only what is missing, because every
  expensive step is cached in the shared database.

Hydra instantiates launchers only from the ``hydra_plugins`` namespace, hence this module's home;
the rest of the scale-out code is in :mod:`rag_experiments.scale`.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)

# What a job needs from the submitting process's environment (values never logged).
FORWARDED_ENV = ("DATABASE_URL", "MLFLOW_TRACKING_URI", "RAG_EXP_HOME", "RAG_EXP_PARENT_RUN_ID",
                 "ANTHROPIC_API_KEY", "VOYAGE_API_KEY", "OPENAI_API_KEY", "CO_API_KEY", "COHERE_API_KEY",
                 "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


#: extra names to forward, comma-separated: what a team's own retriever reads on the workers
#: (its credentials, retrieval.http.auth_env's variable, its index location)
FORWARD_ENV_VAR = "RAG_EXP_FORWARD_ENV"


def _forwarded_env() -> dict[str, str]:
    from rag_experiments.paths import project_root

    extra = tuple(n.strip() for n in os.environ.get(FORWARD_ENV_VAR, "").split(",") if n.strip())
    env = {k: os.environ[k] for k in (*FORWARDED_ENV, *extra, FORWARD_ENV_VAR) if k in os.environ}
    env.setdefault("RAG_EXP_HOME", str(project_root()))
    return env


def _run_job_with_env(env: dict[str, str], *args: Any) -> JobReturn:
    # the plugin's job body (imported here: Hydra scans this module even without the [ray] extra)
    from hydra_plugins.hydra_ray_launcher._launcher_util import _run_job

    os.environ.update(env)
    return _run_job(*args)


class RayLauncher(Launcher):
    """Registered as ``hydra/launcher=ray`` by ``conf/hydra/launcher/ray.yaml``; same options as
    the plugin's launcher (``ray.init``, ``ray.remote``)."""

    def __init__(self, ray: DictConfig) -> None:
        self.ray_cfg = ray
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None
        self.config: DictConfig | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        try:
            import ray
        except ImportError:
            print("error: hydra/launcher=ray needs the [ray] extra: pip install -e '.[ray]'", file=sys.stderr)
            sys.exit(2)

        from rag_experiments.scale.cluster import connect

        from ._ray_preflight import preflight

        setup_globals()
        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        # Resolved here, once: a worker would resolve ${now:...} to its own time, and a relative
        # folder against its raylet's working folder.
        sweep_dir = Path(str(self.config.hydra.sweep.dir)).absolute()
        sweep_dir.mkdir(parents=True, exist_ok=True)
        init = OmegaConf.to_container(self.ray_cfg.init, resolve=True) or {}
        env = _forwarded_env()
        try:
            connect(init)
            preflight(env)
        except Exception as exc:  # noqa: BLE001 - any failure here is the user's setup: one line
            from rag_experiments.errors import UserError

            msg = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
            print(f"error: {msg}", file=sys.stderr)
            sys.exit(2)

        remote_opts = OmegaConf.to_container(self.ray_cfg.remote, resolve=True) or {}
        remote_fn = ray.remote(**remote_opts)(_run_job_with_env) if remote_opts else ray.remote(_run_job_with_env)
        log.info(f"Ray launcher: {len(job_overrides)} jobs on {ray.get_runtime_context().gcs_address}, "
                 f"sweep output dir: {sweep_dir}")
        pending: dict[Any, tuple[int, list[str], Any]] = {}
        for offset, overrides in enumerate(job_overrides):
            idx = initial_job_idx + offset
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            sweep_config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(sweep_config):
                sweep_config.hydra.job.id = f"ray_{idx}"
                sweep_config.hydra.job.num = idx
                sweep_config.hydra.sweep.dir = str(sweep_dir)
            ref = remote_fn.remote(env, self.hydra_context, sweep_config, self.task_function,
                                   Singleton.get_state())
            pending[ref] = (offset, list(overrides), sweep_config)

        results: list[JobReturn | None] = [None] * len(job_overrides)
        lost: list[str] = []
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            offset, overrides, sweep_config = pending.pop(ref)
            try:
                results[offset] = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a lost worker or node: the point failed
                from rag_experiments.redaction import redact_text
                from ._lost_points import finished_run, record_lost_point

                parent_id = env.get("RAG_EXP_PARENT_RUN_ID")
                if done_id := finished_run(sweep_config, parent_id):
                    log.warning(f"sweep point #{sweep_config.hydra.job.num}: its worker died after its run "
                                f"{done_id} FINISHED; the point counts as done")
                    results[offset] = JobReturn(overrides=overrides, cfg=sweep_config, hydra_cfg=sweep_config,
                                                working_dir=str(sweep_dir), task_name=sweep_config.hydra.job.name,
                                                status=JobStatus.COMPLETED, _return_value=None)
                    continue
                run_id = record_lost_point(sweep_config, overrides, exc, parent_id)
                lost.append(f"sweep point #{sweep_config.hydra.job.num} ({redact_text(' '.join(overrides))}) was "
                            f"lost with its Ray worker or node ({type(exc).__name__}); its run {run_id} is FAILED")
                results[offset] = JobReturn(overrides=overrides, cfg=sweep_config, hydra_cfg=sweep_config,
                                            working_dir=str(sweep_dir), task_name=sweep_config.hydra.job.name,
                                            status=JobStatus.FAILED, _return_value=exc)
        if lost:
            # Hydra would re-raise the first lost point's Ray error with a traceback; say it plainly.
            # The sweep callback's exit guard closes the parent run FAILED with the failure count.
            for line in lost:
                print(f"error: {line}", file=sys.stderr)
            print(f"error: {len(lost)} of {len(job_overrides)} sweep points lost; the others finished. Re-run the "
                  "same sweep to compute only what is missing (everything done is cached).", file=sys.stderr)
            sys.exit(1)
        return results  # type: ignore[return-value]
