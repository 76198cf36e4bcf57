"""The configured retriever outside a Hydra run: for ``rag-exp`` commands (golden generate /
label / add, triage, bench).

``open_retriever(["retrieval=keyword", "chunking=fixed"])`` composes the same Hydra config
``run.py`` uses (with the same overrides syntax), ingests if needed, and returns a session.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

from psycopg.rows import dict_row

from .config import Settings, check_override_keys, free_mapping_overrides, settings_from_cfg
from .corpus.copies import indexed_documents
from .corpus.loader import load_corpus
from .embedding.cost import CostGate, EstimateOnly
from .experiment import check_credentials, corpus_path, load_settings_embedder, open_database
from .retrieval.systems import BuildInputs, build_system, system_type
from .chunk_index import ingest, strategy_info


def conf_dir() -> Path:
    """The primary config folder (see :mod:`rag_experiments.conf_source`)."""
    from .conf_source import config_source

    return config_source().primary


def compose_settings(overrides: list[str] | None = None) -> tuple[Settings, object]:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from .config import register_schema

    import yaml
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from .config import describe_hydra_error
    from .errors import ConfigError

    from .conf_source import config_source

    register_schema()
    source = config_source()
    check_override_keys(list(overrides or []), source.dirs)
    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(source.primary), version_base="1.3"):
            cfg = compose(config_name=source.name, overrides=free_mapping_overrides(list(overrides or []))
                          + source.searchpath_overrides())
    except (HydraException, OmegaConfBaseException) as exc:  # one line (redacted where printed), no traceback
        raise ConfigError(f"overrides {' '.join(overrides or [])}: {describe_hydra_error(exc)}") from None
    except yaml.YAMLError as exc:  # a project's conf/*.yaml that does not parse (the CLI checks first; a notebook did not)
        from .conf_yaml import check_conf_yaml
        from .conf_source import PACKAGED_CONF

        for folder in source.dirs:
            if folder != PACKAGED_CONF:
                check_conf_yaml(folder)  # raises the ConfigError naming file, line and column
        raise ConfigError(f"a config file is not valid YAML: {' '.join(str(exc).split())}") from None
    return settings_from_cfg(cfg), cfg


class RetrieverSession:
    def __init__(self, settings: Settings, progress: bool = True, *, yes: bool = False, dry_run: bool = False) -> None:
        """``yes``: pay without asking; ``dry_run``: print what embedding would cost, then stop."""
        self.settings = settings
        if not dry_run:
            check_credentials(settings)
        self.conn = open_database(settings)
        docs = load_corpus(corpus_path(settings), settings.corpus.name)
        self._docs = {d.doc_id: d for d in docs}
        self._by_uri = {d.source_uri: d for d in docs}
        # corpus.copies: what is indexed, and the copies found (rag-exp ingest prints them)
        indexed, self.copy_report = indexed_documents(docs, settings.corpus.copies, settings.corpus.copy_threshold)
        if system_type(settings.retrieval.variant).kind == "team":  # a team's system: nothing of ours to ingest
            self._open_external(settings, docs)
            return
        self.embedder = load_settings_embedder(settings)
        if dry_run and not getattr(self.embedder, "paid", False):
            # a dry run promises an estimate of what embedding costs, then a stop: a local model costs
            # nothing, and going on would run the whole ingest (minutes) the user asked not to run
            self.conn.close()
            print(f"dry run: {settings.embedding.name} runs on this machine, so embedding costs nothing; "
                  "nothing was ingested (run the same command without --dry-run to ingest)", file=sys.stderr)
            raise EstimateOnly("dry run: a local model, nothing to estimate")
        self.cost_gate = CostGate(self.embedder, confirm=settings.embedding.confirm and not yes,
                                  dry_run=dry_run)
        try:
            self.ingest_report = ingest(self.conn, indexed, settings.chunking, self.embedder, settings.retrieval.hnsw,
                                        progress=progress, model_batch_size=settings.embedding.batch_size,
                                        before_paying=self.cost_gate, language=settings.corpus.language)
        except BaseException:
            self.conn.close()
            raise
        self.strategy = strategy_info(self.conn, self.ingest_report.strategy_id, settings.retrieval.hnsw)
        self.retriever = build_system(BuildInputs(settings, self.conn, docs, self.strategy, self.embedder))

    def _open_external(self, settings: Settings, docs: list) -> None:
        from .experiment import external_index

        try:
            self.retriever = build_system(BuildInputs(settings, self.conn, docs))
        except BaseException:
            self.conn.close()
            raise
        self.embedder = None
        self.strategy, self.ingest_report = external_index(settings, self.retriever.system, docs)

    @property
    def strategy_id(self) -> str:
        return self.strategy.strategy_id

    def _chunk_rows(self, where: str, *params) -> list[dict]:
        """Chunk records (the span, its text and token count, the document's hash) by column name."""
        rows = self.conn.cursor(row_factory=dict_row).execute(
            'SELECT chunk_id, doc_id, source_uri, doc_type, start_char AS start, end_char AS "end", text, n_tokens'
            f" FROM chunks WHERE strategy_id = %s {where}", (self.strategy_id, *params)).fetchall()
        return [{**r, "doc_hash": self._docs[r["doc_id"]].content_hash} for r in rows]

    def chunks(self) -> list[dict]:
        return self._chunk_rows("ORDER BY doc_id, ordinal")

    def chunk(self, chunk_id: str) -> dict | None:
        return next(iter(self._chunk_rows("AND chunk_id = %s", chunk_id)), None)

    def document(self, key: str) -> dict | None:
        d = self._docs.get(key) or self._by_uri.get(key)
        if d is None:
            return None
        return {"doc_id": d.doc_id, "source_uri": d.source_uri, "title": d.title, "doc_type": d.doc_type,
                "text": d.text, "content_hash": d.content_hash}

    def search(self, query: str, k: int = 20) -> list[dict]:
        """The configured retriever's hits as records with their text and document hash."""
        from .limits import check_query

        check_query(query, "query")  # a lone surrogate, a NUL or an essay: one line, not a traceback from SQL or a hash
        docs = self._docs
        out = []
        for h in self.retriever.search(query, k).hits:
            d = docs.get(h.doc_id)  # None: an external passage that could not be placed in the corpus
            out.append({**asdict(h), "text": d.text[h.start:h.end] if d else "", "doc_hash": d.content_hash if d else ""})
        return out

    def close(self) -> None:
        self.conn.close()


def open_retriever(overrides: list[str] | None = None, progress: bool = True, *, yes: bool = False,
                   dry_run: bool = False) -> RetrieverSession:
    settings, _ = compose_settings(overrides)
    return RetrieverSession(settings, progress=progress, yes=yes, dry_run=dry_run)
