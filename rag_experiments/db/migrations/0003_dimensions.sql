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

-- Rows cached before this migration were keyed by the bare model id (MiniLM ONNX or an st:
-- model, both symmetric: one vector serves queries and documents). Re-key them to their space
-- key, the same canonical JSON that rag_experiments/cache_key.py digest() hashes (sorted keys, no
-- spaces), so vectors already computed are not computed again.
CREATE TEMP TABLE old_spaces ON COMMIT DROP AS
SELECT model AS old_model, provider, vector_dims(embedding) AS dims,
       encode(sha256(convert_to(
           '{"dimensions":' || vector_dims(embedding) || ',"input_type":"symmetric","model":'
           || to_json(model)::text || ',"provider":' || to_json(provider)::text || '}', 'UTF8')), 'hex') AS space_key
FROM (SELECT DISTINCT ON (model) model, embedding,
             CASE WHEN model LIKE 'st:%' THEN 'sentence-transformers' ELSE 'onnx' END AS provider
      FROM embedding_cache WHERE model !~ '^[0-9a-f]{64}$') legacy;

UPDATE embedding_cache c SET model = o.space_key FROM old_spaces o WHERE c.model = o.old_model;

INSERT INTO embedding_spaces (space_key, provider, model, dimensions, input_type)
SELECT space_key, provider, old_model, dims, 'symmetric' FROM old_spaces ON CONFLICT DO NOTHING;
