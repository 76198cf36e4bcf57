"""The store: what an ingest leaves in PostgreSQL and what retrieval reads from it.

* ``strategies``: one row per built strategy (:func:`strategy_info`, its language, its dimension);
* the partial HNSW index per strategy (:class:`HnswParams`, :func:`ensure_hnsw_index`);
* ``embedding_cache``: vectors by (embedding space, text hash), the space being the sha256 of the
  canonical JSON of (provider, model, dimensions, input type) (:func:`embed_with_cache`, used by an
  ingest for documents and by retrieval for queries), committed batch by batch;
* :func:`settle`: the written tables left as fast to query as after autovacuum.

How a corpus becomes chunks, groups, staged rows and one write transaction is the ingest's job
(:mod:`rag_experiments.chunk_index`, which imports this module). Split from it (issue 46 item 3)
so retrieval reads the store without importing the ingest, and the store embeds through an
executor it is given (:mod:`.embedding.executor`'s local one by default; :mod:`.scale.executors`
adds Ray above it) without reaching into the layer above.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np
import psycopg

from .cache_key import digest
from .embedding.base import Embedder
from .embedding.executor import LocalEmbedding
from .errors import ConfigError
from .types import sha256_text
from .vector_types import cast_sql, opclass


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


def hnsw_index_name(strategy_id: str, hnsw: HnswParams) -> str:
    return f"hnsw_{strategy_id.replace('-', '_')}_m{hnsw.m}_ef{hnsw.ef_construction}"


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


def cache_rows(conn: psycopg.Connection, space: str, hashes: list[str], columns: str = "", binary: bool = False):
    """``(text_hash, *columns)`` of the cached rows among ``hashes`` in ``space``, looked up in batches.
    ``columns``: a fixed SQL fragment from the code (", embedding"), never user input."""
    for lo in range(0, len(hashes), _CACHE_LOOKUP_BATCH):
        yield from conn.execute(f"SELECT text_hash{columns} FROM embedding_cache WHERE model = %s AND text_hash = ANY(%s)",
                                (space, hashes[lo : lo + _CACHE_LOOKUP_BATCH]), binary=binary).fetchall()


def embed_with_cache(conn: psycopg.Connection, embedder: Embedder, texts: list[str], *, input_type: str = "document",
                     progress: bool = False, batch_size: int = EMBED_BATCH_TEXTS, model_batch_size: int = 16,
                     executor=None, shipped: bool = False,
                     keep_vectors: bool = True, progress_label: str = "", rate: float | None = None,
                     on_batch: Callable[[int], None] | None = None) -> Embedded:
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
    ``rate``: the model's texts/s measured by the caller (the ingest's estimate), so no second probe;
    ``on_batch(n)``: called after each batch of ``n`` texts is committed to the cache.
    """
    parts = embedder.space_parts(input_type)
    space = digest(parts)
    hashes = [sha256_text(t) for t in texts]
    found: dict[str, np.ndarray] = {}
    unique = list(dict.fromkeys(hashes))
    cached: set[str] = set()
    dim = embedder.dim
    if keep_vectors:  # binary: no text parsing of floats
        found.update({h: _as_array(v) for h, v in cache_rows(conn, space, unique, ", embedding", binary=True)})
    else:
        for h, d in cache_rows(conn, space, unique, ", vector_dims(embedding)"):
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
    local = executor is None or type(executor) is LocalEmbedding  # this process embeds (not Ray, not a test's)
    if rate is None and progress and local and plan is None and len(missing) >= 4 * model_batch_size:
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
        from .progress import progress_bar

        bar = progress_bar(total=len(missing), desc=f"embedding ({embedder.model_id}){progress_label}", unit="text")
    if executor is None:
        executor = LocalEmbedding(embedder, model_batch_size)
    try:
        for i, vecs in executor.map([[by_hash[h] for h in b] for b in batches], input_type):
            batch = batches[i]
            with conn.transaction():
                _cache_vectors(conn, space, batch, vecs)
            if keep_vectors:
                found.update(zip(batch, vecs))
            if len(vecs):
                dim = dim or int(np.asarray(vecs[0]).shape[-1])
            if on_batch is not None:
                on_batch(len(batch))
            if bar is not None:
                bar.update(len(batch))
    finally:  # on Ctrl-C too: the bar ends its line before the line saying what is kept
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
