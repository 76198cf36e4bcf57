-- The BM25 leg at a million chunks, in C (issue 31): each lexeme's postings packed into three
-- int4 arrays, summed by the bm25_accumulate aggregate (rag_experiments/db/csrc/bm25_native.c,
-- installed by rag_experiments/db/native.py where the server allows it).
--
-- Why: the SQL search reads ~0.5 us a posting; a query at 1M chunks has ~512k of them, and
-- MaxScore (0006) skips few on a corpus whose query words are all common. Summed in C over
-- packed arrays: 100 queries at 1M chunks, candidate search p50 506 -> ~20 ms, the same sets and sums.
--
-- bm25_ords: a small integer per chunk of a strategy, the index of the C aggregate's dense array
-- of sums. A re-ingest deletes its old chunks' ordinals and numbers its new chunks after the
-- largest; the holes are renumbered when they outgrow the chunks (rag_experiments/bm25_stats.py).
CREATE TABLE bm25_ords (
    strategy_id text NOT NULL REFERENCES strategies (strategy_id) ON DELETE CASCADE,
    chunk_id    text NOT NULL,
    ord         integer NOT NULL,
    PRIMARY KEY (strategy_id, chunk_id)
);
CREATE UNIQUE INDEX bm25_ords_by_ord ON bm25_ords (strategy_id, ord) INCLUDE (chunk_id);

-- bm25_packs: a lexeme's postings, in ordinal order, as parallel arrays (its chunks' ordinals,
-- tf, dl): the rows of bm25_postings for (strategy, lexeme), always in step with them (written
-- in the same ingest transaction, for exactly the lexemes whose postings changed). ~12 bytes a
-- posting, against ~90 in bm25_postings with its key. Stored uncompressed (EXTERNAL): the leg
-- reads them whole and pglz gains little on sorted ordinals.
CREATE TABLE bm25_packs (
    strategy_id text NOT NULL REFERENCES strategies (strategy_id) ON DELETE CASCADE,
    lexeme      text NOT NULL,
    ords        integer[] NOT NULL,
    tfs         integer[] NOT NULL,
    dls         integer[] NOT NULL,
    PRIMARY KEY (strategy_id, lexeme)
);
ALTER TABLE bm25_packs ALTER COLUMN ords SET STORAGE EXTERNAL, ALTER COLUMN tfs SET STORAGE EXTERNAL,
    ALTER COLUMN dls SET STORAGE EXTERNAL;

-- Strategies ingested before this migration. Their postings sorted in memory rather than in
-- ~4 MB runs on disk (this transaction only; never lowers a server's setting).
SELECT set_config('work_mem', '256MB', true) WHERE pg_size_bytes(current_setting('work_mem')) < pg_size_bytes('256MB');
INSERT INTO bm25_ords (strategy_id, chunk_id, ord)
SELECT c.strategy_id, c.chunk_id, (row_number() OVER (PARTITION BY c.strategy_id ORDER BY c.chunk_id) - 1)::integer
FROM chunks c WHERE EXISTS (SELECT 1 FROM bm25_stats st WHERE st.strategy_id = c.strategy_id);

INSERT INTO bm25_packs (strategy_id, lexeme, ords, tfs, dls)
SELECT p.strategy_id, p.lexeme, array_agg(o.ord ORDER BY o.ord), array_agg(p.tf ORDER BY o.ord),
       array_agg(p.dl ORDER BY o.ord)
FROM bm25_postings p JOIN bm25_ords o ON o.strategy_id = p.strategy_id AND o.chunk_id = p.chunk_id
GROUP BY p.strategy_id, p.lexeme;

-- bm25_top keeps its signature and its answer; the SQL search (0006) is now bm25_top_sql.
ALTER FUNCTION bm25_top(text, text[], float8[], integer, float8, float8, bigint, bigint, float8) RENAME TO bm25_top_sql;

-- bm25_top: the native search when bm25_accumulate is installed (and rag_exp.bm25_native is not
-- 'off'), else bm25_top_sql. Terms are weighted and ordered as bm25_top_sql weights and orders
-- them, so the sums are its sums. The native answer is used only when it is whole: a pack for
-- every term holding exactly the term's df postings, every ordinal naming a chunk. Anything else
-- (packs out of step, the library missing or failing) is a WARNING and the SQL search answers:
-- slower, never wrong. rag_exp.bm25_plan says which ran ('native', or bm25_top_sql's plan).
CREATE FUNCTION bm25_top(p_sid text, p_lexemes text[], p_qtf float8[], p_depth integer, p_k1 float8, p_b float8,
                         p_min_postings bigint, p_seed_postings bigint, p_probe_cost float8)
RETURNS TABLE (top_chunk text, top_raw float8)
LANGUAGE plpgsql STABLE ROWS 60 AS $$
DECLARE
    v_n float8;
    v_avgdl float8;
    v_nord integer;
    lex text[];
    wt float8[];
    dfs bigint[];
    n_packs bigint;
    n_postings bigint;
    hits float8[];
    ids text[];
BEGIN
    IF to_regprocedure('bm25_accumulate(float8,integer[],integer[],integer[],integer,float8,float8,float8,integer)') IS NOT NULL
       AND coalesce(current_setting('rag_exp.bm25_native', true), '') <> 'off' THEN
        SELECT st.n_chunks::float8, st.sum_dl::float8 / greatest(st.n_chunks, 1) INTO v_n, v_avgdl
        FROM bm25_stats st WHERE st.strategy_id = p_sid;
        IF v_n IS NOT NULL THEN
            SELECT array_agg(q.lexeme ORDER BY q.ub, q.lexeme), array_agg(q.w ORDER BY q.ub, q.lexeme),
                   array_agg(q.df ORDER BY q.ub, q.lexeme)
            INTO lex, wt, dfs
            FROM (SELECT t.lexeme, t.w, d.df::bigint AS df,
                         t.w * (d.max_tf / (d.max_tf + p_k1 * (1 - p_b + p_b * d.min_dl / v_avgdl))) AS ub
                  FROM (SELECT u.lexeme, u.qtf * ln(1 + (v_n - d0.df + 0.5) / (d0.df + 0.5)) AS w
                        FROM unnest(p_lexemes, p_qtf) AS u(lexeme, qtf)
                        JOIN bm25_df d0 ON d0.strategy_id = p_sid AND d0.lexeme = u.lexeme) t
                  JOIN bm25_df d ON d.strategy_id = p_sid AND d.lexeme = t.lexeme) q;
            IF coalesce(cardinality(lex), 0) = 0 THEN
                PERFORM set_config('rag_exp.bm25_plan', 'no terms', false);
                RETURN;
            END IF;
            SELECT coalesce(max(o.ord), -1) + 1 INTO v_nord FROM bm25_ords o WHERE o.strategy_id = p_sid;
            BEGIN
                SELECT bm25_accumulate(u.w, p.ords, p.tfs, p.dls, v_nord, p_k1, p_b, v_avgdl, p_depth ORDER BY u.i),
                       count(p.lexeme), coalesce(sum(cardinality(p.ords)), 0)
                INTO hits, n_packs, n_postings
                FROM unnest(lex, wt) WITH ORDINALITY AS u(lexeme, w, i)
                JOIN bm25_packs p ON p.strategy_id = p_sid AND p.lexeme = u.lexeme;
            EXCEPTION WHEN OTHERS THEN
                RAISE WARNING 'bm25_top: the native search failed (%), the SQL search answers', SQLERRM;
                n_packs := -1;
            END;
            IF n_packs = cardinality(lex) AND n_postings = (SELECT sum(x) FROM unnest(dfs) AS x) THEN
                -- one key probe per hit: a join let the planner hash the whole ordinal table
                SELECT array_agg((SELECT o.chunk_id FROM bm25_ords o WHERE o.strategy_id = p_sid
                                  AND o.ord = hits[2 * x.i - 1]::integer) ORDER BY x.i)
                INTO ids FROM generate_series(1, coalesce(cardinality(hits), 0) / 2) AS x(i);
                IF coalesce(cardinality(hits), 0) = 0 OR array_position(ids, NULL) IS NULL THEN
                    PERFORM set_config('rag_exp.bm25_plan', 'native', false);
                    RETURN QUERY SELECT ids[i], hits[2 * i] FROM generate_subscripts(ids, 1) AS i;
                    RETURN;
                END IF;
                RAISE WARNING 'bm25_top: strategy % has a packed posting without an ordinal, the SQL search answers', p_sid;
            ELSIF n_packs >= 0 THEN
                RAISE WARNING 'bm25_top: the packed postings of strategy % are out of step with bm25_postings '
                              '(% packs for % terms, % postings for %), the SQL search answers',
                              p_sid, n_packs, cardinality(lex), n_postings, (SELECT sum(x) FROM unnest(dfs) AS x);
            END IF;
        END IF;
    END IF;
    RETURN QUERY SELECT s.top_chunk, s.top_raw
                 FROM bm25_top_sql(p_sid, p_lexemes, p_qtf, p_depth, p_k1, p_b, p_min_postings, p_seed_postings, p_probe_cost) s;
END
$$;
