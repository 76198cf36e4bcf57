"""Idempotent, incremental, transactional indexing of a corpus under one chunking strategy.

* Several strategies coexist: ``strategy_id`` is a column of ``chunks``.
* Re-running an unchanged config is a no-op (the strategy's ``content_digest`` matches).
* A changed corpus re-chunks only the documents whose content hash changed.
* Embeddings are cached by (embedding space, text hash), the space being the sha256 of the
  canonical JSON of (provider, model, dimensions, input type), and committed request by request
  *outside* the strategy transaction: an interrupted ingest leaves no half strategy behind, yet
  the embeddings it paid for are kept, and a resumed one never repeats a paid call.
* Strategies of different dimensions coexist; each one's HNSW index casts to its own dimension
  (``halfvec`` above pgvector's 2,000-dimension ``vector`` index limit: :mod:`.vector_types`).
* Documents are chunked, embedded and staged a group at a time (``INGEST_GROUP_CHARS``), so the
  process holds one group's chunks and none of the corpus's vectors; a paid embedder is still
  priced once for every group before its first request.
* BM25 statistics (postings, N, chunk lengths) are written in the same transaction as the
  chunks, for the re-chunked documents only (:mod:`rag_experiments.bm25_stats`).
* A session-level advisory lock per strategy makes parallel sweep jobs wait for one builder
  instead of building the same strategy twice (the waiters find it built and return).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable, NamedTuple

import numpy as np
import psycopg

from . import bm25_stats
from .cache_key import digest
from .chunking import ChunkingParams, chunk_corpus, strategy_key
from .corpus.loader import corpus_manifest
from .embedding.base import Embedder
from .embedding.cost import EmbeddingEstimate, estimate
from .errors import ConfigError, DatabaseError
from .identifiers import extract_identifiers
from .types import Chunk, Document, sha256_text
from .vector_types import cast_sql, opclass

# Called with the estimate of what a paid API is about to embed (cache misses only), once, before
# the first request: prints it and asks for confirmation, or raises to stop (embedding.cost.CostGate).
BeforePaying = Callable[[EmbeddingEstimate], None]


@dataclass(frozen=True)
class HnswParams:
    """The ``retrieval.hnsw`` config group: pgvector HNSW build parameters, and the query-time
    ``ef_search`` (set per query; None: max(40, depth))."""

    m: int = 16
    ef_construction: int = 64
    ef_search: int | None = None

    def __post_init__(self) -> None:
        if self.m < 2 or self.ef_construction < 4:
            raise ConfigError(f"retrieval.hnsw: m must be >= 2 and ef_construction >= 4, got m={self.m}, "
                              f"ef_construction={self.ef_construction}")
        if self.ef_search is not None and not 1 <= self.ef_search <= 1000:
            raise ConfigError(f"retrieval.hnsw.ef_search: must be in 1..1000, got {self.ef_search}")


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


def hnsw_index_name(strategy_id: str, hnsw: HnswParams) -> str:
    return f"hnsw_{strategy_id.replace('-', '_')}_m{hnsw.m}_ef{hnsw.ef_construction}"


def _as_array(value) -> np.ndarray:
    """pgvector returns numpy arrays or ``Vector`` objects depending on the adapter path."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


def embedding_space_key(embedder: Embedder, input_type: str) -> str:
    """The cache space of ``embedder``'s vectors for ``input_type``: sha256 of canonical JSON."""
    return digest(embedder.space_parts(input_type))


def _register_space(conn: psycopg.Connection, space: str, parts: dict) -> None:
    conn.execute(
        "INSERT INTO embedding_spaces (space_key, provider, model, dimensions, input_type) VALUES (%s, %s, %s, %s, %s)"
        " ON CONFLICT DO NOTHING",
        (space, parts["provider"], parts["model"], parts.get("dimensions"), parts["input_type"]))


class Embedded(NamedTuple):
    vectors: np.ndarray | None  # one row per text, in order; None with keep_vectors=False
    cache_hits: int  # unique texts found in the database's embedding cache
    shipped: int = 0  # unique texts read from the vectors shipped with the demo (embedding.shipped)
    dim: int | None = None  # the vectors' dimension (None: no text, and the model does not say)


# Texts per executor call (a Ray task, or this process's model call loop): each call's vectors are
# committed to the cache as they arrive. devtools/shipped_make.py batches the same way.
EMBED_BATCH_TEXTS = 256


# Hashes per lookup in the embedding cache (one ``= ANY`` array each).
_CACHE_LOOKUP_BATCH = 5000


def _cache_rows(conn: psycopg.Connection, space: str, hashes: list[str], columns: str = "", binary: bool = False):
    """``(text_hash, *columns)`` of the cached rows among ``hashes`` in ``space``, looked up in batches.
    ``columns``: a fixed SQL fragment from this module (", embedding"), never user input."""
    for lo in range(0, len(hashes), _CACHE_LOOKUP_BATCH):
        yield from conn.execute(f"SELECT text_hash{columns} FROM embedding_cache WHERE model = %s AND text_hash = ANY(%s)",
                                (space, hashes[lo : lo + _CACHE_LOOKUP_BATCH]), binary=binary).fetchall()


def embed_with_cache(conn: psycopg.Connection, embedder: Embedder, texts: list[str], *, input_type: str = "document",
                     progress: bool = False, batch_size: int = EMBED_BATCH_TEXTS, model_batch_size: int = 16,
                     executor=None, shipped: bool = False,
                     keep_vectors: bool = True, progress_label: str = "") -> Embedded:
    """Vectors for ``texts`` via the (embedding space, text hash) cache.

    Misses are embedded in batches (an API embedder: one request per batch, planned within the
    provider's limits) and each batch is committed as it arrives. ``executor`` computes the
    batches (:class:`.embedding.executor.LocalEmbedding`: this process, the default; or
    :mod:`.scale.executors`' Ray cluster workers, passed in by the caller).
    ``shipped``: misses are first looked up in the vectors shipped with the demo corpus
    (:mod:`.embedding.shipped`), which are then cached like computed ones but counted apart.
    ``keep_vectors=False``: every text's vector ends in the cache and none is returned or read
    back (an ingest copies them from the cache inside PostgreSQL), so the process never holds
    the corpus's vectors: at 100k chunks of 384 floats, 154 MB and a stacked copy of it.
    """
    parts = embedder.space_parts(input_type)
    space = digest(parts)
    hashes = [sha256_text(t) for t in texts]
    found: dict[str, np.ndarray] = {}
    unique = list(dict.fromkeys(hashes))
    cached: set[str] = set()
    dim = embedder.dim
    if keep_vectors:  # binary: no text parsing of floats
        found.update({h: _as_array(v) for h, v in _cache_rows(conn, space, unique, ", embedding", binary=True)})
    else:
        for h, d in _cache_rows(conn, space, unique, ", vector_dims(embedding)"):
            cached.add(h)
            dim = dim or d
    missing = [h for h in unique if h not in found and h not in cached]
    by_hash = dict(zip(hashes, texts))
    n_shipped = 0
    if shipped and missing:
        from .embedding.shipped import load as load_shipped

        pack = load_shipped()
        got = pack.lookup(space, missing) if pack is not None else {}
        if got:
            with conn.transaction():
                _register_space(conn, space, parts)
                _cache_vectors(conn, space, list(got), list(got.values()))
            if keep_vectors:
                found.update(got)
            dim = dim or len(next(iter(got.values())))
            missing = [h for h in missing if h not in got]
            n_shipped = len(got)
    if missing:
        with conn.transaction():
            _register_space(conn, space, parts)
    plan = getattr(embedder, "plan_requests", None)
    if plan is not None:  # one API request per batch, so each paid answer is committed alone
        batches = [[missing[i] for i in idx] for idx in plan([by_hash[h] for h in missing], input_type)]
    else:
        batches = [missing[lo : lo + batch_size] for lo in range(0, len(missing), batch_size)]
    bar = None
    rate = None
    from .embedding.executor import LocalEmbedding

    local = executor is None or type(executor) is LocalEmbedding  # this process embeds (not Ray, not a test's)
    if progress and local and plan is None and len(missing) >= 4 * model_batch_size:
        # the rate on this machine now, from one model call on the first texts; its vectors are
        # thrown away (a text's int8 vector depends on its batch-mates, and the batches below
        # must stay those of an ingest without progress): 1/4 of a batch of 256 extra work at most
        probe = [by_hash[h] for h in missing[:model_batch_size]]
        t_probe = time.perf_counter()
        embedder.embed(probe, input_type=input_type, batch_size=model_batch_size)
        rate = len(probe) / max(time.perf_counter() - t_probe, 1e-6)
    if progress and missing:
        print(_embedding_plan_line(embedder, len(missing), len(unique) - len(missing) - n_shipped, n_shipped,
                                   rate, progress_label), file=sys.stderr, flush=True)
        from tqdm import tqdm

        bar = tqdm(total=len(missing), desc=f"embedding ({embedder.model_id}){progress_label}", unit="text")
    if executor is None:
        executor = LocalEmbedding(embedder, model_batch_size)
    for i, vecs in executor.map([[by_hash[h] for h in b] for b in batches], input_type):
        batch = batches[i]
        with conn.transaction():
            _cache_vectors(conn, space, batch, vecs)
        if keep_vectors:
            found.update(zip(batch, vecs))
        if len(vecs):
            dim = dim or int(np.asarray(vecs[0]).shape[-1])
        if bar is not None:
            bar.update(len(batch))
    if bar is not None:
        bar.close()
    hits = len(unique) - len(missing) - n_shipped  # missing: the texts the model embedded
    if not keep_vectors:
        return Embedded(None, hits, n_shipped, dim)
    if not texts:
        return Embedded(np.zeros((0, embedder.dim or 0), dtype=np.float32), 0, 0, embedder.dim)
    vectors = np.stack([found[h] for h in hashes])
    return Embedded(vectors, hits, n_shipped, int(vectors.shape[1]))


def _embedding_plan_line(embedder: Embedder, n: int, cached: int, shipped: int, rate: float | None,
                         label: str = "") -> str:
    """What an ingest is about to embed, printed before the bar: the count, and the time at the
    rate one model call just took on this machine (None: an API or a cluster, no estimate)."""
    done = f"{cached} cached" + (f", {shipped} shipped with the demo" if shipped else "")
    line = f"embedding{label}: {n} texts with {embedder.model_id} ({done})"
    if rate:
        eta = n / rate
        when = f"{eta:.0f} s" if eta < 120 else f"{eta / 60:.0f} min"
        line += f"; ~{when} at {rate:.0f} texts/s (the rate of one model call, just now)"
        if eta > 120 and getattr(embedder, "provider", "") == "onnx":
            line += "; embedding.name=static-minilm embeds 50x faster or more, for a first look"
    return line + ". If stopped, it resumes where it was: each batch is cached as it is embedded."


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
        cached = {h for (h,) in _cache_rows(conn, space, list(texts))}
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


def _cache_vectors(conn: psycopg.Connection, space: str, hashes: list[str], vectors) -> None:
    """Insert-or-skip into the embedding cache, inside the caller's transaction.

    COPY into a staging table first: a parallel job (another strategy of the same corpus) may be
    caching the same text at the same moment."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS embedding_stage (LIKE embedding_cache) ON COMMIT DELETE ROWS")
    with conn.cursor().copy("COPY embedding_stage (model, text_hash, embedding) FROM STDIN") as cp:
        for h, v in zip(hashes, vectors):
            cp.write_row((space, h, v))
    # Sorted, so two jobs caching overlapping texts take row locks in one order (no deadlock).
    conn.execute("INSERT INTO embedding_cache SELECT * FROM embedding_stage ORDER BY model, text_hash"
                 " ON CONFLICT DO NOTHING")


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
    conn.execute("SELECT pg_advisory_lock(%s)", (lock,))
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
            chunks = chunk_corpus(group, params, embedder, key, progress=progress and len(groups) == 1)
            embedded = embed_with_cache(conn, embedder, [c.indexed_text for c in chunks], progress=progress,
                                        model_batch_size=model_batch_size, executor=executor,
                                        shipped=shipped_vectors, keep_vectors=False,
                                        progress_label=f" group {i + 1}/{len(groups)}" if len(groups) > 1 else "")
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
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (CHUNKS_WRITER_LOCK,))
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
            added_dl = bm25_stats.add_documents(conn, key, sorted(chunked_docs))
            bm25_stats.refresh_packs(conn, key)
            bm25_stats.update_totals(conn, key, n_chunks, removed_dl, added_dl)
            conn.execute("UPDATE strategies SET content_digest = %s, n_chunks = %s, built_at = now() WHERE strategy_id = %s",
                         (manifest["digest"], n_chunks, key))
            ensure_hnsw_index(conn, key, dim, hnsw)
    finally:
        if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            conn.execute("DROP TABLE IF EXISTS pg_temp.chunk_stage")
    t_settle = time.perf_counter()
    settle(conn)
    done = time.perf_counter()
    return IngestReport(key, corpus, len(docs), n_chunks, len(changed), staged, embedded_n, cache_hits,
                        done - t0, False, done - t_settle, shipped)


def settle(conn: psycopg.Connection) -> None:
    """Leave the written tables as fast to query as they will be once autovacuum has passed, so
    the first queries after an ingest (and the bench that times them) are not the slow ones.

    * GIN pending lists merged: fresh tsvector and identifier entries wait in a list every
      full-text search scans linearly (up to 4 MB). Right after a cold demo ingest a bare AND
      full-text query took p50 9.4 ms instead of 0.5-0.6 ms.
    * The BM25 tables vacuumed: their visibility map lets the leg read postings and document
      frequencies from the covering keys alone (index-only scans; migration 0004). The whole
      manual's leg (before 0004) took p50 43 ms right after its ingest, 27.5 ms once autovacuum
      had passed.
    * The same for the packed postings and their chunk ordinals (migration 0007).
    * Planner statistics for all of them.
    ``chunks`` itself is not vacuumed: after a re-ingest that would also run the HNSW index's
    bulk delete, which can take minutes on a large table; autovacuum does that in the background.
    """
    try:
        with conn.transaction():
            conn.execute("SELECT gin_clean_pending_list('chunks_tsv_gin'), gin_clean_pending_list('chunks_identifiers_gin')")
    except psycopg.errors.InsufficientPrivilege:
        pass  # only the indexes' owner (or a superuser) may: autovacuum merges them later
    if conn.autocommit and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        # a non-owner gets a warning, not an error
        conn.execute("VACUUM (ANALYZE) bm25_postings, bm25_df, bm25_ords, bm25_packs")
    else:  # VACUUM cannot run inside a transaction block
        for table in ("bm25_postings", "bm25_df", "bm25_ords", "bm25_packs"):
            conn.execute(f"ANALYZE {table}")
    conn.execute("ANALYZE chunks")


def row_dim(conn: psycopg.Connection, key: str) -> int | None:
    row = conn.execute("SELECT dim FROM strategies WHERE strategy_id = %s", (key,)).fetchone()
    return row[0] if row else None


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


HNSW_BUILD_MEMORY = "1GB"


def ensure_hnsw_index(conn: psycopg.Connection, key: str, dim: int, hnsw: HnswParams) -> None:
    """A partial HNSW index per strategy: each strategy may use a model of another dimension."""
    name = hnsw_index_name(key, hnsw)
    prefix = f"hnsw_{key.replace('-', '_')}_"
    for (other,) in conn.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE %s", (prefix + "%",)):
        if other != name:
            conn.execute(f'DROP INDEX IF EXISTS "{other}"')  # name built from our own hex key
    # DDL cannot take bind parameters; every interpolated value is an int or our hex strategy id.
    assert all(ch.isalnum() or ch in "-_" for ch in key)
    # pgvector builds the graph in memory up to maintenance_work_mem, then on disk, much slower
    # (measured by the scale benchmark: 100k x 384 floats are 154 MB against the default 64 MB;
    # rebuilt with 1 GB the build took 264 s instead of 358 s). Raised for this transaction only
    # (set_config(..., true) = SET LOCAL), never lowered below what the server is configured to.
    conn.execute("SELECT set_config('maintenance_work_mem', %s, true) WHERE"
                 " pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes(%s)",
                 (HNSW_BUILD_MEMORY, HNSW_BUILD_MEMORY))
    conn.execute(
        f'CREATE INDEX IF NOT EXISTS "{name}" ON chunks USING hnsw ((embedding::{cast_sql(dim)}) {opclass(dim)})'
        f" WITH (m = {int(hnsw.m)}, ef_construction = {int(hnsw.ef_construction)}) WHERE strategy_id = '{key}'"
    )


@dataclass(frozen=True)
class StrategyInfo:
    """A row of ``strategies`` (:func:`strategy_info`), plus the HNSW index the vector leg searches
    when known (part of that leg's cache keys)."""

    strategy_id: str
    corpus: str
    chunker: str
    params: dict
    embedding_model: str
    dim: int
    content_digest: str
    n_chunks: int
    hnsw_index: str | None = None
    # Which build of that index: its OID (a dropped and re-created index, as a sweep over hnsw.m
    # back to an earlier value does, gets a new one) and the strategy's built_at (an ingest that
    # changed documents and then changed them back has the old digest but another graph). HNSW
    # builds are randomised and approximate, so a cached vector list is only valid for its build.
    index_build: str | None = None
    language: str = "english"  # corpus.language: the text search configuration of its keyword index


def strategy_info(conn: psycopg.Connection, strategy_id: str, hnsw: HnswParams | None = None) -> StrategyInfo | None:
    """The strategy (None when it is not built); ``hnsw``: the index the vector leg will search."""
    index = hnsw and hnsw_index_name(strategy_id, hnsw)
    row = conn.execute(
        "SELECT strategy_id, corpus, chunker, params, embedding_model, dim, content_digest, n_chunks,"
        " built_at, to_regclass(%s::text)::oid, language::text FROM strategies WHERE strategy_id = %s",
        (index, strategy_id),
    ).fetchone()
    if row is None:
        return None
    *fields, built_at, oid, language = row
    build = f"{oid or '-'}@{built_at.isoformat() if built_at else '-'}"
    return StrategyInfo(*fields, hnsw_index=index, index_build=build, language=language)


def text_search_configs(conn: psycopg.Connection) -> list[str]:
    """The text search configurations this PostgreSQL has (``pg_ts_config``): the values
    ``corpus.language`` accepts (``rag-exp corpus languages``)."""
    return [r[0] for r in conn.execute(
        "SELECT CASE WHEN n.nspname = 'pg_catalog' THEN c.cfgname ELSE n.nspname || '.' || c.cfgname END"
        " FROM pg_ts_config c JOIN pg_namespace n ON n.oid = c.cfgnamespace ORDER BY 1").fetchall()]


def check_language(conn: psycopg.Connection, language: str) -> None:
    """ConfigError (one line naming the choices) unless PostgreSQL has a text search configuration
    called ``language``."""
    choices = text_search_configs(conn)
    if language not in choices:
        raise ConfigError(f"corpus.language: PostgreSQL has no text search configuration {language!r}; "
                          f"choose one of {', '.join(choices)} (rag-exp corpus languages)")


_LANGUAGES: dict[str, str] = {}


def strategy_language(conn: psycopg.Connection, strategy_id: str) -> str:
    """The strategy's ``corpus.language`` (english when it is not built). A strategy id is a digest
    of its language (chunking.strategy_key), so the answer is cached by id."""
    if strategy_id not in _LANGUAGES:
        row = conn.execute("SELECT language::text FROM strategies WHERE strategy_id = %s", (strategy_id,)).fetchone()
        if row is None:
            return "english"
        _LANGUAGES[strategy_id] = row[0]
    return _LANGUAGES[strategy_id]
