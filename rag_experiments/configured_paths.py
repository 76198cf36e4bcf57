"""The golden set and corpus folder a project's configuration names, composed once and
remembered: what every ``rag-exp golden`` command looks up before its work.

Composing costs 1.2-1.3 s (importing the settings' modules, then Hydra; measured idle on 2
cores), which ``golden add`` and every other ``golden`` command paid, twice, to learn two paths
(issue 44, item 1: ``golden add`` under 2 s).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Sequence

from .conf_source import PACKAGED_CONF, ConfigSource, config_source
from .paths import project_root

#: where :func:`configured_paths` remembers its answers, under the project root
PATHS_MEMO = Path(".rag-exp") / "configured-paths.json"
_PATHS_MEMO_ENTRIES = 32  # configurations (override lists) remembered per project
# the code that turns a composed config into the two paths: a change to it is a new key
_PATHS_CODE = ("paths.py", "conf_source.py", "config.py", "experiment.py", "session.py", "hydra_app.py", "configured_paths.py")
_ENV_REF = re.compile(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)")


def configured_paths(overrides: Sequence[str] | None = None) -> dict[str, str]:
    """``{"golden": ..., "corpus": ...}``: the golden-set file and the corpus folder that the
    configuration (with ``overrides``) names, as :func:`rag_experiments.session.compose_settings`
    and :func:`rag_experiments.experiment.corpus_path` give them.

    In a project folder (a ``conf/`` of its own) the answer is remembered in
    ``<project>/.rag-exp/configured-paths.json`` under a key made of everything it depends on:
    the overrides, the project root and the config folders, the content of every YAML file in
    them, the environment variables those files read (``${oc.env:NAME}``), the package version
    and the identity of the modules that compose and resolve. Any change to one of them is
    another key, composed again. A configuration that does not compose raises as before (and is
    not remembered); a memo that cannot be read or written is ignored."""
    overrides = list(overrides or [])
    source = config_source()
    if source.primary == PACKAGED_CONF and not source.extra:
        return _compose_paths(overrides)  # no project: nothing of the project's to remember in
    root = project_root()
    memo = root / PATHS_MEMO
    key = _paths_key(overrides, source, root)
    entries = _read_memo(memo)
    hit = entries.get(key)
    if isinstance(hit, dict) and isinstance(hit.get("golden"), str) and isinstance(hit.get("corpus"), str):
        return {"golden": hit["golden"], "corpus": hit["corpus"]}
    paths = _compose_paths(overrides)
    entries.pop(key, None)
    entries[key] = paths
    _write_memo(memo, dict(list(entries.items())[-_PATHS_MEMO_ENTRIES:]))
    return paths


def _compose_paths(overrides: list[str]) -> dict[str, str]:
    from .experiment import corpus_path
    from .session import compose_settings

    settings = compose_settings(overrides)[0]
    return {"golden": str(settings.golden.file), "corpus": str(corpus_path(settings))}


def _paths_key(overrides: list[str], source: ConfigSource, root: Path) -> str:
    h = hashlib.sha256()

    def put(*parts: object) -> None:
        for part in parts:
            h.update(repr(part).encode())
            h.update(b"\0")

    from . import __version__

    put("configured-paths v1", __version__, overrides, str(root), os.environ.get("RAG_EXP_HOME"), source.name,
        [str(d) for d in source.dirs])
    here = Path(__file__).resolve().parent
    for name in _PATHS_CODE:
        try:
            st = (here / name).stat()
            put(name, st.st_mtime_ns, st.st_size)
        except OSError:
            put(name, None)
    names: set[str] = set()
    for d in source.dirs:
        for path in sorted(d.rglob("*.yaml")):
            try:
                data = path.read_bytes()
            except OSError:
                data = b"(unreadable)"
            put(str(path.relative_to(d)))
            h.update(hashlib.sha256(data).digest())
            names.update(_ENV_REF.findall(data.decode("utf-8", "replace")))
    put(sorted((n, os.environ.get(n)) for n in names))
    return h.hexdigest()


def _read_memo(memo: Path) -> dict:
    try:
        data = json.loads(memo.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_memo(memo: Path, entries: dict) -> None:
    tmp = memo.with_name(f"{memo.name}.{os.getpid()}.tmp")
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(entries, indent=1))
        os.replace(tmp, memo)
    except OSError:
        tmp.unlink(missing_ok=True)
