-- The BM25 leg at a million chunks: dynamic pruning (MaxScore) inside PostgreSQL, so a query
-- reads the postings of its rare terms, not every posting of its common ones (issue 31).
--
-- Per-lexeme bounds: the largest tf and the smallest chunk length among the lexeme's postings.
-- tf / (tf + k1 (1 - b + b dl / avgdl)) grows with tf and shrinks with dl for every k1 >= 0 and
-- b in [0, 1], so idf * f(max_tf, min_dl) bounds every posting's contribution whatever k1, b
-- and avgdl a query uses: a sweep over k1 and b needs no rebuild. The ingest raises max_tf and
-- lowers min_dl as postings arrive (rag_experiments/bm25_stats.py); removing postings leaves
-- them as they are, a looser bound that is still a bound.
ALTER TABLE bm25_df ADD COLUMN max_tf integer, ADD COLUMN min_dl integer;

UPDATE bm25_df d SET max_tf = x.max_tf, min_dl = x.min_dl
FROM (SELECT strategy_id, lexeme, max(tf) AS max_tf, min(dl) AS min_dl FROM bm25_postings GROUP BY 1, 2) x
WHERE d.strategy_id = x.strategy_id AND d.lexeme = x.lexeme;

-- a frequency row without postings (none should exist) contributes nothing: bound 0
UPDATE bm25_df SET max_tf = 0, min_dl = 1 WHERE max_tf IS NULL;

ALTER TABLE bm25_df ALTER COLUMN max_tf SET NOT NULL, ALTER COLUMN min_dl SET NOT NULL;

-- bm25_top: the chunks whose raw BM25 sum can make the best p_depth, i.e. every chunk whose raw
-- sum is within 1e-9 (relative) of the p_depth-th best: the same set as the exhaustive leg's
-- `top` (rag_experiments/retrieval/legs.py), which then scores them exactly. Terms are weighted
-- p_qtf * idf, with the leg's idf and tf fraction, written as the leg writes them, so a
-- posting's weight is the same float here and there.
--
-- MaxScore (Turtle and Flood 1995), set-at-a-time:
--   1. Bounds: ub(t) = w(t) f(max_tf(t), min_dl(t)). Terms sorted by ub ascending.
--   2. A threshold theta that the p_depth-th best sum is known to reach: the exact sums of the
--      best 2 * p_depth chunks of the highest-bound terms' lists (as many of those lists as fit
--      in p_seed_postings postings, at least one): their p_depth-th best is a real chunk's sum,
--      so the p_depth-th best overall is at least theta.
--   3. Non-essential terms: the longest prefix of the ascending order whose bounds add up to less
--      than theta. A chunk holding only non-essential terms sums to less than theta and cannot
--      rank; every candidate is in an essential term's list. Essential lists are the rare terms'
--      short ones; the common terms' long lists are only probed, for the candidates left.
--   4. A candidate whose essential sum plus every non-essential bound stays below theta is
--      dropped unprobed; the others get their non-essential postings by index probes.
-- Margins (1e-6 relative on theta) absorb floating-point order effects, which are ~1e-15.
-- Falls back to reading every posting (the leg as it was) when the query's postings number at
-- most p_min_postings, when no term is non-essential, when fewer than p_depth chunks were
-- found for theta, when a weight is negative (a bound must be >= 0), or when the essential
-- lists are too long for their probes to cost less than reading everything (p_probe_cost: the
-- cost of a probe in postings read; 0 prunes whenever the bounds allow, as the tests force).
CREATE OR REPLACE FUNCTION bm25_top(p_sid text, p_lexemes text[], p_qtf float8[], p_depth integer, p_k1 float8, p_b float8,
                         p_min_postings bigint, p_seed_postings bigint, p_probe_cost float8)
RETURNS TABLE (top_chunk text, top_raw float8)
-- ~p_depth rows (the default estimate of 1,000 made the planner hash-join the whole chunks table
-- and every posting of the query's lexemes against them: 10k chunks, leg p50 24 ms instead of ~12)
LANGUAGE plpgsql STABLE ROWS 60 AS $$
DECLARE
    v_n float8;
    v_avgdl float8;
    lex text[];
    wt float8[];
    ub float8[];
    dfs bigint[];
    n_terms integer;
    total bigint;
    seed_from integer;
    seed_cum bigint;
    theta float8;
    n_non integer := 0;
    r float8 := 0;
    ess_postings bigint;
    best_ids text[];
    best_s float8[];
BEGIN
    SELECT st.n_chunks::float8, st.sum_dl::float8 / greatest(st.n_chunks, 1) INTO v_n, v_avgdl
    FROM bm25_stats st WHERE st.strategy_id = p_sid;
    IF v_n IS NULL THEN
        RETURN;
    END IF;
    SELECT array_agg(q.lexeme ORDER BY q.ub, q.lexeme), array_agg(q.w ORDER BY q.ub, q.lexeme),
           array_agg(q.ub ORDER BY q.ub, q.lexeme), array_agg(q.df ORDER BY q.ub, q.lexeme)
    INTO lex, wt, ub, dfs
    FROM (SELECT t.lexeme, t.w, d.df::bigint AS df,
                 t.w * (d.max_tf / (d.max_tf + p_k1 * (1 - p_b + p_b * d.min_dl / v_avgdl))) AS ub
          FROM (SELECT u.lexeme, u.qtf * ln(1 + (v_n - d0.df + 0.5) / (d0.df + 0.5)) AS w
                FROM unnest(p_lexemes, p_qtf) AS u(lexeme, qtf)
                JOIN bm25_df d0 ON d0.strategy_id = p_sid AND d0.lexeme = u.lexeme) t
          JOIN bm25_df d ON d.strategy_id = p_sid AND d.lexeme = t.lexeme) q;
    n_terms := coalesce(cardinality(lex), 0);
    IF n_terms = 0 THEN
        PERFORM set_config('rag_exp.bm25_plan', 'no terms', false);
        RETURN;
    END IF;
    SELECT sum(x) INTO total FROM unnest(dfs) AS x;

    -- Finding theta costs ~2 * p_depth probes per term: first a guess of what it would buy. The
    -- best 50 of a query were seen to sum to 0.35-0.5 of the bounds' total; at an optimistic half,
    -- the essential lists that would remain, probed for the rest, must cost less than reading
    -- everything. (A guess only decides whether to look: the lists never depend on it.)
    IF total > p_min_postings AND n_terms > 1 AND (SELECT min(x) FROM unnest(wt) AS x) >= 0 THEN
        n_non := 0;
        r := 0;
        WHILE n_non < n_terms - 1 AND r + ub[n_non + 1] < 0.5 * (SELECT sum(x) FROM unnest(ub) AS x) LOOP
            n_non := n_non + 1;
            r := r + ub[n_non];
        END LOOP;
        SELECT sum(x) INTO ess_postings FROM unnest(dfs[n_non + 1:n_terms]) AS x;
        IF p_probe_cost > 0 AND (n_non = 0 OR ess_postings * (1 + n_non * p_probe_cost) > total) THEN
            total := 0;  -- not worth looking
        END IF;
        n_non := 0;
        r := 0;
    END IF;
    IF total > p_min_postings AND n_terms > 1 AND (SELECT min(x) FROM unnest(wt) AS x) >= 0 THEN
        -- 2. theta from the highest-bound lists that fit the seed budget (at least one list)
        seed_from := n_terms;
        seed_cum := dfs[n_terms];
        WHILE seed_from > 1 AND seed_cum + dfs[seed_from - 1] <= p_seed_postings LOOP
            seed_from := seed_from - 1;
            seed_cum := seed_cum + dfs[seed_from];
        END LOOP;
        SELECT ex.s INTO theta FROM (
            SELECT part.chunk_id, sum(u.w * (p.tf / (p.tf + p_k1 * (1 - p_b + p_b * p.dl / v_avgdl)))) AS s
            FROM (SELECT p0.chunk_id
                  FROM unnest(lex[seed_from:n_terms], wt[seed_from:n_terms]) AS u0(lexeme, w)
                  JOIN bm25_postings p0 ON p0.strategy_id = p_sid AND p0.lexeme = u0.lexeme
                  GROUP BY p0.chunk_id
                  ORDER BY sum(u0.w * (p0.tf / (p0.tf + p_k1 * (1 - p_b + p_b * p0.dl / v_avgdl)))) DESC, p0.chunk_id
                  LIMIT 2 * p_depth) part
            CROSS JOIN unnest(lex, wt) AS u(lexeme, w)
            JOIN bm25_postings p ON p.strategy_id = p_sid AND p.lexeme = u.lexeme AND p.chunk_id = part.chunk_id
            GROUP BY part.chunk_id) ex
        ORDER BY ex.s DESC LIMIT 1 OFFSET p_depth - 1;

        -- 3. the non-essential prefix: bounds adding up to less than theta
        IF theta > 0 THEN
            WHILE n_non < n_terms - 1 AND r + ub[n_non + 1] < theta * (1 - 1e-6) LOOP
                n_non := n_non + 1;
                r := r + ub[n_non];
            END LOOP;
        END IF;
        -- Worth it? Reading a posting in key order costs ~0.2 us, probing one ~5 us (p_probe_cost
        -- ~25 postings read). Every essential posting may survive and be probed once per
        -- non-essential term, so prune only when that still costs less than reading every posting.
        IF n_non > 0 THEN
            SELECT sum(x) INTO ess_postings FROM unnest(dfs[n_non + 1:n_terms]) AS x;
            IF ess_postings * (1 + n_non * p_probe_cost) > total THEN
                n_non := 0;
            END IF;
        END IF;
    END IF;

    -- what this query did, for the benchmark and the tests: 'exhaustive', or 'pruned k/n' with k
    -- of the n terms non-essential (read with SELECT current_setting('rag_exp.bm25_plan'))
    PERFORM set_config('rag_exp.bm25_plan',
                       CASE WHEN n_non = 0 THEN 'exhaustive' ELSE format('pruned %s/%s', n_non, n_terms) END, false);
    IF n_non = 0 THEN
        -- Every posting read. The best 2 * p_depth sums by a bounded (top-N) sort, not the whole
        -- list materialised and scanned twice (100k chunks, 200 queries: leg p50 124 -> ~50 ms);
        -- when sums within 1e-9 of the p_depth-th reach past them (ties: duplicated chunks), the
        -- whole list decides.
        SELECT array_agg(b.chunk_id ORDER BY b.s DESC, b.chunk_id), array_agg(b.s ORDER BY b.s DESC, b.chunk_id)
        INTO best_ids, best_s
        FROM (SELECT p.chunk_id, sum(u.w * (p.tf / (p.tf + p_k1 * (1 - p_b + p_b * p.dl / v_avgdl)))) AS s
              FROM unnest(lex, wt) AS u(lexeme, w)
              JOIN bm25_postings p ON p.strategy_id = p_sid AND p.lexeme = u.lexeme
              GROUP BY p.chunk_id
              ORDER BY s DESC LIMIT 2 * p_depth) b;
        IF coalesce(cardinality(best_ids), 0) < 2 * p_depth OR best_s[2 * p_depth] < best_s[p_depth] * (1 - 1e-9) THEN
            RETURN QUERY SELECT best_ids[i], best_s[i] FROM generate_subscripts(best_ids, 1) AS i
                         WHERE best_s[i] >= coalesce(best_s[p_depth], 0) * (1 - 1e-9);
            RETURN;
        END IF;
        RETURN QUERY
        WITH raw AS (
            SELECT p.chunk_id, sum(u.w * (p.tf / (p.tf + p_k1 * (1 - p_b + p_b * p.dl / v_avgdl)))) AS s
            FROM unnest(lex, wt) AS u(lexeme, w)
            JOIN bm25_postings p ON p.strategy_id = p_sid AND p.lexeme = u.lexeme
            GROUP BY p.chunk_id)
        SELECT raw.chunk_id, raw.s FROM raw
        WHERE raw.s >= coalesce((SELECT r2.s FROM raw r2 ORDER BY r2.s DESC LIMIT 1 OFFSET p_depth - 1), 0) * (1 - 1e-9);
        RETURN;
    END IF;

    -- 4. candidates from the essential lists; survivors probed for the non-essential terms
    RETURN QUERY
    WITH part AS (
        SELECT p.chunk_id, sum(u.w * (p.tf / (p.tf + p_k1 * (1 - p_b + p_b * p.dl / v_avgdl)))) AS s
        FROM unnest(lex[n_non + 1:n_terms], wt[n_non + 1:n_terms]) AS u(lexeme, w)
        JOIN bm25_postings p ON p.strategy_id = p_sid AND p.lexeme = u.lexeme
        GROUP BY p.chunk_id),
    ex AS MATERIALIZED (
        SELECT part.chunk_id, part.s + coalesce((
            SELECT sum(u.w * (p.tf / (p.tf + p_k1 * (1 - p_b + p_b * p.dl / v_avgdl))))
            FROM unnest(lex[1:n_non], wt[1:n_non]) AS u(lexeme, w)
            JOIN bm25_postings p ON p.strategy_id = p_sid AND p.lexeme = u.lexeme AND p.chunk_id = part.chunk_id), 0) AS s
        FROM part
        WHERE part.s + r >= theta * (1 - 1e-6))
    SELECT ex.chunk_id, ex.s FROM ex
    WHERE ex.s >= coalesce((SELECT e2.s FROM ex e2 ORDER BY e2.s DESC LIMIT 1 OFFSET p_depth - 1), 0) * (1 - 1e-9);
END
$$;
