"""Idempotent, incremental, transactional ingest of a corpus under one chunking strategy.

* Several strategies coexist: ``strategy_id`` is a column of ``chunks``.
* Re-running an unchanged config is a no-op (the strategy's ``content_digest`` matches).
* A changed corpus re-chunks only the documents whose content hash changed.
* Embeddings go through the store's cache (:func:`rag_experiments.store.embed_with_cache`), committed
  request by request *outside* the strategy transaction: an interrupted ingest leaves no half
  strategy behind, yet the embeddings it paid for are kept, and a resumed one never repeats a paid call.
* Strategies of different dimensions coexist; each one's HNSW index casts to its own dimension
  (``halfvec`` above pgvector's 2,000-dimension ``vector`` index limit: :mod:`.vector_types`).
* Documents are chunked, embedded and staged a group at a time (``INGEST_GROUP_CHARS``), so the
  process holds one group's chunks and none of the corpus's vectors; a paid embedder is still
  priced once for every group before its first request.
* BM25 statistics (postings, N, chunk lengths) are written in the same transaction as the
  chunks, for the re-chunked documents only (:mod:`rag_experiments.bm25_stats`).
* A session-level advisory lock per strategy makes parallel sweep jobs wait for one builder
  instead of building the same strategy twice (the waiters find it built and return).

What the ingest leaves behind and retrieval reads (strategies, HNSW indexes, the embedding cache)
is :mod:`rag_experiments.store`; its names are re-exported here.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from typing import Callable

import psycopg

from . import bm25_stats
from .chunking import ChunkingParams, chunk_corpus, strategy_key
from .corpus.loader import corpus_manifest
from .embedding.base import Embedder
from .embedding.cost import EmbeddingEstimate, estimate
from .embedding.executor import LocalEmbedding
from .embedding.shipped import load as load_shipped
from .db.locks import advisory_lock
from .errors import DatabaseError
from .identifiers import extract_identifiers
from .ingest_progress import IngestEstimate, IngestInterrupted, IngestProgress
# The store's names, read here and re-exported: ``from rag_experiments.chunk_index import
# strategy_info`` (and the rest) keeps working for callers and projects written before the split.
# _build calls embed_with_cache and ensure_hnsw_index through this module's names (a test or
# bench_scale may wrap them here).
from .store import (EMBED_BATCH_TEXTS, HNSW_BUILD_MEMORY, Embedded, HnswParams, StrategyInfo, cache_rows,
                    check_language, embed_with_cache, embedding_space_key, ensure_hnsw_index, hnsw_index_name,
                    row_dim, settle, strategy_info, strategy_language, text_search_configs)
from .types import Chunk, Document, sha256_text

__all__ = ["BeforePaying", "CHUNKS_WRITER_LOCK", "INGEST_GROUP_CHARS", "IngestReport", "ingest",
           # the store's, re-exported
           "EMBED_BATCH_TEXTS", "HNSW_BUILD_MEMORY", "Embedded", "HnswParams", "StrategyInfo", "check_language",
           "embed_with_cache", "embedding_space_key", "ensure_hnsw_index", "hnsw_index_name", "row_dim", "settle",
           "strategy_info", "strategy_language", "text_search_configs"]

# Called with the estimate of what a paid API is about to embed (cache misses only), once, before
# the first request: prints it and asks for confirmation, or raises to stop (embedding.cost.CostGate).
BeforePaying = Callable[[EmbeddingEstimate], None]


@dataclass(frozen=True)
class IngestReport:
    strategy_id: str
    corpus: str
    n_documents: int
    n_chunks: int
    docs_rechunked: int
    chunks_written: int
    texts_embedded: int
    embedding_cache_hits: int
    seconds: float
    unchanged: bool
    settle_seconds: float = 0.0  # part of ``seconds``: see :func:`settle`
    shipped_vectors: int = 0  # texts whose vectors were read from the demo's shipped file, not embedded

    def summary(self) -> str:
        if self.unchanged:
            return (f"{self.strategy_id}: unchanged ({self.n_documents} documents, {self.n_chunks} chunks) "
                    f"in {self.seconds:.2f}s")
        return (f"{self.strategy_id}: {self.n_documents} documents, {self.n_chunks} chunks "
                f"({self.docs_rechunked} documents re-chunked, {self.chunks_written} chunks written, "
                f"{self.texts_embedded} texts embedded, {self.embedding_cache_hits} embedding cache hits"
                + (f", {self.shipped_vectors} vectors shipped with the demo" if self.shipped_vectors else "")
                + f") in {self.seconds:.1f}s")


def _lock_key(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


# Every ingest's write transaction (documents, chunks, the HNSW build) takes this lock first.
# Without it two sweep jobs building different strategies deadlock: each COPY holds
# ROW EXCLUSIVE on ``chunks`` and each CREATE INDEX then waits for SHARE, which that conflicts
# with. Chunking and embedding happen before the transaction, so they stay parallel.
CHUNKS_WRITER_LOCK = _lock_key("rag-experiments:chunks-writer")


_CHUNK_COLUMNS = ("strategy_id, chunk_id, doc_id, doc_hash, source_uri, doc_type, ordinal, start_char, end_char,"
                  " n_tokens, text, indexed_text, text_hash, identifiers")


# An ingest chunks, embeds and stages its documents in groups of about this many characters of
# text, so it holds one group's chunks at a time, never the corpus's (peak RSS: bench --scale).
INGEST_GROUP_CHARS = 4_000_000


def _doc_groups(docs: list[Document], max_chars: int) -> list[list[Document]]:
    """Consecutive groups of ``docs`` of at most ``max_chars`` characters (at least one document)."""
    groups: list[list[Document]] = []
    size = 0
    for d in docs:
        if not groups or (groups[-1] and size + len(d.text) > max_chars):
            groups.append([])
            size = 0
        groups[-1].append(d)
        size += len(d.text)
    return groups


def _price(conn: psycopg.Connection, embedder: Embedder, groups: list[list[Document]], params: ChunkingParams,
           key: str, space: str) -> EmbeddingEstimate | None:
    """What a paid embedder would be sent: every group chunked once to count its uncached texts
    (a text repeated across groups once), without embedding. The groups are then chunked again to
    be embedded: a second chunking costs seconds, a second question to the user costs trust."""
    total: EmbeddingEstimate | None = None
    seen: set[str] = set()
    for group in groups:
        texts = {}
        for c in chunk_corpus(group, params, embedder, key):
            h = sha256_text(c.indexed_text)
            if h not in seen:
                texts[h] = c.indexed_text
        seen.update(texts)
        cached = {h for (h,) in cache_rows(conn, space, list(texts))}
        part = estimate(embedder, [t for h, t in texts.items() if h not in cached])
        total = part if total is None else total + part
    return total


def _stage_chunks(conn: psycopg.Connection, key: str, chunks: list[Chunk], by_id: dict, first: int,
                  language: str = "english") -> None:
    """COPY one group's chunk rows (no vectors) into the session's ``chunk_stage``, numbered from ``first``."""
    with conn.cursor().copy(f"COPY chunk_stage (ord, {_CHUNK_COLUMNS}) FROM STDIN") as cp:
        for i, c in enumerate(chunks, start=first):
            d = by_id[c.doc_id]
            cp.write_row((i, key, c.chunk_id, c.doc_id, d.content_hash, d.source_uri, d.doc_type, c.ordinal,
                          c.start, c.end, c.n_tokens, c.text, c.indexed_text, sha256_text(c.indexed_text),
                          extract_identifiers(c.indexed_text, language)))


def _write_chunks(conn: psycopg.Connection, key: str, space: str, staged: int) -> None:
    """Insert the staged chunks with their vectors joined from the embedding cache, in chunk
    order, inside the caller's write transaction."""
    conn.execute("ANALYZE chunk_stage")  # a temporary table has no statistics until asked
    columns = ", ".join(f"s.{c.strip()}" for c in _CHUNK_COLUMNS.split(","))
    written = conn.execute(
        # ts_config: the strategy's text search configuration, from which the generated tsv is computed
        f"INSERT INTO chunks ({_CHUNK_COLUMNS}, embedding, ts_config) SELECT {columns}, e.embedding,"
        " (SELECT language FROM strategies WHERE strategy_id = %s) FROM chunk_stage s"
        " JOIN embedding_cache e ON e.model = %s AND e.text_hash = s.text_hash ORDER BY s.ord", (key, space)).rowcount
    if written != staged:  # only if cache rows were deleted after embed_with_cache wrote them
        raise DatabaseError(f"ingest of {key}: {staged - written} of {staged} chunks' vectors are no "
                            "longer in embedding_cache (deleted while this ingest ran?); nothing was written",
                            hint="run the ingest again: it embeds what is missing")


def ingest(conn: psycopg.Connection, docs: list[Document], params: ChunkingParams, embedder: Embedder,
           hnsw: HnswParams = HnswParams(), *, progress: bool = False, model_batch_size: int = 16,
           before_paying: BeforePaying | None = None, executor=None, shipped_vectors: bool = True,
           language: str = "english") -> IngestReport:
    """Make the strategy for (corpus, params, embedder, language) match ``docs``; do no more work than needed.

    ``shipped_vectors``: read the vectors shipped with the demo corpus for the texts they cover
    (:mod:`.embedding.shipped`); False embeds every uncached text (what a benchmark of the model wants).
    ``language``: ``corpus.language``, the PostgreSQL text search configuration of the strategy's
    keyword index (checked against ``pg_ts_config`` before any other work).
    """
    t0 = time.perf_counter()
    check_language(conn, language)
    corpus = docs[0].corpus if docs else "empty"
    key = strategy_key(corpus, params, embedder.model_id, language)
    manifest = corpus_manifest(docs)
    index_name = hnsw_index_name(key, hnsw)

    def current() -> tuple | None:
        return conn.execute(
            "SELECT content_digest, n_chunks FROM strategies WHERE strategy_id = %s", (key,)
        ).fetchone()

    def has_index() -> bool:
        return conn.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", (index_name,)).fetchone() is not None

    row = current()
    if row and row[0] == manifest["digest"] and has_index():
        return IngestReport(key, corpus, len(docs), row[1], 0, 0, 0, 0, time.perf_counter() - t0, True)

    # One builder per strategy across processes (parallel sweep jobs): the others wait here,
    # then find the strategy built and return at once instead of chunking and embedding again.
    lock = _lock_key(key)
    advisory_lock(conn, lock, f"building chunking strategy {key} (another ingest)")
    try:
        row = current()
        if row and row[0] == manifest["digest"] and has_index():
            return IngestReport(key, corpus, len(docs), row[1], 0, 0, 0, 0, time.perf_counter() - t0, True)
        return _build(conn, docs, params, embedder, hnsw, key, corpus, manifest, row, t0, progress, model_batch_size,
                      before_paying, executor, shipped_vectors, language)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))


def _build(conn, docs, params, embedder, hnsw, key, corpus, manifest, row, t0, progress,
           model_batch_size, before_paying=None, executor=None, shipped_vectors=True,
           language: str = "english") -> IngestReport:
    show = IngestProgress(key, enabled=progress, started=t0)
    try:
        return _build_steps(conn, docs, params, embedder, hnsw, key, corpus, manifest, row, t0, progress,
                            model_batch_size, before_paying, executor, shipped_vectors, language, show)
    except IngestInterrupted:
        raise
    except KeyboardInterrupt:
        # one line saying what is kept (the embeddings, committed batch by batch) and that a re-run resumes
        raise IngestInterrupted(show.interrupted_line()) from None


def _estimate(conn: psycopg.Connection, embedder: Embedder, groups: list[list[Document]], first: list[Chunk],
              space: str, shipped_vectors: bool, executor, model_batch_size: int) -> IngestEstimate:
    """The whole ingest's time before it starts: chunks and cache misses counted on the first group
    (scaled by characters to the others), the model's rate measured by one call on this machine now,
    the index phases at their measured seconds per chunk (:mod:`.ingest_progress`)."""
    scale = sum(len(d.text) for g in groups for d in g) / max(1, sum(len(d.text) for d in groups[0]))
    texts = {sha256_text(c.indexed_text): c.indexed_text for c in first}
    cached = {h for (h,) in cache_rows(conn, space, list(texts))}
    missing = [h for h in texts if h not in cached]
    if shipped_vectors and missing:
        pack = load_shipped()
        if pack is not None:
            missing = [h for h in missing if h not in pack.lookup(space, missing)]
    local = (executor is None or type(executor) is LocalEmbedding) and getattr(embedder, "plan_requests", None) is None
    rate = None
    if local and len(missing) >= 4 * model_batch_size:  # fewer: seconds of work, not worth a probe call
        probe = [texts[h] for h in missing[:model_batch_size]]
        t = time.perf_counter()
        embedder.embed(probe, batch_size=model_batch_size)  # thrown away: the batches below stay an ingest's own
        rate = len(probe) / max(time.perf_counter() - t, 1e-6)
    n_missing = round(len(missing) * scale * len(first) / max(1, len(texts)))
    return IngestEstimate(round(len(first) * scale), n_missing, rate, local)


def _build_steps(conn, docs, params, embedder, hnsw, key, corpus, manifest, row, t0, progress,
                 model_batch_size, before_paying, executor, shipped_vectors, language: str,
                 show: IngestProgress) -> IngestReport:
    existing = dict(conn.execute(
        "SELECT doc_id, min(doc_hash) FROM chunks WHERE strategy_id = %s GROUP BY doc_id", (key,)
    ).fetchall()) if row else {}
    changed = [d for d in docs if existing.get(d.doc_id) != d.content_hash]
    gone = set(existing) - {d.doc_id for d in docs}
    space = embedding_space_key(embedder, "document")
    by_id = {d.doc_id: d for d in docs}
    groups = _doc_groups(changed, INGEST_GROUP_CHARS)
    if before_paying is not None and getattr(embedder, "paid", False):
        # one question for the whole ingest, before the first request, as if it were one group
        priced = _price(conn, embedder, groups, params, key, space)
        if priced is not None and priced.texts:
            before_paying(priced)
    first: list[Chunk] | None = None
    rate = None
    if progress and groups:
        show.begin("chunking", f"{len(changed):,} documents" + (f" in {len(groups)} groups" if len(groups) > 1 else ""))
        first = chunk_corpus(groups[0], params, embedder, key, progress=len(groups) == 1)
        show.estimate = _estimate(conn, embedder, groups, first, space, shipped_vectors, executor, model_batch_size)
        rate = show.estimate.embed_rate
        if len(groups) == 1:
            show.end()
        show.say(show.estimate.line(key, len(groups)))

    # Group by group: chunk, embed into the cache (committed batch by batch), COPY the rows into a
    # session-local staging table; the chunks' rows take their vectors from the cache inside
    # PostgreSQL below. So the process holds one group's chunks and no vector of the corpus.
    conn.execute("DROP TABLE IF EXISTS pg_temp.chunk_stage")
    conn.execute(f"CREATE TEMP TABLE chunk_stage AS SELECT 0::integer AS ord, {_CHUNK_COLUMNS}"
                 " FROM chunks WITH NO DATA")
    try:
        staged = cache_hits = shipped = embedded_n = 0
        dim = None
        chunked_docs: set[str] = set()
        for i, group in enumerate(groups):
            label = f" group {i + 1}/{len(groups)}" if len(groups) > 1 else ""
            if first is not None and i == 0:
                chunks, first = first, None
            else:
                if len(groups) > 1:
                    show.phase = f"chunking{label}"
                chunks = chunk_corpus(group, params, embedder, key, progress=progress and len(groups) == 1)
            show.phase = f"embedding{label}"
            embedded = embed_with_cache(conn, embedder, [c.indexed_text for c in chunks], progress=progress,
                                        model_batch_size=model_batch_size, executor=executor,
                                        shipped=shipped_vectors, keep_vectors=False, progress_label=label,
                                        rate=rate, on_batch=show.count_embedded)
            _stage_chunks(conn, key, chunks, by_id, staged, language)
            staged += len(chunks)
            cache_hits += embedded.cache_hits
            shipped += embedded.shipped
            embedded_n += len(chunks) - embedded.cache_hits - embedded.shipped if chunks else 0
            dim = dim or embedded.dim
            chunked_docs.update(c.doc_id for c in chunks)
            del chunks, embedded
        # an API model's dimension may be known only from its first answer (or from cached vectors)
        dim = dim or embedder.dim or int(row_dim(conn, key) or 0)

        with conn.transaction():
            advisory_lock(conn, CHUNKS_WRITER_LOCK, "writing chunks (another ingest is writing its own)", xact=True)
            show.begin("writing chunks", f"{staged:,} rows with their vectors, tsvector and identifier indexes")
            _upsert_documents(conn, docs, corpus)
            conn.execute(
                "INSERT INTO strategies (strategy_id, corpus, chunker, params, embedding_model, dim, content_digest,"
                " n_chunks, language) VALUES (%s, %s, %s, %s, %s, %s, '', 0, %s::regconfig)"
                " ON CONFLICT (strategy_id) DO NOTHING",
                (key, corpus, params.name, json.dumps(asdict(params)), embedder.model_id, dim, language),
            )
            stale = [d.doc_id for d in changed] + sorted(gone)
            removed_dl = bm25_stats.remove_documents(conn, key, stale)
            if stale:
                conn.execute("DELETE FROM chunks WHERE strategy_id = %s AND doc_id = ANY(%s)", (key, stale))
            _write_chunks(conn, key, space, staged)
            n_chunks = conn.execute("SELECT count(*) FROM chunks WHERE strategy_id = %s", (key,)).fetchone()[0]
            show.end()
            show.begin("keyword index", f"BM25 postings and packs of {staged:,} chunks")
            added_dl = bm25_stats.add_documents(conn, key, sorted(chunked_docs))
            bm25_stats.refresh_packs(conn, key)
            bm25_stats.update_totals(conn, key, n_chunks, removed_dl, added_dl)
            conn.execute("UPDATE strategies SET content_digest = %s, n_chunks = %s, built_at = now() WHERE strategy_id = %s",
                         (manifest["digest"], n_chunks, key))
            show.end()
            show.begin("vector index", f"HNSW (m {hnsw.m}, ef_construction {hnsw.ef_construction}) over "
                       f"{n_chunks:,} chunks")
            ensure_hnsw_index(conn, key, dim, hnsw)
        show.committed = True
        show.end()
    finally:
        if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            conn.execute("DROP TABLE IF EXISTS pg_temp.chunk_stage")
    t_settle = time.perf_counter()
    show.begin("settle", "GIN pending lists merged, BM25 tables vacuumed, ANALYZE")
    settle(conn)
    show.end()
    done = time.perf_counter()
    show.finish()
    return IngestReport(key, corpus, len(docs), n_chunks, len(changed), staged, embedded_n, cache_hits,
                        done - t0, False, done - t_settle, shipped)


def _transient(text: str) -> str:
    """An equal string that dies after use. psycopg's C adapter reads a str through
    ``PyUnicode_AsUTF8AndSize``, which keeps a UTF-8 copy inside any non-ASCII str for its
    lifetime: handed the documents' own texts, it doubled the memory of every document the
    caller holds (1M chunks: +320 MiB of peak RSS; docs/reference/performance.md)."""
    return (text + " ")[:-1]


def _upsert_documents(conn: psycopg.Connection, docs: list[Document], corpus: str) -> None:
    """Insert or update the changed documents, inside the caller's write transaction: one COPY into
    a staging table and one INSERT from it (50k documents: 27 s, against 33 s for an INSERT each).
    The texts go through :func:`_transient`: that, not the COPY, is what keeps the caller's
    documents from growing (the COPY of their own texts measured +373 MiB at 1M chunks)."""
    stored = dict(conn.execute("SELECT doc_id, content_hash FROM documents WHERE corpus = %s", (corpus,)).fetchall())
    changed = [d for d in docs if stored.get(d.doc_id) != d.content_hash]
    if changed:
        conn.execute("CREATE TEMP TABLE document_stage ON COMMIT DROP AS SELECT corpus, doc_id, source_uri, title,"
                     " doc_type, text, content_hash FROM documents WITH NO DATA")
        with conn.cursor().copy("COPY document_stage (corpus, doc_id, source_uri, title, doc_type, text, content_hash)"
                                " FROM STDIN") as cp:
            for d in changed:
                cp.write_row((corpus, d.doc_id, d.source_uri, d.title, d.doc_type, _transient(d.text), d.content_hash))
        conn.execute(
            "INSERT INTO documents (corpus, doc_id, source_uri, title, doc_type, text, content_hash)"
            " SELECT corpus, doc_id, source_uri, title, doc_type, text, content_hash FROM document_stage ORDER BY doc_id"
            " ON CONFLICT (corpus, doc_id) DO UPDATE SET source_uri = EXCLUDED.source_uri,"
            " title = EXCLUDED.title, doc_type = EXCLUDED.doc_type, text = EXCLUDED.text,"
            " content_hash = EXCLUDED.content_hash")
    gone = set(stored) - {d.doc_id for d in docs}
    if gone:
        conn.execute("DELETE FROM documents WHERE corpus = %s AND doc_id = ANY(%s)", (corpus, sorted(gone)))


