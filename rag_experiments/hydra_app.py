"""The Hydra entry point of `rag-exp run` and `run.py`, from any folder.

The configs ship inside the package (``rag_experiments/conf``; the repository's top-level
``conf`` is a link to it). A project folder (:func:`rag_experiments.paths.project_root`: the
working folder, or ``$RAG_EXP_HOME``) may have its own ``conf/``, which adds or overrides groups
and presets through Hydra's config search path:

* with a ``conf/project.yaml`` (what ``rag-exp init`` writes: the packaged ``config`` plus the
  project's choices), the project's folder is the primary config folder and the packaged one
  comes after it, so the project's files win on a name both have;
* without one, the packaged folder is primary and the project's options come after it (its
  ``corpus/``, ``golden/``, ``experiment/`` files next to the packaged ones; a promoted preset
  ``experiment/promoted.yaml`` is written there).

Hydra finds the primary config only in the primary folder (a ``hydra.searchpath`` override
does not serve it), hence the two cases.
"""

from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .paths import project_root  # imports nothing of the package: config's settings modules stay unloaded

PACKAGED_CONF = Path(__file__).resolve().parent / "conf"
PROJECT_CONFIG = "project"


@dataclass(frozen=True)
class ConfigSource:
    primary: Path  # the folder Hydra reads the primary config from
    name: str  # the primary config: config or project
    extra: tuple[Path, ...] = ()  # searched after the primary folder

    @property
    def dirs(self) -> tuple[Path, ...]:
        return (self.primary, *self.extra)

    def searchpath_overrides(self) -> list[str]:
        if not self.extra:
            return []
        return ["hydra.searchpath=[" + ",".join(f"file://{p}" for p in self.extra) + "]"]


def config_source(root: Path | None = None) -> ConfigSource:
    local = (root or project_root()) / "conf"
    if not local.is_dir() or local.resolve() == PACKAGED_CONF:
        return ConfigSource(PACKAGED_CONF, "config")
    if (local / f"{PROJECT_CONFIG}.yaml").is_file():
        return ConfigSource(local.resolve(), PROJECT_CONFIG, (PACKAGED_CONF,))
    if (local / "config.yaml").is_file():  # a project that keeps a whole config of its own
        return ConfigSource(local.resolve(), "config", (PACKAGED_CONF,))
    return ConfigSource(PACKAGED_CONF, "config", (local.resolve(),))


def _exit_on_bad_project_yaml(source: ConfigSource) -> None:
    """A YAML syntax error in the project's ``conf/``: one ``error:`` line and exit 2, before Hydra
    composes (whose own report is PyYAML's traceback)."""
    from .conf_yaml import check_conf_yaml
    from .errors import ConfigError

    for folder in source.dirs:
        if folder == PACKAGED_CONF:
            continue
        try:
            check_conf_yaml(folder)
        except ConfigError as exc:
            if os.environ.get("HYDRA_FULL_ERROR") == "1":
                raise
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(exc.exit_code)


def _task(cfg) -> float:
    from .pipeline import run_from_hydra

    return run_from_hydra(cfg)


def main(argv: Sequence[str] | None = None, prog: str = "rag-exp run") -> None:
    """Run one experiment, or a sweep with ``-m``: what ``python run.py ARGS`` does."""
    import hydra

    from .config import exit_on_unknown_override_keys, free_mapping_overrides, register_schema
    from .redaction import redact_process_output, register_argv

    args = list(sys.argv[1:] if argv is None else argv)
    register_schema()
    register_argv(args)  # learn the secrets an override carries before anything can echo it
    redact_process_output()  # Hydra's own error messages quote overrides (and their passwords)
    source = config_source()
    _exit_on_bad_project_yaml(source)
    exit_on_unknown_override_keys(args, source.dirs)
    args = free_mapping_overrides(args)  # a team's own knobs: retrieval.external.params.*
    if not any(a.startswith("hydra.searchpath=") for a in args):
        args += source.searchpath_overrides()
    sys.argv = [prog, *args]
    app = hydra.main(version_base="1.3", config_path=str(source.primary), config_name=source.name)(_task)
    if not plain_run(args, source):
        app()
        return
    with _mode_known():
        app()


#: override keys that may select a config setting ``hydra.mode`` (the presets in conf/experiment/ do)
_MODE_KEYS = ("experiment", "hydra")
#: in a project's YAML (comments stripped): a ``mode:`` key, or a preset selected by a defaults list
_MODE_LINE = re.compile(r"^\s*mode\s*:", re.MULTILINE)
_PRESET = re.compile(r"experiment\s*:\s*(?!null\b)\S|/experiment\b")


def plain_run(args: Sequence[str], source: ConfigSource) -> bool:
    """True when the composed config cannot be a sweep: no command-line flag (``-m``, ``--cfg``,
    ``--help`` ...), no override that could select a preset or set ``hydra.mode``, and no file of
    a project's ``conf/`` that could (:func:`_may_set_mode`). Such a run is RUN mode."""
    own = set(source.searchpath_overrides())  # the project's folder on Hydra's search path
    for arg in args:
        if arg.startswith("-"):
            return False
        if arg in own:
            continue
        key = arg.lstrip("+~").split("=", 1)[0].strip()
        if key.split(".", 1)[0].split("/", 1)[0] in _MODE_KEYS:
            return False
    return not any(_may_set_mode(d) for d in source.dirs if d != PACKAGED_CONF)


def _may_set_mode(conf_dir: Path) -> bool:
    """Whether a project's config folder could make a run a sweep with no override: a YAML file
    (outside ``experiment/``, whose presets are reached only by selecting one) with a ``mode:``
    key or a defaults entry selecting a preset. Unreadable: assume it could."""
    try:
        for path in conf_dir.rglob("*.yaml"):
            if path.relative_to(conf_dir).parts[0] == "experiment":
                continue
            text = "\n".join(line.split("#", 1)[0] for line in path.read_text(errors="replace").splitlines())
            if _MODE_LINE.search(text) or _PRESET.search(text):
                return True
    except OSError:
        return True
    return False


@contextmanager
def _mode_known():
    """Hydra 1.3 (``_run_hydra``) composes the whole config once only to read ``hydra.mode``
    (``Hydra.get_mode``), then again for the run: 0.3-0.4 s of CPU per ``rag-exp run``, measured on
    the demo. For a :func:`plain_run` the answer is known: ``get_mode`` returns None, which Hydra
    itself returns when that composition fails, and Hydra then runs in RUN mode
    (``hydra.mode=RUN``) with one composition. Pinned hydra-core==1.3.8; restored on the way out."""
    from hydra._internal.hydra import Hydra

    original = Hydra.get_mode
    Hydra.get_mode = lambda self, config_name, overrides: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        Hydra.get_mode = original  # type: ignore[method-assign]


if __name__ == "__main__":
    main(prog="python -m rag_experiments.hydra_app")
