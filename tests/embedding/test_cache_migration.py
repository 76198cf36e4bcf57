"""Migration 0003 re-keys embeddings cached under the bare model id to the space key the code
computes (sha256 of canonical JSON): nothing computed before is computed again."""

from __future__ import annotations

import numpy as np

from rag_experiments.db.connect import connect
from rag_experiments.db.migrations import migrate
from rag_experiments.chunk_index import embed_with_cache


def test_rows_cached_before_0003_are_found_after_it(fresh_db_url, embedder):
    conn = connect(fresh_db_url)
    try:
        # back to the schema before 0003, with one row cached the old way
        conn.execute("DROP TABLE embedding_spaces")
        conn.execute("ALTER TABLE strategies DROP CONSTRAINT strategies_dim_indexable")
        conn.execute("DELETE FROM schema_migrations WHERE version = 3")
        text = "How much memory may a sort use?"
        old = embedder.embed([text])
        from rag_experiments.types import sha256_text

        conn.execute("INSERT INTO embedding_cache (model, text_hash, embedding) VALUES (%s, %s, %s)",
                     (embedder.model_id, sha256_text(text), old[0]))
        assert migrate(conn) == ["0003_dimensions.sql"]

        class Refuses:  # the same model, but any call to it fails: the vector must come from the cache
            def __getattr__(self, name):
                return getattr(embedder, name)

            def embed(self, *a, **k):
                raise AssertionError("re-embedded a cached text")

        got = embed_with_cache(conn, Refuses(), [text], input_type="query")
        assert got.cache_hits == 1 and np.allclose(got.vectors[0], old[0], atol=1e-6)
        assert conn.execute("SELECT provider, dimensions, input_type FROM embedding_spaces").fetchall() == [
            ("onnx", 384, "symmetric")]
    finally:
        conn.close()
