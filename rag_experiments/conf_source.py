"""Which config folders a project composes from: the packaged ``conf/`` and a project's own.

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

Its own module (below every layer, importing only paths.py) because the Hydra entry point, the
CLI's retriever session, ``golden add``'s path lookup and the gate all ask the same question.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .paths import project_root

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
