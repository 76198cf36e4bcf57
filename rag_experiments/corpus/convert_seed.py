"""Copy a corpus's conversions from one conversion cache into another without converting.

``rag-exp init`` gives a project a conversion cache of its own: the conversions the team made
before the project existed (the tutorial converts first) are copied into it, so the first run
does not convert again. Reading the corpus through a cache view that copies every hit decides
what belongs to the corpus exactly as a run would (:func:`.loader.read_corpus`).

A module of its own because it needs the loader, and the loader needs the cache.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from .convert import Converted
from .convert_cache import ConversionCache
from .loader import read_corpus


class _CopyFrom(ConversionCache):
    """Answers from ``source`` only, copying each hit into ``target``; a miss is reported as a
    failure, so reading a corpus through it converts nothing (see :func:`seed`)."""

    MISS = "not in the cache seeded from"

    def __init__(self, source: ConversionCache, target: ConversionCache) -> None:
        super().__init__(target.folder)
        self.source, self.target, self.copied = source, target, 0

    def get(self, key: str, limits=None) -> Converted | str | None:
        if self.target.get(key) is not None:
            return self.MISS  # already there: nothing to copy
        value = self.source.get(key)
        if value is None:
            return self.MISS
        self.target.put(key, value)  # a failure at a limit is copied without its limits: tried again there
        self.copied += 1
        return value

    def put(self, key: str, value: Converted | str, limits=None) -> None:
        pass


def seed(corpus: Path, source: Path, target: Path) -> int:
    """Copy the conversions of ``corpus``'s files that the cache in ``source`` holds into the cache in
    ``target`` (both cache folders); converts nothing. Returns how many were copied."""
    if not source.is_dir() or source.resolve() == target.resolve():
        return 0
    cache = _CopyFrom(ConversionCache(source), ConversionCache(target))
    try:
        read_corpus(corpus, cache=cache)
    except UserError:  # no document loaded (nothing converted there yet, or an empty folder)
        pass
    return cache.copied
