-- LLM query rewrites (query.rewrite=multi_query|hyde): what the model wrote for a query, kept so
-- a sweep pays once and a re-run pays nothing. Keyed by (model, prompt version, mode, n, query)
-- hashed into cache_key (rag_experiments/retrieval/query_rewrite.py); a row is written as soon as
-- its request is answered, so an interrupted run resumes without paying twice. Never updated.
CREATE TABLE IF NOT EXISTS query_rewrites (
    cache_key      text PRIMARY KEY,
    model          text NOT NULL,
    prompt_version text NOT NULL,
    mode           text NOT NULL,
    n              integer NOT NULL CHECK (n > 0),
    query          text NOT NULL,
    rewrites       jsonb NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);
