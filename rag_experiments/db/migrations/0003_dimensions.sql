-- Strategies of different embedding dimensions (384, 512, 1024, 1536, 3072...) share one
-- database: chunks.embedding and embedding_cache.embedding stay dimensionless `vector`
-- columns, and each strategy's partial HNSW index casts to its own dimension, as `vector(d)`
-- up to 2,000 dimensions and `halfvec(d)` above (pgvector's HNSW limits: 2,000 for vector,
-- 4,000 for halfvec; see rag_experiments/vector_types.py).
ALTER TABLE strategies ADD CONSTRAINT strategies_dim_indexable CHECK (dim BETWEEN 1 AND 4000);

-- embedding_cache.model now holds an embedding-space key: sha256 of the canonical JSON of
-- (provider, model, dimensions, input type). This table says what each key stands for, and
-- when the space was first paid for.
CREATE TABLE embedding_spaces (
    space_key   text PRIMARY KEY,
    provider    text NOT NULL,
    model       text NOT NULL,
    dimensions  integer,
    input_type  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
