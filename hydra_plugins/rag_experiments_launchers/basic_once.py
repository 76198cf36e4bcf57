"""Hydra's basic launcher without a full composition of every sweep point.

``BasicLauncher.launch`` composes each point's config from scratch (``load_sweep_config``: the
defaults tree, ~20 YAML files and the schema merged again), 0.23-0.3 s a point on this
project's config tree: 30 s of a 100-point ``fusion.rrf_k`` x ``fusion.keyword_weight`` sweep
whose points take ~0.4 s each. Points of a sweep usually share their group choices and differ
only in plain ``dotted.key=value`` overrides, so this launcher composes once per distinct set of
the other overrides and, for each point, deep-copies that composition and applies the point's
value overrides the way Hydra applies command-line overrides (``_apply_overrides_to_config``,
through the schema, so a wrong type fails as it would), then sets what Hydra derives from the
overrides (``hydra.overrides.task`` in their order, ``hydra.job.override_dirname``). The result
equals ``load_sweep_config``'s (``tests/test_launcher_composing_once.py`` compares them).

A point with a delete (``~key``) or an append (``+key``) override, or the same key twice, or no
plain value override at all, is composed in full, exactly as Hydra does. Selected by
``conf/hydra/launcher/basic.yaml``; ``hydra/launcher=joblib`` and ``ray`` are unchanged.

``hydra.launcher.n_jobs`` (default ``auto``: 2 on 2 cores or more) runs points in forked workers
(:mod:`.forked`). The first point of a sweep runs in this process first, exactly as in serial: it
warms the memos the workers inherit (embedder, golden set, candidate lists, ingest) and asks any
cost confirmation. Each later point runs in a worker through ``run_job`` (``on_job_start``
there, before the task); its ``JobReturn`` comes back and ``on_job_end`` is called here, in job
order, so callbacks that count or collect (the MLflow sweep callback) see every job; the list
returned is in job order too. ``n_jobs=1``, or no ``os.fork``, is the serial loop unchanged.
"""

from __future__ import annotations

import copy
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import (
    JobReturn,
    JobStatus,
    configure_log,
    filter_overrides,
    run_job,
    setup_globals,
)
from hydra.types import HydraContext
from omegaconf import DictConfig, OmegaConf, open_dict

from . import forked

log = logging.getLogger(__name__)


# The schema of conf/hydra/launcher/basic.yaml. Hydra validates that file against its own
# ``hydra/launcher/basic`` schema (``_target_`` only), stored when its basic_launcher module is
# imported, which happens above: storing ours after it admits ``n_jobs``. (A dict, not a
# dataclass: Hydra's plugin scan executes this module outside sys.modules, where a dataclass
# with postponed annotations cannot be built.)
ConfigStore.instance().store(group="hydra/launcher", name="basic", provider="rag_experiments", node={
    "_target_": "hydra_plugins.rag_experiments_launchers.basic_once.BasicLauncherComposingOnce",
    "n_jobs": "auto",  # a number of worker processes, or "auto"
})


def _is_plain_value(o: Any) -> bool:
    """``a.b=value``: a config value, never a group choice (groups are named with ``/``)."""
    return not (o.is_delete() or o.is_add() or o.is_force_add() or o.is_hydra_override()
                or o.is_sweep_override()) and "." in o.key_or_group and "/" not in o.key_or_group \
        and o.package is None


def _without_hydra(cfg: DictConfig) -> DictConfig:
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def compose_point(loader: Any, master: DictConfig, overrides: Sequence[str], composed: dict,
                  app_only: bool = False) -> DictConfig:
    """The point's config as ``loader.load_sweep_config(master, overrides)`` returns it; compositions
    are shared through ``composed`` between points that differ only in plain value overrides.

    ``app_only``: without the ``hydra`` node (the sweep preflight validates the application's
    config only; the node is most of what each point copies: 7.3 of 7.3 + 2.7 ms a copy here).
    """
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    values = [o for o in parsed if _is_plain_value(o)]
    keys = [o.key_or_group for o in values]
    others_plain = all(not (o.is_delete() or o.is_add() or o.is_force_add()) for o in parsed)
    if not values or len(set(keys)) != len(keys) or not others_plain:
        cfg = loader.load_sweep_config(master, list(overrides))
        return _without_hydra(cfg) if app_only else cfg
    structural = [o.input_line for o in parsed if not _is_plain_value(o)]
    base_key = tuple(structural)
    if base_key not in composed:
        composed[base_key] = loader.load_sweep_config(master, structural)
    if app_only:
        base_key = ("app only", base_key)
        if base_key not in composed:
            composed[base_key] = _without_hydra(copy.deepcopy(composed[base_key[1]]))
    cfg = copy.deepcopy(composed[base_key])
    ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
    if not app_only:
        # what _load_configuration_impl derives from the full override list
        app = [o for o in parsed if not o.is_hydra_override()]
        with open_dict(cfg.hydra):
            cfg.hydra.overrides.task = [o.input_line for o in app]
            cfg.hydra.job.override_dirname = get_overrides_dirname(
                overrides=app,
                kv_sep=cfg.hydra.job.config.override_dirname.kv_sep,
                item_sep=cfg.hydra.job.config.override_dirname.item_sep,
                exclude_keys=cfg.hydra.job.config.override_dirname.exclude_keys,
            )
    OmegaConf.copy_cache(from_config=master, to_config=cfg)
    return cfg


class _JobEndLater:
    """A worker's callbacks: ``on_job_start`` as usual, ``on_job_end`` kept for the launching
    process (a callback's state lives there; the worker's copy ends with the worker)."""

    def __init__(self, callbacks: Any) -> None:
        self.callbacks = callbacks
        self.config: DictConfig | None = None

    def on_job_start(self, **kwargs: Any) -> None:
        self.callbacks.on_job_start(**kwargs)

    def on_job_end(self, *, config: DictConfig, **kwargs: Any) -> None:
        self.config = config


class BasicLauncherComposingOnce(BasicLauncher):
    def __init__(self, n_jobs: int | str = "auto") -> None:
        super().__init__()
        self.n_jobs = forked.resolve_n_jobs(n_jobs)
        self._warm = False  # a point has run in this process (later launches, e.g. Optuna's batches, fork at once)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        # BasicLauncher.launch with compose_point in place of load_sweep_config
        setup_globals()
        assert self.hydra_context is not None and self.config is not None and self.task_function is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        log.info(f"Launching {len(job_overrides)} jobs locally")
        composed: dict = {}
        runs: list[JobReturn] = []
        parallel = self.n_jobs > 1 and forked.fork_available()
        for idx, overrides in enumerate(job_overrides):
            if parallel and self._warm:
                return runs + self._launch_forked(job_overrides, initial_job_idx, idx, composed)
            idx = initial_job_idx + idx
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            sweep_config = self._compose(overrides, idx, composed)
            runs.append(run_job(hydra_context=self.hydra_context, task_function=self.task_function,
                                config=sweep_config, job_dir_key="hydra.sweep.dir",
                                job_subdir_key="hydra.sweep.subdir"))
            configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
            self._warm = True
        return runs

    def _compose(self, overrides: Sequence[str], idx: int, composed: dict) -> DictConfig:
        assert self.hydra_context is not None and self.config is not None
        sweep_config = compose_point(self.hydra_context.config_loader, self.config, overrides, composed)
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = idx
            sweep_config.hydra.job.num = idx
        return sweep_config

    def _launch_forked(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int, first: int,
                       composed: dict) -> list[JobReturn]:
        """Points ``first`` onwards in worker processes; their JobReturns in job order."""
        assert self.hydra_context is not None and self.config is not None and self.task_function is not None
        hydra_context, task_function, config = self.hydra_context, self.task_function, self.config
        results: list[JobReturn] = []

        def run_point(offset: int) -> tuple[JobReturn, DictConfig]:  # in a worker
            # composed there (~0.05 s a point, from the composition the first point left in `composed`):
            # composing every point here first would keep the workers waiting. A point that fails to
            # compose stops the sweep as in serial (run_in_workers hands out no further point).
            sweep_config = self._compose(job_overrides[offset], initial_job_idx + offset, composed)
            later = _JobEndLater(hydra_context.callbacks)
            ret = run_job(hydra_context=HydraContext(config_loader=hydra_context.config_loader, callbacks=later),
                          task_function=task_function, config=sweep_config, job_dir_key="hydra.sweep.dir",
                          job_subdir_key="hydra.sweep.subdir")
            configure_log(config.hydra.hydra_logging, config.hydra.verbose)
            if ret.status == JobStatus.FAILED:
                exc = ret._return_value
                ret.return_value = (forked.portable_exception(exc), forked.job_traceback(exc))
            assert later.config is not None
            return ret, later.config

        def on_start(offset: int) -> None:
            log.info(f"\t#{initial_job_idx + offset} : {' '.join(filter_overrides(job_overrides[offset]))}")

        def on_result(offset: int, value: tuple[JobReturn, DictConfig]) -> None:
            ret, job_config = value
            if ret.status == JobStatus.FAILED:
                ret.return_value = forked.with_remote_traceback(*ret._return_value)
            self._job_end(job_config, ret)
            results.append(ret)

        def on_lost(offset: int, why: str) -> None:
            idx = initial_job_idx + offset
            overrides = list(job_overrides[offset])
            message = f"sweep point #{idx} ({' '.join(filter_overrides(overrides))}) got no result: {why}"
            print(f"error: {message}", file=sys.stderr, flush=True)
            job_config = self._compose(job_overrides[offset], idx, composed)
            task_cfg = copy.deepcopy(job_config)
            with open_dict(task_cfg):
                del task_cfg["hydra"]
            ret = JobReturn(overrides=overrides, cfg=task_cfg, hydra_cfg=OmegaConf.masked_copy(job_config, "hydra"),
                            working_dir=str(Path.cwd()), task_name=str(job_config.hydra.job.name),
                            status=JobStatus.FAILED,
                            _return_value=forked.with_remote_traceback(forked.WorkerError(message), None))
            self._job_end(job_config, ret)
            results.append(ret)

        offsets = list(range(first, len(job_overrides)))
        raised = forked.run_in_workers(offsets, self.n_jobs, run_point, on_start, on_result, on_lost)
        configure_log(config.hydra.hydra_logging, config.hydra.verbose)
        if raised is not None:
            raise raised
        return results

    def _job_end(self, job_config: DictConfig, ret: JobReturn) -> None:
        """``on_job_end`` as ``run_job`` calls it: with the job's config as Hydra's config."""
        assert self.hydra_context is not None
        hydra_config = HydraConfig.instance()
        saved = hydra_config.cfg
        # what run_job's set_config(job_config) made, and copied into the JobReturn (set_config
        # again would copy the whole config once more: ~20 ms a point, in the process that also
        # has to share the CPUs with the workers)
        hydra_config.cfg = ret.hydra_cfg
        try:
            self.hydra_context.callbacks.on_job_end(config=job_config, job_return=ret)
        finally:
            hydra_config.cfg = saved
