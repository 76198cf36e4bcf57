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
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import (
    JobReturn,
    configure_log,
    filter_overrides,
    run_job,
    setup_globals,
)
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)


def _is_plain_value(o: Any) -> bool:
    """``a.b=value``: a config value, never a group choice (groups are named with ``/``)."""
    return not (o.is_delete() or o.is_add() or o.is_force_add() or o.is_hydra_override()
                or o.is_sweep_override()) and "." in o.key_or_group and "/" not in o.key_or_group \
        and o.package is None


def compose_point(loader: Any, master: DictConfig, overrides: Sequence[str], composed: dict) -> DictConfig:
    """The point's config as ``loader.load_sweep_config(master, overrides)`` returns it; compositions
    are shared through ``composed`` between points that differ only in plain value overrides."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    values = [o for o in parsed if _is_plain_value(o)]
    keys = [o.key_or_group for o in values]
    others_plain = all(not (o.is_delete() or o.is_add() or o.is_force_add()) for o in parsed)
    if not values or len(set(keys)) != len(keys) or not others_plain:
        return loader.load_sweep_config(master, list(overrides))
    structural = [o.input_line for o in parsed if not _is_plain_value(o)]
    base_key = tuple(structural)
    if base_key not in composed:
        composed[base_key] = loader.load_sweep_config(master, structural)
    cfg = copy.deepcopy(composed[base_key])
    ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
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


class BasicLauncherComposingOnce(BasicLauncher):
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        # BasicLauncher.launch with compose_point in place of load_sweep_config
        setup_globals()
        assert self.hydra_context is not None and self.config is not None and self.task_function is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        log.info(f"Launching {len(job_overrides)} jobs locally")
        composed: dict = {}
        runs: list[JobReturn] = []
        for idx, overrides in enumerate(job_overrides):
            idx = initial_job_idx + idx
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            sweep_config = compose_point(self.hydra_context.config_loader, self.config, overrides, composed)
            with open_dict(sweep_config):
                sweep_config.hydra.job.id = idx
                sweep_config.hydra.job.num = idx
            runs.append(run_job(hydra_context=self.hydra_context, task_function=self.task_function,
                                config=sweep_config, job_dir_key="hydra.sweep.dir",
                                job_subdir_key="hydra.sweep.subdir"))
            configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        return runs
