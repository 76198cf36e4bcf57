"""The scale benchmark at a tiny size: its rows are printed, its golden set (known by
construction) is scored sensibly, and it leaves no database behind. Speed is measured by the
benchmark, never asserted here."""

from __future__ import annotations

import re

import numpy as np
import psycopg
import pytest

from rag_experiments import bench_scale as B


def test_hash_embedder_is_deterministic_unit_and_lexical():
    e = B.HashEmbedder()
    texts = ["BRIN indexes summarise block ranges", "block ranges of a BRIN index", "wing in a propeller slipstream", ""]
    a, b = e.embed(texts), B.HashEmbedder().embed(texts)
    assert a.shape == (4, B.DIM) and a.dtype == np.float32
    assert np.array_equal(a, b)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-6)  # the empty text too: never a zero vector
    assert a[0] @ a[1] > a[0] @ a[2]  # shared words make neighbours
    assert e.count_tokens("a b, c.") == 5 and e.token_spans("ab c") == [(0, 2), (3, 4)]


def test_corpus_and_golden_set_are_built_by_construction(tmp_path):
    from rag_experiments.corpus.loader import load_corpus
    from rag_experiments.golden.resolve import load_golden

    pool, counts = B.sentence_pool()  # the demo corpus alone: what users' machines have
    assert counts["pool"] > 1000 and counts["cranfield"] == 0
    corpus = B.build_corpus(tmp_path / "scale-400", 400, pool, (50, 120), progress=False)
    assert corpus.n_docs == 20 and corpus.n_sections == 400
    docs = {d.doc_id: d for d in load_corpus(corpus.root, corpus.name)}
    assert len(docs) == 20
    small, large = load_golden(corpus.golden[50]), load_golden(corpus.golden[120])
    assert len(small.scorable) == 50 and len(large.scorable) == 120
    assert {c.case_id for c in small.scorable} <= {c.case_id for c in large.scorable}
    for case in large.scorable:
        (span,) = [e.span for e in case.relevant]
        doc = docs[span.doc_id]
        quote = doc.text[span.start:span.end]
        assert doc.text.count(quote) == 1 and len(case.query.split()) >= 4
    # the same seed makes the same corpus
    again = B.build_corpus(tmp_path / "again" / "scale-400", 400, pool, (50, 120), progress=False)
    assert again.golden[50].read_bytes() == corpus.golden[50].read_bytes()


def test_growth_exponent_and_render():
    assert B.exponent(10_000, 2.0, 100_000, 20.0) == 1.0
    assert abs(B.exponent(10_000, 5.0, 100_000, 5.0)) < 1e-12
    r1, r2 = B.Rows(1000), B.Rows(10_000)
    r1.add("x, ms", 1.0)
    r2.add("x, ms", 100.0)
    table = B.render([r1, r2])
    assert "| x, ms | 1.0 | 100.0 | 2.00 |" in table


def test_scale_bench_prints_rows_and_exponents_and_drops_its_database(pg_server, monkeypatch, capsys, tmp_path):
    admin, _ = pg_server
    monkeypatch.setenv("DATABASE_URL", admin)  # a throwaway database on the test server, not a second server
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

    def bench_dbs() -> set[str]:
        with psycopg.connect(admin, autocommit=True) as c:
            return {r[0] for r in c.execute("SELECT datname FROM pg_database WHERE datname LIKE 'rag_bench_scale_%'")}

    before = bench_dbs()
    # the smallest run that still prints every row: two sizes (the minimum, 1,000, and twice it) give
    # the exponents, two case counts the eval rows of each, three points the sweep summary
    assert B.main(["--sizes", "1000,2000", "--eval-cases", "20,40", "--sweep-points", "3", "--queries", "5",
                   "--workdir", str(tmp_path / "work")]) == 0
    out = capsys.readouterr().out
    assert bench_dbs() == before
    table = out[out.index("| row |"):]
    for row in ("ingest chunks/s without the model", "HNSW build", "HNSW index, MB / 10k chunks",
                "BM25 postings", "vector leg p50", "ANN recall", "BM25 leg p50", "hybrid p50",
                "BM25 leg p50, ms (every posting read", "BM25 SQL-search queries pruned",
                "BM25 leg p50, ms (OR, depth 50; as shipped: native)", "BM25 leg p50, ms (SQL search",
                "BM25 leg p50, ms, as shipped, the queries' first pass", "BM25 packed postings + chunk ordinals",
                "peak RSS of ingest", "peak RSS of a run", "eval 20 cases: cold run", "eval 40 cases: warm run",
                "per-case artifact", "compare of two runs", "summary of a 3-point sweep"):
        assert row in table, row
    assert "growth 1,000->2,000" in table
    # by construction the evidence is two sentences of one chunk whose words make the query: hybrid finds it
    recalls = [float(v) for v in re.findall(r"recall_at_5 of hybrid \(by construction\) \| ([0-9.]+)", table)]
    assert recalls and min(recalls) > 0.6, recalls
    chunks = re.search(r"\| chunks \| ([0-9,]+) \| ([0-9,]+) \|", table)
    assert chunks and chunks.groups() == ("1,000", "2,000")
    # the shipped BM25 leg (native), the SQL search and the one reading every posting agree on
    # every timed query
    same = re.search(r"\| BM25 lists and scores, as shipped = SQL search = every posting read, queries"
                     r" \| ([0-9,]+) \| ([0-9,]+) \|", table)
    assert same and same.groups() == ("5", "5"), same


def test_keyword_only_builds_no_hnsw_index_and_times_the_bm25_leg(pg_server, monkeypatch, capsys, tmp_path):
    admin, _ = pg_server
    monkeypatch.setenv("DATABASE_URL", admin)
    assert B.main(["--sizes", "1000", "--eval-cases", "20", "--queries", "5", "--keyword-only",
                   "--workdir", str(tmp_path / "work")]) == 0
    table = capsys.readouterr().out.split("| row |", 1)[1]
    assert re.search(r"\| BM25 lists and scores, as shipped = SQL search = every posting read, queries \| 5 \|", table)
    assert re.search(r"\| HNSW build \(m 16, ef_construction 64\), s \|  \|", table)  # not built
    for absent in ("vector leg p50", "hybrid p50", "eval 20 cases"):
        assert absent not in table, absent


@pytest.mark.parametrize("argv, says", [
    (["--sizes", "abc"], "argument --sizes: 'abc' is not a whole number"),
    (["--sizes", "0"], "argument --sizes: 0 is below the minimum of 1,000"),
    (["--sizes", ""], "argument --sizes: give at least one number"),
    (["--sizes", "2000", "--eval-cases", "5000"], "--eval-cases 5,000 is more cases than the smallest corpus"),
    (["--build-memory", "lots"], "argument --build-memory: 'lots' is not a memory size such as 512MB or 8GB"),
    # it goes into PGOPTIONS: nothing may ride along
    (["--build-memory", "8GB -c fsync=off"], "argument --build-memory: '8GB -c fsync=off' is not a memory size"),
])
def test_bad_sizes_are_one_usage_line_before_anything_runs(argv, says, capsys):
    with pytest.raises(SystemExit) as exc:
        B.main(argv)
    assert exc.value.code == 2 and says in capsys.readouterr().err


def test_an_empty_sizes_through_the_cli_is_refused_not_the_default_run(capsys):
    from rag_experiments import cli

    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "--scale", "--sizes", ""])
    assert exc.value.code == 2 and "give at least one number" in capsys.readouterr().err
