"""The champion's identity (registered model name, alias), its committed record and the current champion, shared by
:mod:`.promote` and :mod:`rag_experiments.serving.model_logging` (which promote calls)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..paths import project_root
from ..errors import UserError
from .runs import RunView, client, get_run, parse_per_case

ALIAS = "champion"
PROMOTED_DIR = Path("experiments/promoted")
#: keys of the resolved config that describe where/how a run is logged, not the retriever
PRESET_DROP = ("hydra", "db", "tracking", "run_name", "progress")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def project_name() -> str | None:
    """The project's name as ``rag-exp init`` records it (``hydra.job.name`` in ``conf/project.yaml``
    of the project root), or None (this repository, a project made before init recorded it)."""
    path = project_root() / "conf" / "project.yaml"
    try:
        import yaml

        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        name = ((data.get("hydra") or {}).get("job") or {}).get("name")
    except (OSError, ValueError, AttributeError):  # no project config, or not the mapping init writes
        return None
    return str(name) if name and _NAME.match(str(name)) else None


def model_name(name: str) -> str:
    """The registered model of the champion ``name``: ``rag-retriever-<name>``. The ``default``
    champion of a project made by ``rag-exp init`` is registered under the project's name
    (``rag-retriever-<project>``), and its files in ``experiments/promoted/`` are named for it too
    (:func:`promoted_file`); the preset stays ``promoted.yaml``, so ``experiment=promoted`` and the
    nightly gate stay as they are."""
    if not _NAME.match(name):
        raise UserError(f"--name {name!r}: use letters, digits, '_' and '-' (at most 64)")
    return "rag-retriever-" + ((project_name() or name) if name == "default" else name)


def file_stem(name: str) -> str:
    """The champion's files' stem in ``experiments/promoted/``: its registered model's name without
    ``rag-retriever-`` (a project's default champion: the project's name; here: ``default``)."""
    return model_name(name).removeprefix("rag-retriever-")


def promoted_file(name: str, suffix: str, *, for_writing: bool = False) -> Path:
    """``experiments/promoted/<stem><suffix>`` (:func:`file_stem`: named for the model, so a model
    rag-retriever-sqlite has sqlite.yaml and sqlite.record.json, not default.*). For reading, a
    project promoted before the files were named so keeps its ``<name><suffix>`` until the next
    promotion writes the new name (and removes the old: :func:`legacy_files`)."""
    folder = project_root() / PROMOTED_DIR
    path = folder / f"{file_stem(name)}{suffix}"
    legacy = folder / f"{name}{suffix}"
    return legacy if not for_writing and not path.exists() and legacy.exists() else path


def legacy_files(name: str, suffixes: tuple[str, ...]) -> list[Path]:
    """The champion's files under their old name (``<name><suffix>``) when its stem differs."""
    if file_stem(name) == name:
        return []
    folder = project_root() / PROMOTED_DIR
    return [folder / f"{name}{s}" for s in suffixes if (folder / f"{name}{s}").exists()]


def preset_name(name: str) -> str:
    return "promoted" if name == "default" else f"promoted_{name}"


@dataclass(frozen=True)
class Champion:
    run: RunView
    version: str | None  # registry version, None when read from the committed record
    source: str  # "registry" | "record"
    metric: str | None  # the primary metric it was promoted on
    name: str = "default"  # the champion's name (registered model rag-retriever-<name>)


def record_path(name: str, *, for_writing: bool = False) -> Path:
    return promoted_file(name, ".record.json", for_writing=for_writing)


def read_record(name: str) -> Champion | None:
    path = record_path(name)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        run = RunView(id=data["run_id"], name=data.get("run_name", ""), status="FINISHED",
                      experiment_id=data.get("experiment_id", ""), start_time=int(data.get("start_time", 0)),
                      tags=data.get("tags", {}), metrics=data.get("metrics", {}), params={},
                      per_case=parse_per_case(data["per_case"]))
    except (KeyError, ValueError, TypeError) as exc:
        raise UserError(f"{path}: not a promotion record ({exc})") from exc
    return Champion(run, data.get("version"), "record", data.get("primary_metric"), name)


def preset_config(config: dict) -> dict:
    return {k: v for k, v in config.items() if k not in PRESET_DROP}


# -- the champion of record, or the registry's -------------------------------------------------------
def current_champion(name: str = "default", c=None, record_fallback: bool = True) -> Champion | None:
    """The champion of record: the committed ``experiments/promoted/<name>.record.json`` when it
    exists (the registry's alias ``champion`` mirrors it; :func:`rag_experiments.serving.model_logging.sync_with_record`
    re-populates the registry from it), else the run behind alias ``champion`` of ``rag-retriever-<name>``.

    ``record_fallback=False`` reads the registry alone."""
    from mlflow.exceptions import MlflowException

    c = c or client()
    try:
        mv = c.get_model_version_by_alias(model_name(name), ALIAS)
    except MlflowException:
        mv = None
    record = read_record(name) if record_fallback else None
    if record is not None:
        mirrored_run = ((mv.tags or {}).get("record_run_id") or mv.run_id) if mv is not None else None
        if mirrored_run != record.run.id:
            return record  # registry empty, or stale against the committed record: the record wins
        if mv.run_id != record.run.id:  # registered from the record: the record holds the per-case table
            return Champion(record.run, str(mv.version), "record", record.metric, name)
    if mv is not None and mv.run_id:
        return Champion(get_run(mv.run_id, c=c), str(mv.version), "registry", (mv.tags or {}).get("primary_metric"),
                        name)
    return record
