-- BM25 statistics for the keyword leg (retrieval.keyword.rank=bm25), per chunking strategy.
--
-- Postings: one row per (strategy, lexeme, chunk) with the lexeme's occurrences in the chunk
-- (tf: the number of positions the english tsvector holds for it) and the chunk's length (dl:
-- all positions of its tsvector). A term's document frequency is its posting count, counted at
-- query time while its postings are read anyway, so no df table can drift from the chunks.
-- Written in the ingest transaction, under the chunks writer lock (chunk_index.py).
--
-- Chosen by measurement on the demo strategy (3,020 chunks, 150 golden queries), against tf
-- read from the tsvector at query time (unnest(tsv) per candidate, df from ts_stat): that
-- design stores 1 MB but its leg took p50 72-100 ms; postings rows took p50 5-13 ms for
-- 16 MB; per-lexeme arrays of postings stored 4.4 MB but took p50 22-27 ms (detoasting the
-- long arrays of common words). Details in README "BM25".
CREATE TABLE bm25_postings (
    strategy_id text NOT NULL REFERENCES strategies (strategy_id) ON DELETE CASCADE,
    lexeme      text NOT NULL,
    chunk_id    text NOT NULL,
    tf          integer NOT NULL,
    dl          integer NOT NULL,
    PRIMARY KEY (strategy_id, lexeme, chunk_id)
);

-- N (chunks of the strategy, including chunks without any lexeme) and the sum of their
-- lengths (avgdl = sum_dl / n_chunks).
CREATE TABLE bm25_stats (
    strategy_id text PRIMARY KEY REFERENCES strategies (strategy_id) ON DELETE CASCADE,
    n_chunks    integer NOT NULL,
    sum_dl      bigint NOT NULL
);

-- Strategies ingested before this migration: their statistics, from their stored tsvectors.
INSERT INTO bm25_postings (strategy_id, lexeme, chunk_id, tf, dl)
SELECT c.strategy_id, u.lexeme, c.chunk_id, coalesce(cardinality(u.positions), 1),
       (SELECT coalesce(sum(coalesce(cardinality(v.positions), 1)), 0) FROM unnest(c.tsv) v)
FROM chunks c, unnest(c.tsv) u;

INSERT INTO bm25_stats (strategy_id, n_chunks, sum_dl)
SELECT s.strategy_id,
       (SELECT count(*) FROM chunks c WHERE c.strategy_id = s.strategy_id),
       coalesce((SELECT sum(coalesce(cardinality(u.positions), 1)) FROM chunks c, unnest(c.tsv) u
                 WHERE c.strategy_id = s.strategy_id), 0)
FROM strategies s;
