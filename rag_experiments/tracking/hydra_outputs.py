"""Hydra writes the overrides and the composed config into every output folder
(``outputs/<date>/<time>/.hydra/{config,hydra,overrides}.yaml``, and ``multirun.yaml`` plus
``<n>/.hydra/*`` under ``multirun/<date>/<time>/``). A ``db.url='postgresql://u:pw@h/db'``
override would leave its password there in plain text.

Hydra has no hook to filter what it saves, so this callback rewrites those files with every
secret masked (:func:`rag_experiments.redaction.redact_obj`), right after Hydra writes them:
``on_job_start`` runs after a job's ``.hydra`` files and the sweep's ``multirun.yaml`` exist
(Hydra's ``run_job`` saves them, then calls the callback), in the job's own process (so joblib
workers are covered too); ``on_run_end`` / ``on_multirun_end`` go over them
again. The files stay valid YAML with the same structure; only secret values read ``***``.

A job rewrites only its own folder and the sweep's ``multirun.yaml``; the whole sweep folder is
gone over once, at the sweep's end. (Going over every earlier job's files at every job start
made a 100-point sweep quadratic: point 64 parsed ~400 YAML files.)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from ..cache_key import file_identity
from ..redaction import SECRET_WORD, redact_obj, redact_text, secrets_known


# libyaml when PyYAML was built with it (the wheels are): the pure-Python parser is ~10x slower
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def redact_yaml_file(path: Path) -> bool:
    """Rewrite one YAML file with secrets masked; True when it changed."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return False
    if not SECRET_WORD.search(text) and redact_text(text) == text:
        return False  # no secret-named key anywhere and no secret in any string: nothing to walk
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError:
        data = None
        new = redact_text(text)
    else:
        clean = redact_obj(data)
        new = text if clean == data else yaml.dump(clean, Dumper=_Dumper, sort_keys=False,
                                                    allow_unicode=True, default_flow_style=False,
                                                    width=10_000)
        new = redact_text(new)  # belt and braces: anything the structure walk did not reach
    if new == text:
        return False
    tmp = path.with_name(path.name + ".redacting")
    tmp.write_text(new, encoding="utf-8")
    os.replace(tmp, path)
    return True


_CHECKED: dict[Path, tuple] = {}


def _redact_unless_checked(path: Path) -> None:
    """``multirun.yaml`` is written once per sweep but every job start would re-read it: skip it
    while it is the same file (inode, size, mtime) and no new secret has been learned since."""
    try:
        if _CHECKED.get(path) == (file_identity(path), secrets_known()):
            return
        redact_yaml_file(path)
        _CHECKED[path] = (file_identity(path), secrets_known())
    except OSError:
        return


def redact_output_folder(folder: Path) -> int:
    """Every Hydra-written YAML under ``folder`` (a run folder or a whole sweep folder)."""
    if not folder.is_dir():
        return 0
    files = list(folder.glob("multirun.yaml")) + list(folder.glob(".hydra/*.yaml")) + \
        list(folder.glob("*/.hydra/*.yaml"))
    return sum(redact_yaml_file(f) for f in files)


def redact_job_folder(folder: Path) -> int:
    """One job's own ``.hydra/*.yaml`` (not its siblings')."""
    return sum(redact_yaml_file(f) for f in folder.glob(".hydra/*.yaml")) if folder.is_dir() else 0


class RedactHydraOutputs(Callback):
    """Mask secrets in the files Hydra saves into its output folders."""

    def _job(self, config: DictConfig) -> None:
        try:
            out = Path(str(config.hydra.runtime.output_dir))
        except Exception:  # noqa: BLE001 - no runtime folder known yet
            return
        redact_job_folder(out)
        try:
            from hydra.core.hydra_config import HydraConfig
            from hydra.types import RunMode

            if HydraConfig.get().mode == RunMode.MULTIRUN:
                _redact_unless_checked(Path(str(config.hydra.sweep.dir)) / "multirun.yaml")
        except Exception:  # noqa: BLE001
            pass

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._job(config)

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            redact_output_folder(Path(str(config.hydra.run.dir)))
        except Exception:  # noqa: BLE001
            pass

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            redact_output_folder(Path(str(config.hydra.sweep.dir)))
        except Exception:  # noqa: BLE001
            pass
