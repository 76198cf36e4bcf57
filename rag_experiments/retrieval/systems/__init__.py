"""The retrieval systems (``retrieval.variant``): one registered :class:`SystemType` per variant.

A system type says what a variant *is* in one place: its params type, the ``retrieval.*`` config
it owns (logged only when it runs), how it is built (:func:`build_system`), and how a run of it is
named (:attr:`SystemType.describe`). Adding a system is one module here that defines ``SYSTEM``
(or ``SYSTEMS``, several that share code): :func:`registry` finds it. Validation of
``retrieval.variant``, the choice of what to prepare (an ingest for an ``index`` system, the corpus
for a ``team`` system), the MLflow config pruning, the run-name summary
(:mod:`rag_experiments.tracking.retriever_summary`) and the generated config reference read the
registry; nothing else lists the variants.

Kinds:

* ``index``: searches this project's chunks of the corpus (ingested first: chunking, embedding,
  BM25 statistics); built from the strategy and the embedder. ``vector``, ``keyword``,
  ``hybrid``, ``hybrid_rerank`` (:mod:`.builtin`), ``bm25s`` (:mod:`.bm25s`).
* ``team``: a team's own system, whose passages are placed in the corpus text; nothing is
  ingested. ``external``, ``http``, ``stored`` (:mod:`.team`).

What a built system offers beyond :class:`~rag_experiments.retrieval.protocol.SearchSystem` is asked
for with :func:`~rag_experiments.retrieval.protocol.capability`.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ...errors import ConfigError

if TYPE_CHECKING:
    from ...store import StrategyInfo
    from ...types import Document
    from ..protocol import SearchSystem

#: ``get(dotted_key, default)`` over a run's resolved config (``retrieval.external.target``)
Getter = Callable[[str, Any], Any]


@dataclass(frozen=True)
class BuildInputs:
    """What a system's ``build`` gets: the settings (:class:`rag_experiments.config.Settings`), the
    database connection (None when the caller has none), and what the caller prepared: the
    corpus documents (``team``: passages are placed in them), the ingested strategy and the
    embedder (``index``). ``queries_by_case``: the golden set's queries (a stored run answers
    those only; None outside a run). ``serving``: a served model (no answer cache, no per-query
    records)."""

    settings: Any
    conn: Any = None
    docs: Sequence["Document"] = ()
    strategy: "StrategyInfo | None" = None
    embedder: Any = None
    queries_by_case: Mapping[str, str] | None = None
    serving: bool = False


@dataclass(frozen=True)
class SystemType:
    name: str  # the value of retrieval.variant
    summary: str  # one line: what it searches and how (the config reference shows it)
    kind: str  # "index" (this project's chunks, ingested first) | "team" (a team's system, passages placed)
    params: type  # the typed params it reads (RetrievalParams, ExternalParams, HttpParams, StoredParams)
    build: Callable[[BuildInputs], "SearchSystem"]
    #: the run name's text from the run's config (``get(key, default)``) and the chunking/embedding texts
    describe: Callable[[Getter, str, str], str]
    #: one sentence for a registered model's description: ``vector search (pgvector)``
    sentence: Callable[[Getter], str]
    #: ``retrieval.*`` keys only this system reads: a run of another system does not log them.
    #: ``external`` (the whole subtree) or ``external.max_unplaced`` (one key of a shared subtree)
    owns: tuple[str, ...] = ()
    legs: tuple[str, ...] = ()  # the built-in legs it fuses (vector, keyword); () for others
    rerank: bool = False  # reranks with the configured reranker (rerank.*)
    sql_twin: bool = False  # fusion.engine=sql implements it
    rewrites: bool = False  # supports query.rewrite
    filters: bool = False  # applies retrieval.filters
    position: int = 100  # order in lists and messages
    #: whether a run opens the database for it (an index system: always; a team's: for its answer cache)
    needs_database: Callable[[Any], bool] = lambda settings: True

    @property
    def embeds_queries(self) -> bool:
        """It embeds queries (the run names the embedding model; ANN recall means something)."""
        return "vector" in self.legs

    @property
    def fuses(self) -> bool:
        return len(self.legs) > 1


@cache
def registry() -> dict[str, SystemType]:
    """Every ``SYSTEM``/``SYSTEMS`` of this package's modules, by name, in ``position`` then name order."""
    found: list[SystemType] = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        one = getattr(module, "SYSTEM", None)
        found += [s for s in (*getattr(module, "SYSTEMS", ()), one) if isinstance(s, SystemType)]
    names = [s.name for s in found]
    if len(set(names)) != len(names):
        raise RuntimeError(f"retrieval systems registered twice: {sorted(n for n in set(names) if names.count(n) > 1)}")
    return {s.name: s for s in sorted(found, key=lambda s: (s.position, s.name))}


def system_type(variant: str) -> SystemType:
    """The registered system ``variant``; ConfigError naming ``retrieval.variant`` when there is none."""
    known = registry()
    found = known.get(variant) if isinstance(variant, str) else None
    if found is None:
        raise ConfigError(f"retrieval.variant: unknown variant {variant!r}; use one of {', '.join(known)}")
    return found


def build_system(inputs: BuildInputs) -> "SearchSystem":
    """The configured system (``settings.retrieval.variant``) from what the caller prepared."""
    return system_type(inputs.settings.retrieval.variant).build(inputs)


def owned_config(retrieval: Mapping[str, Any]) -> dict[str, Any]:
    """A run's resolved ``retrieval`` mapping without the keys that other systems own: a built-in
    run logs no ``retrieval.external.*`` (else it would differ from an external run by
    ``target=None``), an http run of ``retrieval.external`` only what it shares (``max_unplaced``)."""
    variant = retrieval.get("variant")
    owned_roots = {key.split(".", 1)[0] for s in registry().values() for key in s.owns}
    out = {k: v for k, v in retrieval.items() if k not in owned_roots}
    system = registry().get(variant) if isinstance(variant, str) else None
    for key in system.owns if system else ():
        root, _, sub = key.partition(".")
        if not sub:
            if root in retrieval:
                out[root] = retrieval[root]
        elif isinstance(retrieval.get(root), dict):
            out.setdefault(root, {})[sub] = retrieval[root].get(sub)
    return out
