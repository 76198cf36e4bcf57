"""A project's ``conf/`` YAML files parse, or one line says where they do not.

Hydra reads a project's config files (``conf/project.yaml``, ``conf/experiment/*.yaml`` ...) only
while it composes, and a YAML syntax error there surfaced as a 40-line PyYAML traceback from
whichever command composed first (``rag-exp run``, ``golden add``, ``search``: found by the
first-afternoon trial). Every command checks the files first: a few small files, parsed in
milliseconds.
"""

from __future__ import annotations

from pathlib import Path

from .errors import ConfigError


def check_conf_yaml(conf_dir: Path) -> None:
    """Parse every ``*.yaml`` / ``*.yml`` under ``conf_dir`` (a project's ``conf/``); a syntax
    error is a :class:`ConfigError` naming the file, line and column and what PyYAML expected."""
    if not conf_dir.is_dir():
        return
    import yaml

    for path in sorted([*conf_dir.rglob("*.yaml"), *conf_dir.rglob("*.yml")]):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot be read as UTF-8 text ({type(exc).__name__}: {exc})") from None
        try:
            yaml.safe_load(text)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            what = exc.problem or exc.context or "a syntax error"
            if exc.context and exc.problem:  # e.g. "while parsing a flow sequence", opened earlier
                at = exc.context_mark
                what += f" ({exc.context}" + (f" that starts at line {at.line + 1}, column {at.column + 1})"
                                              if at is not None else ")")
            raise ConfigError(f"{path}{where}: not valid YAML: {what}",
                              hint="fix the file (a YAML linter shows the spot), then run the command again") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({exc})") from None
