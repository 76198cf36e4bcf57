"""Where a project's files are: its root, a configured path under it, and the MLflow store it
logs to. One place for these ideas (issue 46 item 3: "paths and tracking URIs in a module with no
dependencies"), imported by ``config``, ``hydra_app`` and ``tracking`` alike; it imports nothing of
the package, so a command that only looks up a path (``golden add``) loads no settings module."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """``$RAG_EXP_HOME``, else the working folder (resolved)."""
    return Path(os.environ.get("RAG_EXP_HOME", os.getcwd())).resolve()


def project_path(path: str) -> Path:
    """A configured path: absolute as given, else under the project root (``..`` folded: a corpus
    beside the project, ``../docs``, is named as ``/…/docs``)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else Path(os.path.normpath(project_root() / p))


def default_tracking_uri() -> str:
    """The local MLflow store: ``sqlite:///<project>/mlruns/mlflow.db`` (absolute, so Hydra's
    per-job folders never scatter runs)."""
    return f"sqlite:///{project_root() / 'mlruns' / 'mlflow.db'}"


def tracking_uri(explicit: str | None = None) -> str:
    """Explicit > ``$MLFLOW_TRACKING_URI`` > :func:`default_tracking_uri` (its ``mlruns/`` made)."""
    uri = explicit or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    (project_root() / "mlruns").mkdir(parents=True, exist_ok=True)
    return default_tracking_uri()


def artifact_root() -> str:
    """The local store's artifact folder, ``<project>/mlruns/artifacts``, as a ``file:`` URI."""
    return (project_root() / "mlruns" / "artifacts").as_uri()
