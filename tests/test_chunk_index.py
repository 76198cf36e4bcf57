from __future__ import annotations

from dataclasses import replace

import pytest

from rag_experiments.chunking import ChunkingParams
from rag_experiments.db.connect import connect
from rag_experiments.chunk_index import HnswParams, hnsw_index_name, ingest


@pytest.fixture
def fresh(fresh_db_url):
    c = connect(fresh_db_url)
    yield c
    c.close()


def test_ingest_is_idempotent_and_strategies_coexist(fresh, mini_docs, embedder):
    heading = ChunkingParams("heading", 60)
    first = ingest(fresh, mini_docs, heading, embedder)
    assert not first.unchanged and first.n_chunks > 0 and first.texts_embedded == first.n_chunks
    again = ingest(fresh, mini_docs, heading, embedder)
    assert again.unchanged and again.n_chunks == first.n_chunks and again.seconds < 1.0
    fixed = ingest(fresh, mini_docs, ChunkingParams("fixed", 40, 10), embedder)
    counts = dict(fresh.execute("SELECT strategy_id, count(*) FROM chunks GROUP BY 1").fetchall())
    assert counts == {first.strategy_id: first.n_chunks, fixed.strategy_id: fixed.n_chunks}


def test_same_text_is_never_embedded_twice(fresh, mini_docs, embedder):
    a = ingest(fresh, mini_docs, ChunkingParams("heading", 60, breadcrumbs=False), embedder)
    # paragraph chunking of these small docs yields many of the same texts: cache hits
    b = ingest(fresh, mini_docs, ChunkingParams("paragraph", 60, breadcrumbs=False), embedder)
    assert b.embedding_cache_hits > 0 and b.texts_embedded == b.n_chunks - b.embedding_cache_hits
    n_cached = fresh.execute("SELECT count(*) FROM embedding_cache").fetchone()[0]
    assert n_cached == a.texts_embedded + b.texts_embedded


def test_changed_document_is_rechunked_alone(fresh, mini_docs, embedder):
    p = ChunkingParams("heading", 60)
    base = ingest(fresh, mini_docs, p, embedder)
    edited = [replace(d, text=d.text + "\nA new closing paragraph about autovacuum.\n") if i == 0 else d
              for i, d in enumerate(mini_docs)]
    r = ingest(fresh, edited, p, embedder)
    assert r.docs_rechunked == 1 and r.strategy_id == base.strategy_id
    removed = edited[1:]
    r2 = ingest(fresh, removed, p, embedder)
    assert r2.docs_rechunked == 0
    ids = {row[0] for row in fresh.execute("SELECT DISTINCT doc_id FROM chunks WHERE strategy_id = %s", (base.strategy_id,))}
    assert ids == {d.doc_id for d in removed}


def test_interrupted_ingest_leaves_no_half_strategy(fresh, mini_docs, embedder, monkeypatch):
    from rag_experiments import chunk_index as store

    def boom(*a, **k):
        raise RuntimeError("killed mid-ingest")

    monkeypatch.setattr(store, "ensure_hnsw_index", boom)  # fails after the chunks were written
    with pytest.raises(RuntimeError):
        ingest(fresh, mini_docs, ChunkingParams("heading", 60), embedder)
    assert fresh.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0
    assert fresh.execute("SELECT count(*) FROM strategies").fetchone()[0] == 0
    paid = fresh.execute("SELECT count(*) FROM embedding_cache").fetchone()[0]
    assert paid > 0  # embeddings already paid for are kept...
    monkeypatch.undo()
    r = ingest(fresh, mini_docs, ChunkingParams("heading", 60), embedder)
    assert r.texts_embedded == 0 and r.embedding_cache_hits == r.n_chunks  # ...and reused


def test_hnsw_index_follows_build_parameters(fresh, mini_docs, embedder):
    p = ChunkingParams("heading", 60)
    r = ingest(fresh, mini_docs, p, embedder, HnswParams(m=8, ef_construction=32))
    names = {row[0] for row in fresh.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'hnsw_%'")}
    assert names == {hnsw_index_name(r.strategy_id, HnswParams(8, 32))}
    ingest(fresh, mini_docs, p, embedder, HnswParams(m=16, ef_construction=64))
    names = {row[0] for row in fresh.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'hnsw_%'")}
    assert names == {hnsw_index_name(r.strategy_id, HnswParams(16, 64))}


def test_parallel_ingests_of_one_strategy_build_it_once(fresh_db_url, mini_docs, embedder):
    """Two sweep jobs (separate connections) asking for the same new strategy: one builds, one waits."""
    from concurrent.futures import ThreadPoolExecutor

    def job(_):
        c = connect(fresh_db_url)
        try:
            return ingest(c, mini_docs, ChunkingParams("heading", 60), embedder)
        finally:
            c.close()

    with ThreadPoolExecutor(2) as pool:
        reports = list(pool.map(job, range(2)))
    assert sorted(r.unchanged for r in reports) == [False, True]
    c = connect(fresh_db_url)
    assert c.execute("SELECT count(*) FROM strategies").fetchone()[0] == 1
    assert c.execute("SELECT count(*) FROM chunks").fetchone()[0] == reports[0].n_chunks
    c.close()



def test_a_waiting_writer_holds_no_lock_on_chunks(fresh_db_url, mini_docs, embedder):
    """Two sweep jobs building different strategies at once once deadlocked in CI: each COPY held
    ROW EXCLUSIVE on ``chunks`` while its CREATE INDEX waited for SHARE. Now a job queues for the
    writer lock *before* touching ``chunks``, so whoever waits holds nothing the other needs."""
    import threading
    import time

    from rag_experiments.chunk_index import CHUNKS_WRITER_LOCK

    first = connect(fresh_db_url)
    ingest(first, mini_docs, ChunkingParams("fixed", 40), embedder)  # embeddings cached: the job is all writes
    holder = connect(fresh_db_url)
    holder.execute("SELECT pg_advisory_lock(%s)", (CHUNKS_WRITER_LOCK,))
    job = connect(fresh_db_url)
    job_pid = job.info.backend_pid
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("r", ingest(job, mini_docs, ChunkingParams("heading", 60), embedder)))
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while first.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (job_pid,)).fetchone()[0] != "advisory":
            assert thread.is_alive() and time.monotonic() < deadline, "the second writer did not queue for the lock"
            time.sleep(0.05)
        held = first.execute(
            "SELECT mode FROM pg_locks WHERE pid = %s AND relation = 'chunks'::regclass AND granted", (job_pid,)
        ).fetchall()
        assert held == []
    finally:
        holder.execute("SELECT pg_advisory_unlock(%s)", (CHUNKS_WRITER_LOCK,))
        thread.join(60)
    assert not result["r"].unchanged and result["r"].n_chunks > 0
    for c in (first, holder, job):
        c.close()


def test_an_ingest_leaves_its_tables_settled(fresh, mini_docs, embedder):
    """After an ingest the full-text indexes hold no pending entries (every search would scan
    them) and the BM25 tables are all-visible (the leg's index-only scans need no heap)."""
    ingest(fresh, mini_docs, ChunkingParams("heading", 60), embedder)
    for index in ("chunks_tsv_gin", "chunks_identifiers_gin"):
        assert fresh.execute("SELECT gin_clean_pending_list(%s::regclass)", (index,)).fetchone()[0] == 0, index
    for table in ("bm25_postings", "bm25_df"):
        pages, visible = fresh.execute("SELECT relpages, relallvisible FROM pg_class WHERE relname = %s", (table,)).fetchone()
        assert pages > 0 and visible == pages, (table, pages, visible)
    # an edit: the re-ingest settles again
    edited = [replace(d, text=d.text + "\nZebrafish autovacuum notes.\n") if i == 0 else d for i, d in enumerate(mini_docs)]
    ingest(fresh, edited, ChunkingParams("heading", 60), embedder)
    assert fresh.execute("SELECT gin_clean_pending_list('chunks_tsv_gin')").fetchone()[0] == 0
    pages, visible = fresh.execute("SELECT relpages, relallvisible FROM pg_class WHERE relname = 'bm25_postings'").fetchone()
    assert visible == pages


def test_chunks_take_their_own_texts_vectors_from_the_cache(fresh, mini_docs, embedder):
    """The ingest never holds the corpus's vectors: they go to embedding_cache as they are computed
    and the chunks' rows take them from there inside PostgreSQL. Every chunk is written once, with
    its own text's vector."""
    import numpy as np

    from rag_experiments.chunk_index import embed_with_cache
    from rag_experiments.chunking import chunk_corpus

    p = ChunkingParams("heading", 60)
    r = ingest(fresh, mini_docs, p, embedder)
    rows = fresh.execute("SELECT chunk_id, indexed_text, embedding FROM chunks WHERE strategy_id = %s",
                         (r.strategy_id,)).fetchall()
    expected = chunk_corpus(mini_docs, p, embedder, r.strategy_id)
    assert sorted(row[0] for row in rows) == sorted(c.chunk_id for c in expected) and len(rows) == r.n_chunks
    fresh_vectors = embedder.embed([row[1] for row in rows])
    stored = np.stack([np.asarray(row[2].to_numpy(), dtype=np.float32) for row in rows])
    assert float(np.max(np.abs(stored - fresh_vectors))) < 1e-5
    lean = embed_with_cache(fresh, embedder, [row[1] for row in rows], keep_vectors=False)
    assert lean.vectors is None and lean.cache_hits == len({row[1] for row in rows}) and lean.dim == embedder.dim


def test_vectors_deleted_from_the_cache_mid_ingest_end_in_one_error_and_write_nothing(fresh, fresh_db_url, mini_docs,
                                                                                      embedder):
    from rag_experiments.db.connect import connect
    from rag_experiments.errors import DatabaseError
    from rag_experiments.scale.executors import LocalEmbedding

    class ThenDeletes(LocalEmbedding):
        """Embeds every batch, then (another session) empties the cache before the chunks are written."""

        def map(self, batches, input_type="document"):
            yield from super().map(batches, input_type)
            with connect(fresh_db_url) as other:
                other.execute("DELETE FROM embedding_cache")
                other.commit()

    with pytest.raises(DatabaseError, match=r"chunks' vectors are no longer in embedding_cache.*nothing was written"):
        ingest(fresh, mini_docs, ChunkingParams("heading", 60), embedder, executor=ThenDeletes(embedder))
    assert fresh.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0
    r = ingest(fresh, mini_docs, ChunkingParams("heading", 60), embedder)  # the hint: run it again
    assert r.n_chunks > 0 and r.texts_embedded == r.n_chunks


def _strategy_tables(conn, sid):
    """Everything an ingest writes for a strategy, in a canonical order."""
    return {
        "chunks": conn.execute("SELECT chunk_id, doc_id, doc_hash, ordinal, start_char, end_char, n_tokens, text,"
                               " indexed_text, text_hash, identifiers, embedding::text, tsv::text FROM chunks"
                               " WHERE strategy_id = %s ORDER BY chunk_id", (sid,)).fetchall(),
        "postings": conn.execute("SELECT lexeme, chunk_id, tf, dl FROM bm25_postings WHERE strategy_id = %s"
                                 " ORDER BY 1, 2", (sid,)).fetchall(),
        "df": conn.execute("SELECT lexeme, df, max_tf, min_dl FROM bm25_df WHERE strategy_id = %s ORDER BY 1",
                           (sid,)).fetchall(),
        "stats": conn.execute("SELECT n_chunks, sum_dl FROM bm25_stats WHERE strategy_id = %s", (sid,)).fetchall(),
    }


def test_an_ingest_in_groups_of_documents_writes_what_one_group_writes(fresh, mini_docs, embedder, monkeypatch):
    """The ingest chunks, embeds and stages a group of documents at a time (its peak memory is one
    group's chunks): in one-document groups it writes exactly what one group writes."""
    from rag_experiments import chunk_index

    p = ChunkingParams("heading", 60)
    whole = ingest(fresh, mini_docs, p, embedder)
    expected = _strategy_tables(fresh, whole.strategy_id)
    assert len(expected["chunks"]) == whole.n_chunks and expected["postings"]
    fresh.execute("DELETE FROM strategies WHERE strategy_id = %s", (whole.strategy_id,))  # cascades

    monkeypatch.setattr(chunk_index, "INGEST_GROUP_CHARS", 1)  # each document its own group
    assert len(chunk_index._doc_groups(mini_docs, 1)) == len(mini_docs) > 1
    grouped = ingest(fresh, mini_docs, p, embedder)
    assert _strategy_tables(fresh, grouped.strategy_id) == expected
    assert (grouped.n_chunks, grouped.chunks_written) == (whole.n_chunks, whole.chunks_written)
    assert grouped.texts_embedded == 0 and grouped.embedding_cache_hits == whole.n_chunks
    # the staging table lives in the ingest's session only while it runs
    assert fresh.execute("SELECT to_regclass('pg_temp.chunk_stage')").fetchone()[0] is None


def test_an_ingest_stopped_in_its_second_group_keeps_the_first_groups_vectors(fresh, mini_docs, embedder,
                                                                             monkeypatch):
    from rag_experiments import chunk_index
    from rag_experiments.scale.executors import LocalEmbedding

    class DiesOnSecondGroup(LocalEmbedding):
        calls = 0

        def map(self, batches, input_type="document"):
            DiesOnSecondGroup.calls += 1
            if DiesOnSecondGroup.calls == 2:
                raise RuntimeError("killed in the second group")
            yield from super().map(batches, input_type)

    monkeypatch.setattr(chunk_index, "INGEST_GROUP_CHARS", 1)
    p = ChunkingParams("heading", 60)
    with pytest.raises(RuntimeError, match="second group"):
        ingest(fresh, mini_docs, p, embedder, executor=DiesOnSecondGroup(embedder))
    assert fresh.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0
    assert fresh.execute("SELECT count(*) FROM strategies").fetchone()[0] == 0
    assert fresh.execute("SELECT to_regclass('pg_temp.chunk_stage')").fetchone()[0] is None
    kept = fresh.execute("SELECT count(*) FROM embedding_cache").fetchone()[0]
    assert kept > 0  # the first group's vectors
    r = ingest(fresh, mini_docs, p, embedder)
    assert r.embedding_cache_hits == kept and r.texts_embedded == r.n_chunks - kept


def test_the_documents_table_follows_the_corpus_and_the_callers_texts_stay_as_they_were(fresh, mini_docs, embedder):
    """Documents are upserted by one COPY; psycopg never reads the caller's own str objects, which
    would keep a UTF-8 copy inside each non-ASCII text for as long as the caller holds it."""
    import sys

    p = ChunkingParams("heading", 60)
    edited = [replace(d, text=d.text + "\nCafé crème: naïve façade, 10 µs.\n") if i == 0 else d
              for i, d in enumerate(mini_docs)]
    sizes = [sys.getsizeof(d.text) for d in edited]
    ingest(fresh, edited, p, embedder)
    assert [sys.getsizeof(d.text) for d in edited] == sizes
    rows = dict(fresh.execute("SELECT doc_id, text FROM documents").fetchall())
    assert rows == {d.doc_id: d.text for d in edited}
    ingest(fresh, mini_docs[1:], p, embedder)  # one edited back (it is gone), one removed
    rows = dict(fresh.execute("SELECT doc_id, text FROM documents").fetchall())
    assert rows == {d.doc_id: d.text for d in mini_docs[1:]}


_KILLED_CHILD = r"""
import functools, sys, time
from pathlib import Path
from rag_experiments import chunk_index
from rag_experiments.chunking import ChunkingParams
from rag_experiments.corpus.loader import load_corpus
from rag_experiments.db.connect import connect
from rag_experiments.embedding import load_embedder
from rag_experiments.scale.executors import LocalEmbedding

url, corpus, marker = sys.argv[1:4]
chunk_index.embed_with_cache = functools.partial(chunk_index.embed_with_cache, batch_size=4)  # 4 texts a commit


class StallsInTheSecondBatch(LocalEmbedding):
    def map(self, batches, input_type="document"):
        for i, texts in enumerate(batches):
            if i == 1:  # the first batch is committed; say so, then wait to be killed mid-batch
                Path(marker).write_text("1")
                time.sleep(3600)
            yield i, self.embedder.embed(texts, input_type=input_type, batch_size=self.model_batch_size)


embedder = load_embedder()
chunk_index.ingest(connect(url), load_corpus(corpus, "mini"), ChunkingParams("heading", 60), embedder,
                   executor=StallsInTheSecondBatch(embedder))
"""


def test_an_ingest_killed_mid_way_resumes_without_embedding_again(fresh, fresh_db_url, mini_docs, embedder, tmp_path):
    """SIGKILL (no exception handler, no finally) in the middle of an ingest's embedding: the
    batches committed before it are cache hits of the next ingest, which embeds only the rest."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    marker = tmp_path / "first-batch-committed"
    corpus = Path(__file__).parent / "fixtures" / "mini_corpus"
    child = subprocess.Popen([sys.executable, "-c", _KILLED_CHILD, fresh_db_url, str(corpus), str(marker)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300  # a wait for the child, not a timing assertion
    while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if child.poll() is None:
        os.kill(child.pid, signal.SIGKILL)
    out, err = child.communicate()
    assert marker.exists() and child.returncode == -signal.SIGKILL, err.decode()[-2000:]
    kept = fresh.execute("SELECT count(*) FROM embedding_cache").fetchone()[0]
    assert kept == 4  # the first batch, committed before the kill
    assert fresh.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0  # no half strategy

    r = ingest(fresh, mini_docs, ChunkingParams("heading", 60), embedder)
    assert r.n_chunks > kept
    assert r.embedding_cache_hits == kept and r.texts_embedded == r.n_chunks - kept


def test_an_ingest_says_what_it_will_embed_and_how_long_before_it_starts(fresh, mini_docs, embedder, capfd):
    from rag_experiments.store import _embedding_plan_line
    from rag_experiments.scale.executors import LocalEmbedding

    p = ChunkingParams("heading", 60)
    # the executor a run passes (ingest.executor=local), as run.py and rag-exp ingest do
    first = ingest(fresh, mini_docs, p, embedder, progress=True, model_batch_size=4,
                   executor=LocalEmbedding(embedder, 4))
    err = capfd.readouterr().err
    plan = next(line for line in err.splitlines() if line.startswith("embedding: "))
    assert plan.startswith(f"embedding: {first.texts_embedded} texts with {embedder.model_id} (0 cached)")
    assert " texts/s (the rate of one model call, just now)" in plan and "resumes where it was" in plan
    # the bar (rate, ETA) follows the line
    assert err.index(plan) < err.index(f"embedding ({embedder.model_id})")
    # no estimate without a measured rate; the cached and shipped texts are counted apart
    line = _embedding_plan_line(embedder, 10, 5, 3, None, " group 2/3")
    assert line.startswith(f"embedding group 2/3: 10 texts with {embedder.model_id} (5 cached, 3 shipped with the demo).")
    slow = _embedding_plan_line(embedder, 3000, 0, 0, 12.5)
    assert "~4 min at 12 texts/s" in slow and "embedding.name=static-minilm" in slow
