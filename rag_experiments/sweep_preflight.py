"""Validate every point of a sweep before the sweep starts (called from the sweep callback's
``on_multirun_start``, before the MLflow parent run exists).

Without it, ``-m fusion.rrf_k=60,0`` ran the first point, then failed the second with a
traceback and an empty FAILED child; a golden set with no cases produced a FINISHED parent
first. Here each point's config is composed exactly as Hydra's basic sweeper will compose it
(same expansion: ``BasicSweeper.split_arguments``, same ``load_sweep_config``; the launcher,
basic or joblib, only decides where the points run) and converted to settings, and each distinct
golden set is loaded and checked against its corpus. The first bad point ends the command with
one line naming the point, the key and the value, exit 2.

Sweepers that choose their points while running (optuna) cannot be checked up front; their
points are still validated one by one as they start.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .errors import ConfigError, UserError


def sweep_points(config: Any) -> list[list[str]] | None:
    """The override list of every job the basic sweeper will launch; None for other sweepers."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    target = str(config.hydra.sweeper.get("_target_", ""))
    if target not in (f"{BasicSweeper.__module__}.{BasicSweeper.__name__}", COMPOSING_ONCE):
        return None
    params = [f"{k}={v}" for k, v in (config.hydra.sweeper.get("params") or {}).items()]
    overrides = OverridesParser.create().parse_overrides(params + list(config.hydra.overrides.task))
    return [point for batch in BasicSweeper.split_arguments(overrides, None) for point in batch]


#: conf/hydra/sweeper/basic.yaml's sweeper: Hydra's basic sweeper minus its second composition
COMPOSING_ONCE = "hydra_plugins.rag_experiments_sweeper.basic_once.BasicSweeperComposingOnce"


def check_launcher(config: Any) -> None:
    """The default launcher's ``n_jobs``, read as the launcher will read it, before the MLflow
    parent exists (Hydra would instantiate the launcher after it: an empty FAILED parent and
    Hydra's four-line instantiation error)."""
    from hydra_plugins.rag_experiments_launchers import forked
    from hydra_plugins.rag_experiments_launchers.basic_once import BasicLauncherComposingOnce

    launcher = (config.get("hydra") or {}).get("launcher") or {}
    ours = f"{BasicLauncherComposingOnce.__module__}.{BasicLauncherComposingOnce.__name__}"
    if str(launcher.get("_target_", "")) != ours:
        return
    try:
        forked.resolve_n_jobs(launcher.get("n_jobs", "auto"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _varying(points: list[list[str]], point: list[str]) -> str:
    """The part of ``point`` that differs between points (what the user swept)."""
    shared = set.intersection(*(set(p) for p in points)) if len(points) > 1 else set()
    return " ".join(o for o in point if o not in shared) or " ".join(point)


def check_points(config: Any) -> int:
    """Raise UserError for the first invalid point (its message names the point); return the count."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from hydra_plugins.rag_experiments_launchers.basic_once import compose_point

    from .config import settings_from_cfg
    from .experiment import corpus_path, load_checked_golden

    check_launcher(config)
    points = sweep_points(config)
    if points is None or not GlobalHydra.instance().is_initialized():  # not under Hydra (a test's callback)
        return 0
    loader = GlobalHydra.instance().config_loader()
    golden_checked: set[tuple] = set()
    composed: dict = {}
    for point in points:
        where = f"sweep point {_varying(points, point)}"
        try:
            settings = settings_from_cfg(compose_point(loader, config, list(point), composed, app_only=True))
            key = (settings.golden.file, str(corpus_path(settings)), settings.corpus.name)
            if key not in golden_checked:
                load_checked_golden(settings)
                golden_checked.add(key)
        except UserError as exc:
            raise type(exc)(f"{where}: {exc.message}", hint=exc.hint) from exc
        except (HydraException, OmegaConfBaseException) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(f"{where}: {first}") from exc
    return len(points)


def check_sweep_or_exit(config: Any) -> None:
    """For the callback: Hydra turns a callback's exception into a warning and carries on, so a bad
    point ends the process here (SystemExit passes through), before any run is created."""
    try:
        check_points(config)
    except UserError as exc:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise SystemExit(f"error: {exc}") from exc
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
