"""On-disk cache of converted documents, keyed by the file's bytes and the converter.

Why on disk and not in the database: loading a corpus comes before any database exists (``corpus
stats``, golden-set checks, a sweep's load step), and a sweep loads the corpus in every process.
Why keyed by content, not by path or mtime: a copied, renamed or touched file converts nothing;
an edited file, a converter upgrade or a change to the conversion rules
(:func:`~rag_experiments.corpus.convert.conversion_code_digest`) misses and converts again.

Folder: ``$RAG_EXP_CONVERT_CACHE``, else ``.rag-exp/convert-cache`` in the project: ``$RAG_EXP_HOME``,
else the nearest folder at or above the working folder that holds the project's config
(``conf/project.yaml``, made by ``rag-exp init``, or ``conf/config.yaml``), else the working folder
(git-ignored by ``rag-exp init``). So a command run from a sub-folder of the project (its corpus
folder, say) reads the project's cache, not a new one where the shell happens to be;
:func:`.convert_seed.seed` copies conversions made before the project existed (``rag-exp corpus convert`` then
``rag-exp init``, the tutorial's order) into it. One JSON file per entry, written to a temporary name and renamed, so two
processes converting the same file never leave a torn entry; an entry that does not parse, or
whose recorded key differs, is treated as absent. A failure that depends only on the bytes
(encrypted, no text layer, corrupt) is cached too, so a re-run does not parse a broken file again;
so is one at the converter's time or memory limit (:mod:`.convert_worker`), with those limits: it
is tried again only when the file changes or a limit is raised.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path

from ..cache_key import cache_key
from .convert import Converted, conversion_code_digest
from .convert_worker import Limits

ENV = "RAG_EXP_CONVERT_CACHE"


#: files that make a folder a project root (the project's config; see rag_experiments.conf_source.config_source)
PROJECT_MARKERS = ("conf/project.yaml", "conf/config.yaml")


def project_home(start: Path | None = None) -> Path:
    """``$RAG_EXP_HOME``, else the nearest folder at or above ``start`` (the working folder) holding
    the project's config (:data:`PROJECT_MARKERS`), else ``start`` itself."""
    home = os.environ.get("RAG_EXP_HOME")
    if home:
        return Path(home).expanduser().resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if any((folder / marker).is_file() for marker in PROJECT_MARKERS):
            return folder
    return here


def default_cache_dir(start: Path | None = None) -> Path:
    # not rag_experiments.db.connect.state_dir (the corpus layer sits left of the database layer)
    explicit = os.environ.get(ENV)
    if explicit:
        return Path(explicit).expanduser().resolve()
    return project_home(start) / ".rag-exp" / "convert-cache"


def known_caches_file() -> Path:
    """The list of conversion cache folders this user's conversions were written to, one a line
    (``$XDG_CACHE_HOME/rag-experiments/conversion-caches.txt``): where ``rag-exp init`` looks for a
    corpus's earlier conversions, wherever the shell was when they were made."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "rag-experiments" / "conversion-caches.txt"


def known_caches() -> list[Path]:
    """The remembered conversion cache folders that still exist, in the order they were first used."""
    try:
        lines = known_caches_file().read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [Path(line) for line in dict.fromkeys(lines) if line and Path(line).is_dir()]


def _remember(folder: Path) -> None:
    """Add ``folder`` to :func:`known_caches_file` (best effort: a read-only home only loses the hint)."""
    path = known_caches_file()
    try:
        if str(folder) in path.read_text(encoding="utf-8").splitlines():
            return
    except OSError:
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{folder}\n")
    except OSError:
        pass


def entry_key(file_sha256: str, suffix: str, converter: str) -> str:
    return cache_key("document-conversion", file_sha256=file_sha256, format=suffix, converter=converter,
                     code=conversion_code_digest())


class ConversionCache:
    """``get(key)`` -> :class:`Converted`, a failure reason (str), or None; ``put`` stores either."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or default_cache_dir()
        self._write_failed = False
        self._remembered = False

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str, limits: Limits | None = None) -> Converted | str | None:
        """The entry, or None. A failure recorded at a time or memory limit (``limits`` in the entry)
        is None when ``limits`` give more room now: the file is tried again."""
        try:
            raw = json.loads(self._path(key).read_text(encoding="utf-8"))
            if raw.get("key") != key:
                return None
            if "failure" in raw:
                if limits is not None and isinstance(raw.get("limits"), dict) and limits.exceed(raw["limits"]):
                    return None
                return str(raw["failure"])
            return Converted.from_json(raw["converted"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, value: Converted | str, limits: Limits | None = None) -> None:
        """Store a conversion or a failure; ``limits``: the failure happened at these limits."""
        if self._write_failed:
            return
        body: dict = {"key": key}
        if isinstance(value, str):
            body["failure"] = value
            if limits is not None:
                body["limits"] = limits.to_json()
        else:
            body["converted"] = value.to_json()
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(body, f, ensure_ascii=False)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            if not self._remembered:  # so rag-exp init finds it from any folder (known_caches)
                _remember(self.folder.resolve())
                self._remembered = True
        except OSError as exc:
            # a read-only checkout still loads its corpus: it converts on every run, and says so once
            self._write_failed = True
            warnings.warn(f"cannot write the conversion cache in {self.folder} ({exc.strerror or exc}); "
                          f"documents are converted again on every load (set {ENV} to a writable folder)",
                          stacklevel=3)
