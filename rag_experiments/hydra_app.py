"""The Hydra entry point of `rag-exp run` and `run.py`, from any folder.

Which config folders it composes from (the packaged ``conf/`` and a project's own) is
:mod:`rag_experiments.conf_source`.
"""

from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Sequence

from .conf_source import PACKAGED_CONF, ConfigSource, config_source


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
