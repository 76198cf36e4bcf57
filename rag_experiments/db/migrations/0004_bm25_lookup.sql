-- BM25 leg: read postings without touching the table, and document frequencies without
-- counting postings (retrieval/legs.py BM25_SQL).
--
-- Measured on the whole PostgreSQL 15 manual (12,201 chunks, 469k postings, the demo golden
-- set's 100 queries, depth 50, after VACUUM): leg p50 27.5 ms before; a covering primary key
-- (index-only scans, no heap fetch per posting) plus cutting to the best `depth` chunks before
-- the exact, rounded score: 15 ms; document frequencies read from this table instead of counted
-- from the postings at query time: 12.7 ms. The covering key of that manual's postings: 38 MB.

ALTER TABLE bm25_postings DROP CONSTRAINT bm25_postings_pkey,
    ADD CONSTRAINT bm25_postings_pkey PRIMARY KEY (strategy_id, lexeme, chunk_id) INCLUDE (tf, dl);

-- df(t): the number of the strategy's chunks holding lexeme t, i.e. its posting count. Kept in
-- step with the postings by rag_experiments/bm25_stats.py in the ingest transaction (under the
-- chunks writer lock); tests compare it with a count of the postings after incremental and
-- parallel ingests.
CREATE TABLE bm25_df (
    strategy_id text NOT NULL REFERENCES strategies (strategy_id) ON DELETE CASCADE,
    lexeme      text NOT NULL,
    df          integer NOT NULL CHECK (df >= 0),  -- 0 only inside the ingest transaction that then deletes it
    PRIMARY KEY (strategy_id, lexeme) INCLUDE (df)
);

INSERT INTO bm25_df (strategy_id, lexeme, df)
SELECT strategy_id, lexeme, count(*) FROM bm25_postings GROUP BY strategy_id, lexeme;
