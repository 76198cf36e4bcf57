-- corpus.language (issue 47): the text search configuration of a strategy's keyword leg. Until
-- now every strategy was `english` (the generated column of migration 0001); a strategy now
-- names its configuration, and its chunks' tsvectors, BM25 statistics, RM3 lexemes and query
-- parsing all use it (rag_experiments/retrieval/legs.py reads it from this row per query).
--
-- Existing strategies become `english` explicitly: their tsvectors are recomputed by the same
-- to_tsvector('english', indexed_text) call, so their lexemes, postings, statistics and every
-- ranking stay exactly what they were (their strategy ids too: english is not in the key).
ALTER TABLE strategies ADD COLUMN language regconfig NOT NULL DEFAULT 'english';

-- A generated column reads only its own row, so each chunk carries its strategy's configuration
-- (a 4-byte OID). to_tsvector(regconfig, text) is immutable, as a generated column needs.
ALTER TABLE chunks ADD COLUMN ts_config regconfig NOT NULL DEFAULT 'english';
ALTER TABLE chunks DROP COLUMN tsv;
ALTER TABLE chunks ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector(ts_config, indexed_text)) STORED;
CREATE INDEX chunks_tsv_gin ON chunks USING gin (tsv);
