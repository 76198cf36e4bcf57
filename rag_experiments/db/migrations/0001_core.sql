-- Core schema: documents, chunking strategies, chunks with both search legs, caches.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE documents (
    corpus        text NOT NULL,
    doc_id        text NOT NULL,
    source_uri    text NOT NULL,
    title         text NOT NULL,
    doc_type      text NOT NULL,
    text          text NOT NULL,
    content_hash  text NOT NULL,
    PRIMARY KEY (corpus, doc_id)
);

-- One row per (corpus, chunker + params, embedding model): several chunkings coexist.
CREATE TABLE strategies (
    strategy_id     text PRIMARY KEY,
    corpus          text NOT NULL,
    chunker         text NOT NULL,
    params          jsonb NOT NULL,
    embedding_model text NOT NULL,
    dim             integer NOT NULL,
    -- digest of (doc_id, content_hash) pairs the strategy was built from; part of every
    -- candidate-cache key, so a corpus change invalidates cached candidate lists.
    content_digest  text NOT NULL,
    n_chunks        integer NOT NULL,
    built_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE chunks (
    strategy_id   text NOT NULL REFERENCES strategies (strategy_id) ON DELETE CASCADE,
    chunk_id      text NOT NULL,
    doc_id        text NOT NULL,
    doc_hash      text NOT NULL,
    source_uri    text NOT NULL,
    doc_type      text NOT NULL,
    ordinal       integer NOT NULL,
    start_char    integer NOT NULL,
    end_char      integer NOT NULL,
    n_tokens      integer NOT NULL,
    text          text NOT NULL,
    indexed_text  text NOT NULL,
    text_hash     text NOT NULL,
    -- exact identifiers (work_mem, 23505, ts_rank_cd, pg_hba.conf) that the english parser
    -- would split or stem; matched as whole tokens by the keyword leg.
    identifiers   text[] NOT NULL DEFAULT '{}',
    embedding     vector NOT NULL,
    tsv           tsvector GENERATED ALWAYS AS (to_tsvector('english', indexed_text)) STORED,
    PRIMARY KEY (strategy_id, chunk_id)
);
CREATE INDEX chunks_tsv_gin ON chunks USING gin (tsv);
CREATE INDEX chunks_identifiers_gin ON chunks USING gin (identifiers);
CREATE INDEX chunks_doc ON chunks (strategy_id, doc_id);

-- Embedding cache by (model, text hash): a strategy whose text was embedded before never
-- re-embeds it. Query embeddings live here too (kind = 'query').
CREATE TABLE embedding_cache (
    model      text NOT NULL,
    text_hash  text NOT NULL,
    embedding  vector NOT NULL,
    PRIMARY KEY (model, text_hash)
);

-- Each leg's candidate list per (strategy, its content digest, model, query, depth, filters...).
CREATE TABLE candidate_cache (
    cache_key  text PRIMARY KEY,
    leg        text NOT NULL,
    strategy_id text NOT NULL,
    hits       jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX candidate_cache_strategy ON candidate_cache (strategy_id);

-- Reranker scores per (model, query, chunk text).
CREATE TABLE rerank_cache (
    model      text NOT NULL,
    query_hash text NOT NULL,
    text_hash  text NOT NULL,
    score      double precision NOT NULL,
    PRIMARY KEY (model, query_hash, text_hash)
);
