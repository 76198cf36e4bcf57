"""The champion's identity (registered model name, alias) and its committed record, shared by
:mod:`.promote` and :mod:`rag_experiments.serving.model_logging` (which promote calls)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..config import project_root
from ..errors import UserError
from .runs import RunView, parse_per_case

ALIAS = "champion"
PROMOTED_DIR = Path("experiments/promoted")
#: keys of the resolved config that describe where/how a run is logged, not the retriever
PRESET_DROP = ("hydra", "db", "tracking", "run_name", "progress")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def model_name(name: str) -> str:
    if not _NAME.match(name):
        raise UserError(f"--name {name!r}: use letters, digits, '_' and '-' (at most 64)")
    return "rag-retriever-" + name


def preset_name(name: str) -> str:
    return "promoted" if name == "default" else f"promoted_{name}"


@dataclass(frozen=True)
class Champion:
    run: RunView
    version: str | None  # registry version, None when read from the committed record
    source: str  # "registry" | "record"
    metric: str | None  # the primary metric it was promoted on


def record_path(name: str) -> Path:
    return project_root() / PROMOTED_DIR / f"{name}.record.json"


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
    return Champion(run, data.get("version"), "record", data.get("primary_metric"))


def preset_config(config: dict) -> dict:
    return {k: v for k, v in config.items() if k not in PRESET_DROP}
