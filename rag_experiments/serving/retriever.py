"""``Retriever``: a configured (or the promoted) retriever as a Python object you can query.

    from rag_experiments import Retriever
    r = Retriever.from_champion("default")            # the registry's champion (or the committed record)
    r = Retriever.from_config(["fusion.rrf_k=30"])    # Hydra overrides, as run.py takes them
    r = Retriever.from_config("experiments/promoted/default.yaml")   # a resolved config file
    for hit in r.search("how much memory can a sort use", k=10): ...

It never serves another corpus than the one it was built for: the database's strategy for the
config (chunking x corpus x embedding model) must exist, and when an expected corpus digest is
known (a promoted model records the one it was measured on) the strategy's digest must match.
Otherwise it stops with one line saying how to ingest, or ingests when asked (``ingest=True``),
and still refuses when the corpus files on disk are not the promoted corpus.

Serving does not use the candidate cache: a server would otherwise store every distinct user
query's leg lists forever. The ranking is the same (the cache only memoises the same SQL).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Sequence

import yaml

from ..config import Settings, settings_from_cfg
from ..errors import ConfigError, UserError
from ..limits import query_problem
from ..retrieval.protocol import ChunkTexts, capability
from .hits import SearchHit

if TYPE_CHECKING:
    from ..store import StrategyInfo

from ..chunk_index import ingest
from ..chunking import strategy_key
from ..chunking.markdown_blocks import heading_path_at, parse_blocks
from ..config import schema
from ..corpus.copies import indexed_documents, indexed_name
from ..corpus.loader import DEMO, corpus_manifest, demo_corpus_dir, load_corpus, resolve_corpus_dir
from ..embedding import load_embedder
from ..limits import MAX_QUERY_CHARS  # noqa: E402,F401 - one limit for every entry point (re-exported)
from ..retrieval.filter_check import check_filters
from ..retrieval.systems import BuildInputs, build_system, system_type
from ..store import strategy_info
from .model_logging import champion_model

MAX_QUERIES = 100  # per call (one HTTP request)


class InvalidQuery(UserError):
    """The caller's query or k is unusable (HTTP 400 when served)."""


class NotIngested(UserError):
    """The database does not hold the corpus this retriever was built for (HTTP 503 when served)."""


def settings_from_dict(config: dict) -> Settings:
    """Typed settings from a resolved config mapping (a run's config.yaml, a promoted config),
    validated by the same structured schema as ``run.py``; unknown keys are a ConfigError."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    known = set(Settings.__dataclass_fields__)
    body = {k: v for k, v in config.items() if k in known and k not in ("db", "tracking")}
    try:
        cfg = OmegaConf.merge(schema(), body)
    except OmegaConfBaseException as exc:
        raise ConfigError(f"retriever config: {str(exc).splitlines()[0]}") from None
    return settings_from_cfg(cfg)


def load_config_file(path: str | Path) -> dict:
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"{p}: no such config file",
                          hint="give a resolved config YAML (e.g. experiments/promoted/default.yaml) or Hydra overrides")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: a config file must be a mapping")
    return data


def corpus_name(settings: Settings) -> str:
    """The corpus name ``load_corpus`` would give (part of the strategy id), without reading files."""
    from ..experiment import corpus_path

    root = resolve_corpus_dir(str(corpus_path(settings)))
    return indexed_name(settings.corpus.name or (DEMO if root == demo_corpus_dir() else root.name),
                        settings.corpus.copies)


def ingest_command(overrides: Sequence[str]) -> str:
    sets = " ".join(f"--set {o}" for o in overrides)
    return f"rag-exp ingest {sets}".rstrip()


class Retriever:
    """A ready retriever: one database connection, one embedder, the config's retrieval params."""

    def __init__(self, settings: Settings, *, expected_corpus_digest: str | None = None, ingest: bool = False,
                 overrides: Sequence[str] = (), label: str = "") -> None:
        from ..db.connect import redact_url, resolve_database_url
        from ..experiment import open_database

        # use_cache=False: see the module docstring
        self.settings = replace(settings, retrieval=replace(settings.retrieval, use_cache=False))
        self.expected_corpus_digest = expected_corpus_digest
        self.label = label
        self._overrides = list(overrides)
        self._lock = threading.Lock()  # one connection; the scoring server calls predict from threads
        self.conn = open_database(settings)
        self.where = redact_url(resolve_database_url(settings.db.url, settings.db.pgdata_dir))

        if system_type(settings.retrieval.variant).kind == "team":  # a team's system: it calls the target
            self._open_external()
        else:
            self.embedder = load_embedder(settings.embedding.name)
            self.strategy = self._strategy(ingest)
            self._check_filters()
            self._engine = build_system(BuildInputs(self.settings, self.conn, (), self.strategy, self.embedder,
                                                    serving=True))
        self._texts = _chunk_texts(self._engine)
        self._blocks: dict[str, tuple[str, list]] = {}  # doc_id -> (title, parsed blocks), for breadcrumbs

    def _open_external(self) -> None:
        """retrieval=external|http: the target is called per request and its passages placed in the
        corpus as in a run (no answer cache: a served model answers what the system says now);
        the corpus must be the one the champion was measured on."""
        from ..experiment import external_index

        docs = self._promoted_corpus(indexed=False)  # a team's system indexes itself: corpus.copies is ours
        self._engine = build_system(BuildInputs(self.settings, None, docs, serving=True))
        self.embedder = None
        self.strategy, _ = external_index(self.settings, self._engine.system, docs)

    def _check_filters(self) -> None:
        """A filter value no document of the served corpus has is an error, not empty answers."""
        filters = self.settings.retrieval.filters
        if filters.is_empty():
            return
        rows = self.conn.execute("SELECT doc_type, source_uri FROM documents WHERE corpus = %s",
                                 (self.strategy.corpus,)).fetchall()
        check_filters(filters, [SimpleNamespace(doc_type=t, source_uri=u) for t, u in rows], self.strategy.corpus)

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_config(cls, config: str | Path | Sequence[str] | dict | None = None, *, ingest: bool = False,
                    expected_corpus_digest: str | None = None) -> "Retriever":
        """``config``: Hydra overrides (a list, as ``run.py`` takes them), a resolved config file
        (YAML), or a resolved config mapping. ``None``: the default config."""
        if config is None or (isinstance(config, Sequence) and not isinstance(config, str)):
            from ..session import compose_settings

            overrides = list(config or [])
            settings, _ = compose_settings(overrides)
            return cls(settings, ingest=ingest, overrides=overrides, expected_corpus_digest=expected_corpus_digest,
                       label=" ".join(overrides) or "default config")
        if isinstance(config, dict):
            return cls(settings_from_dict(config), ingest=ingest, expected_corpus_digest=expected_corpus_digest,
                       overrides=config_overrides(config), label="config")
        data = load_config_file(config)
        return cls(settings_from_dict(data), ingest=ingest, expected_corpus_digest=expected_corpus_digest,
                   overrides=config_overrides(data), label=str(config))

    @classmethod
    def from_champion(cls, name: str = "default", *, ingest: bool = False) -> "Retriever":
        """The champion ``rag-retriever-<name>@champion`` (re-registered from the committed
        record when the registry lacks it), built from the config and corpus digest in its model."""
        config, manifest = champion_model(name)
        return cls(settings_from_dict(config), ingest=ingest, overrides=config_overrides(config),
                   expected_corpus_digest=manifest.get("corpus_digest") or None,
                   label=f"champion {manifest.get('model', name)} v{manifest.get('version', '?')}")

    # -- the corpus check -----------------------------------------------------------------------
    def _strategy(self, ingest: bool) -> StrategyInfo:
        key = strategy_key(corpus_name(self.settings), self.settings.chunking, self.embedder.model_id,
                           self.settings.corpus.language)
        info = strategy_info(self.conn, key)
        expected = self.expected_corpus_digest
        how = (f"an operator ingests it: {ingest_command(self._overrides)} (from Python: ingest=True; "
               "a served model never ingests on request)")
        if info and (expected is None or info.content_digest == expected):
            return info
        if not ingest:
            if not info:
                raise NotIngested(f"the database at {self.where} has no strategy {key} for this config "
                                  f"(corpus {corpus_name(self.settings)}, chunking {self.settings.chunking.name}, "
                                  f"model {self.embedder.model_id}): {how}")
            raise NotIngested(f"the database at {self.where} holds strategy {key} built on corpus digest "
                              f"{info.content_digest[:12]}, but this retriever was promoted on "
                              f"{expected[:12]}: {how}")
        return self._ingest(key)

    def _promoted_corpus(self, indexed: bool = True) -> list:
        """The configured corpus's documents, refused when they are not the corpus the retriever
        was promoted on (its chunks, or an external system's placed passages, would be another's)."""
        from ..experiment import corpus_path

        docs = load_corpus(corpus_path(self.settings), self.settings.corpus.name)
        if indexed:  # the documents a run indexed (corpus.copies=exclude: without the copies)
            docs, _ = indexed_documents(docs, self.settings.corpus.copies, self.settings.corpus.copy_threshold)
        digest = corpus_manifest(docs)["digest"]
        if self.expected_corpus_digest and digest != self.expected_corpus_digest:
            raise NotIngested(f"the corpus at {corpus_path(self.settings)} has digest {digest[:12]}, but this "
                              f"retriever was promoted on {self.expected_corpus_digest[:12]}: refusing to serve "
                              "another corpus (check out the promoted corpus, or promote a run made on this one)")
        return docs

    def _ingest(self, key: str) -> StrategyInfo:
        docs = self._promoted_corpus()
        with self._lock:
            ingest(self.conn, docs, self.settings.chunking, self.embedder, self.settings.retrieval.hnsw,
                   progress=self.settings.progress, model_batch_size=self.settings.embedding.batch_size,
                   language=self.settings.corpus.language)
        return strategy_info(self.conn, key)

    # -- search ---------------------------------------------------------------------------------
    @property
    def max_k(self) -> int:
        """Each leg fetches ``fusion.depth`` candidates; a larger k would be silently short."""
        return self.settings.fusion.depth

    def validate(self, queries: Sequence[Any], k: Any) -> list[str]:
        if isinstance(k, bool) or not isinstance(k, int):
            raise InvalidQuery(f"k: must be an integer, got {k!r}")
        if not 1 <= k <= self.max_k:
            raise InvalidQuery(f"k: must be between 1 and {self.max_k} (fusion.depth of this retriever), got {k}")
        if not queries:
            raise InvalidQuery("query: no query given")
        if len(queries) > MAX_QUERIES:
            raise InvalidQuery(f"query: at most {MAX_QUERIES} queries per call, got {len(queries)}")
        out = []
        for i, q in enumerate(queries):
            if not isinstance(q, str):
                raise InvalidQuery(f"query[{i}]: must be a string, got {type(q).__name__}")
            if not q.strip():
                raise InvalidQuery(f"query[{i}]: is empty")
            problem = query_problem(q)  # the limits every entry point applies (NUL, characters, words)
            if problem:
                raise InvalidQuery(f"query[{i}]: {problem}")
            out.append(q)
        return out

    def search(self, query: str, k: int = 10) -> list[SearchHit]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[SearchHit]]:
        queries = self.validate(queries, k)
        with self._lock:
            ranked = self._engine.search_many(queries, k)
            ids = {h.chunk_id for r in ranked for h in r.hits}
            texts = self._texts.chunk_texts(list(ids)) if ids else {}
            return [[SearchHit.from_hit(h, texts[h.chunk_id], self._heading(h.doc_id, h.start)) for h in r.hits]
                    for r in ranked]

    def _heading(self, doc_id: str, offset: int) -> str:
        if doc_id not in self._blocks:
            row = self.conn.execute("SELECT title, text FROM documents WHERE corpus = %s AND doc_id = %s",
                                    (self.strategy.corpus, doc_id)).fetchone()
            self._blocks[doc_id] = (row[0], parse_blocks(row[1])) if row else ("", [])
        title, blocks = self._blocks[doc_id]
        path = heading_path_at(blocks, offset)
        if path and path[0].replace("`", "") == title.replace("`", ""):  # the page title, often with code marks
            path = path[1:]
        return " > ".join([p for p in (title, *path) if p])

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Retriever":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Retriever({self.label!r}, strategy={self.strategy.strategy_id!r}, db={self.where!r})"


def _chunk_texts(engine: object) -> ChunkTexts:
    """What serving shows beside each hit: every system it serves must offer its hits' text."""
    texts = capability(engine, ChunkTexts)
    if texts is None:
        raise ConfigError(f"retrieval.variant={getattr(engine, 'variant', '?')}: this system cannot say its hits' "
                          "text, which serving shows")
    return texts


def config_overrides(config: dict) -> list[str]:
    """The Hydra overrides that make ``rag-exp ingest`` build this config's strategy (corpus,
    chunking, embedding, HNSW): what the "how to ingest" line prints."""
    out = []
    for group, keys in (("corpus", ("path", "name")), ("chunking", ("name", "max_tokens", "overlap", "breadcrumbs")),
                        ("embedding", ("name",))):
        node = config.get(group) or {}
        for key in keys:
            if key in node and node[key] is not None:
                value = node[key]
                out.append(f"{group}.{key}={str(value).lower() if isinstance(value, bool) else value}")
    hnsw = ((config.get("retrieval") or {}).get("hnsw") or {})
    out += [f"retrieval.hnsw.{k}={hnsw[k]}" for k in ("m", "ef_construction") if hnsw.get(k) is not None]
    return out
