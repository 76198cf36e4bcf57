"""The configured retriever outside a Hydra run: for ``rag-exp`` commands (golden generate /
label / add, triage, bench).

``open_retriever(["retrieval=keyword", "chunking=fixed"])`` composes the same Hydra config
``run.py`` uses (with the same overrides syntax), ingests if needed, and returns a session.
"""

from __future__ import annotations

from pathlib import Path

from .config import Settings, check_override_keys, project_root, settings_from_cfg
from .corpus.loader import load_corpus
from .embedding.cost import CostGate
from .experiment import check_credentials, corpus_path, load_settings_embedder, open_database
from .retrieval.retriever import Retriever
from .store import hnsw_index_name, ingest, strategy_info


def conf_dir() -> Path:
    local = project_root() / "conf"
    return local if (local / "config.yaml").exists() else Path(__file__).resolve().parent.parent / "conf"


def compose_settings(overrides: list[str] | None = None) -> tuple[Settings, object]:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from .config import register_schema

    register_schema()
    check_override_keys(list(overrides or []), conf_dir())
    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides or []))
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
        self.embedder = load_settings_embedder(settings)
        self.cost_gate = CostGate(self.embedder, confirm=settings.embedding.confirm and not yes,
                                  dry_run=dry_run)
        try:
            self.ingest_report = ingest(self.conn, docs, settings.chunking, self.embedder, settings.retrieval.hnsw,
                                        progress=progress, model_batch_size=settings.embedding.batch_size,
                                        before_paying=self.cost_gate)
        except BaseException:
            self.conn.close()
            raise
        self.strategy = {**strategy_info(self.conn, self.ingest_report.strategy_id),
                         "hnsw_index": hnsw_index_name(self.ingest_report.strategy_id, settings.retrieval.hnsw)}
        self.retriever = Retriever(self.conn, self.strategy, self.embedder, settings.retriever_params)

    @property
    def strategy_id(self) -> str:
        return self.strategy["strategy_id"]

    def _row(self, r) -> dict:
        doc = self._docs[r[1]]
        return {"chunk_id": r[0], "doc_id": r[1], "source_uri": r[2], "doc_type": r[3], "start": r[4],
                "end": r[5], "text": r[6], "n_tokens": r[7], "doc_hash": doc.content_hash}

    _COLS = "chunk_id, doc_id, source_uri, doc_type, start_char, end_char, text, n_tokens"

    def chunks(self) -> list[dict]:
        rows = self.conn.execute(f"SELECT {self._COLS} FROM chunks WHERE strategy_id = %s ORDER BY doc_id, ordinal",
                                 (self.strategy_id,)).fetchall()
        return [self._row(r) for r in rows]

    def chunk(self, chunk_id: str) -> dict | None:
        r = self.conn.execute(f"SELECT {self._COLS} FROM chunks WHERE strategy_id = %s AND chunk_id = %s",
                              (self.strategy_id, chunk_id)).fetchone()
        return self._row(r) if r else None

    def document(self, key: str) -> dict | None:
        d = self._docs.get(key) or self._by_uri.get(key)
        if d is None:
            return None
        return {"doc_id": d.doc_id, "source_uri": d.source_uri, "title": d.title, "doc_type": d.doc_type,
                "text": d.text, "content_hash": d.content_hash}

    def search(self, query: str, k: int = 20) -> list[dict]:
        ranked = self.retriever.search(query, k)
        out = []
        for h in ranked.hits:
            doc = self._docs[h.doc_id]
            out.append({"chunk_id": h.chunk_id, "doc_id": h.doc_id, "source_uri": h.source_uri,
                        "doc_type": h.doc_type, "start": h.start, "end": h.end, "text": doc.text[h.start:h.end],
                        "doc_hash": doc.content_hash, "rank": h.rank, "score": h.score, "leg_ranks": h.leg_ranks})
        return out

    def close(self) -> None:
        self.conn.close()


def open_retriever(overrides: list[str] | None = None, progress: bool = True, *, yes: bool = False,
                   dry_run: bool = False) -> RetrieverSession:
    settings, _ = compose_settings(overrides)
    return RetrieverSession(settings, progress=progress, yes=yes, dry_run=dry_run)
