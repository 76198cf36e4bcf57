"""Bad input ends in one clear line (or a counted, reported per-query failure), never a traceback
and never a silent zero. Real PostgreSQL, the real Anthropic SDK against a closed port."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import mlflow
import psycopg
import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.config import settings_from_cfg
from rag_experiments.errors import DatabaseError, UserError
from rag_experiments.experiment import run_experiment
from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.limits import MAX_QUERY_CHARS

from .test_config import _compose
from .test_pipeline import MINI, _mini_overrides, _run_py

BIG_QUERY = "work_mem " * 11_000  # ~100 KB; PostgreSQL: StatementTooComplex (stack depth limit exceeded)


def cli(*argv: str) -> int:
    from rag_experiments.cli import main

    return main(list(argv))


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("error:")]
    return line


def _closed_port_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


# -- where input enters --------------------------------------------------------------------------
def test_nul_byte_in_a_corpus_file_names_the_file_and_line(tmp_path):
    from rag_experiments.corpus.loader import load_corpus

    corpus = tmp_path / "corpus"
    shutil.copytree(MINI, corpus)
    bad = sorted(corpus.rglob("*.md"))[0]
    bad.write_bytes(b"# Title\n\nfine line\nbad \x00 byte\n")
    with pytest.raises(UserError, match=rf"{bad.name}:4: contains a NUL character"):
        load_corpus(corpus, "mini")


def test_nul_byte_corpus_run_exits_with_one_line(project, mini_golden, tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(MINI, corpus)
    bad = sorted(corpus.rglob("*.md"))[0]
    bad.write_bytes(bad.read_bytes() + b"\nnul \x00 here\n")
    overrides = [o for o in _mini_overrides(mini_golden) if not o.startswith("corpus.path")]
    proc = _run_py(project, f"corpus.path={corpus}", *overrides)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert bad.name in _one_error_line(proc.stderr)


def test_golden_add_quote_file_with_invalid_utf8_is_one_line(tmp_path, capsys):
    quote = tmp_path / "quote.txt"
    quote.write_bytes(b"shared_buffers \xff\xfe sets")
    rc = cli("golden", "add", "--golden", str(tmp_path / "g.jsonl"), "--query", "how big are the buffers",
             "--source-uri", "x.md", "--quote-file", str(quote))
    assert rc == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(quote) in line and "not valid UTF-8 (byte 15" in line


def test_golden_add_refuses_a_100kb_query(tmp_path, capsys):
    golden = tmp_path / "g.jsonl"
    rc = cli("golden", "add", "--golden", str(golden), "--query", BIG_QUERY, "--source-uri", "x.md",
             "--quote", "anything")
    assert rc == 2 and not golden.exists()
    line = _one_error_line(capsys.readouterr().err)
    assert "--query" in line and f"the limit is {MAX_QUERY_CHARS:,}" in line


def test_add_production_case_refuses_a_100kb_query_and_nul_quote():
    from rag_experiments.golden.add import production_case

    with pytest.raises(UserError, match="--query: the query has"):
        production_case(BIG_QUERY, source_uri="x.md", quote="q", doc_lookup=lambda uri: None)
    with pytest.raises(UserError, match="--quote.*NUL"):
        production_case("short", source_uri="x.md", quote="a\x00b", doc_lookup=lambda uri: None)


def test_triage_refuses_a_100kb_query_before_opening_the_database(monkeypatch, capsys):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "rag_experiments.session", types.SimpleNamespace(
        open_retriever=lambda *a, **k: pytest.fail("opened the database for a query it must refuse")))
    assert cli("triage", BIG_QUERY, "--expected", "x.md:0-10", "--add", "no") == 2
    assert "query: the query has" in _one_error_line(capsys.readouterr().err)


def test_benchmark_import_refuses_a_100kb_query(tmp_path):
    from rag_experiments.benchmarks.beir import import_beir

    src = tmp_path / "beir"
    shutil.copytree(Path(__file__).parent / "fixtures" / "benchmarks" / "beir_tiny", src)
    lines = (src / "queries.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["text"] = BIG_QUERY
    (src / "queries.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    with pytest.raises(UserError, match=r"queries.jsonl:1: query .*the query has"):
        import_beir(src, tmp_path / "corpus", tmp_path / "golden.jsonl")


def test_generated_questions_over_the_limit_are_rejected():
    from rag_experiments.golden.generate import parse_generation

    answer = json.dumps([{"kind": "paraphrase", "question": BIG_QUERY, "identifier": None,
                          "evidence_quote": "x"}])
    accepted, problems = parse_generation(answer, "some passage text")
    assert accepted == [] and problems["question_too_large"] == 1


# -- the retrieval path degrades per query ---------------------------------------------------------
def _append_big_case(golden: Path) -> str:
    records = GoldenFile(golden).read()
    first = next(r for r in records if r["type"] == "case")
    rec = {k: v for k, v in first.items() if k not in ("prev", "created_at")}
    rec.update(id="c-bigquery0001", query=BIG_QUERY)
    GoldenFile(golden).append([rec])
    return rec["id"]


def test_a_100kb_query_in_the_golden_set_is_excluded_and_reported_not_scored_zero(project, mini_golden):
    """Written before the limits existed (or by hand): the run goes on without it, says so loudly,
    and the metrics are those of the other cases, not diluted by a silent zero."""
    baseline = run_experiment(settings_from_cfg(_compose(_mini_overrides(mini_golden, "tracking.plots=false"))))
    big = _append_big_case(mini_golden)
    proc = _run_py(project, *_mini_overrides(mini_golden, "tracking.plots=false"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "1 of 11 queries could not be searched and are EXCLUDED" in proc.stderr and big in proc.stderr
    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    (run,) = MlflowClient().search_runs([MlflowClient().get_experiment_by_name("rag-experiments").experiment_id])
    m = run.data.metrics
    assert m["retrieval.failed_queries"] == 1 and m["n_cases"] == 10
    assert m["recall_at_5"] == pytest.approx(baseline.eval.metrics["recall_at_5"])
    assert run.data.tags["retrieval_failed_queries"] == "1"
    failures = mlflow.artifacts.load_dict(f"runs:/{run.info.run_id}/retrieval_failures.json")
    assert "limit" in failures["failed_cases"][big]


def test_too_many_failed_queries_fail_the_run_with_one_line(project, mini_golden):
    for i in range(2):
        records = GoldenFile(mini_golden).read()
        first = next(r for r in records if r["type"] == "case")
        rec = {k: v for k, v in first.items() if k not in ("prev", "created_at")}
        rec.update(id=f"c-bigquery000{i}", query=BIG_QUERY + str(i))
        GoldenFile(mini_golden).append([rec])
    proc = _run_py(project, *_mini_overrides(mini_golden, "tracking.plots=false"))
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "2 of 12 queries could not be searched" in _one_error_line(proc.stderr)


def test_search_degrading_keeps_the_good_queries_of_a_failing_batch(conn):
    """A real database error for one query (on a live connection) fails that query only."""
    from rag_experiments.retrieval.failures import search_degrading
    from rag_experiments.types import RankedList

    calls = []

    def search(qs):
        calls.append(list(qs))
        for q in qs:
            conn.execute("SELECT 1 / %s", (0 if q == "boom" else 1,))
        return [RankedList(q, ()) for q in qs]

    queries = [f"q{i}" for i in range(20)] + ["boom"] + [f"r{i}" for i in range(19)]
    out = search_degrading(search, queries, conn, batch=40)
    assert list(out.failed) == [20] and "DivisionByZero" in out.failed[20]
    assert [r.query for r in out.ranked if r is not None] == [q for q in queries if q != "boom"]
    assert not conn.broken


def test_database_connection_lost_mid_run_is_one_line(project, mini_golden, pg_url, monkeypatch):
    """The server ends our backend between ingest and retrieval (as a killed server does)."""
    from rag_experiments.retrieval import retriever as R

    original = R.Retriever.search_many

    def killed_first(self, queries, limit=20, **kwargs):
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (self.conn.info.backend_pid,))
        return original(self, queries, limit, **kwargs)

    monkeypatch.setattr(R.Retriever, "search_many", killed_first)
    R.MEMO.clear()
    settings = settings_from_cfg(_compose(_mini_overrides(mini_golden, "retrieval.use_cache=false")))
    with pytest.raises(DatabaseError, match="database connection was lost during retrieval"):
        run_experiment(settings)


def test_llm_reranker_with_the_api_unreachable_is_one_line(project, mini_golden, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", _closed_port_url())
    proc = _run_py(project, *_mini_overrides(mini_golden, "retrieval=hybrid_rerank", "rerank=llm",
                                             "tracking.plots=false"))
    assert proc.returncode == 2, proc.stderr[-3000:]
    line = _one_error_line(proc.stderr)
    assert "Anthropic API unreachable at http://127.0.0.1" in line and "sk-test" not in proc.stderr


# -- golden retire -------------------------------------------------------------------------------------
def test_golden_retire_takes_a_case_out_of_evaluation(mini_golden, capsys):
    from rag_experiments.golden.resolve import load_golden

    before = load_golden(mini_golden)
    target = before.cases[0].case_id
    assert cli("golden", "retire", target, "--golden", str(mini_golden), "--reason", "query too vague") == 0
    assert f"retired case {target}" in capsys.readouterr().out
    after = load_golden(mini_golden)
    assert target not in {c.case_id for c in after.cases} and len(after.cases) == len(before.cases) - 1
    last = GoldenFile(mini_golden).read()[-1]
    assert last["type"] == "retire" and last["target"] == target and last["reason"] == "query too vague"
    assert after.digest != before.digest
    assert cli("golden", "retire", target, "--golden", str(mini_golden), "--reason", "again") == 2
    assert "already retired" in _one_error_line(capsys.readouterr().err)
    assert cli("golden", "retire", "c-nope", "--golden", str(mini_golden), "--reason", "x") == 2
    assert "no case 'c-nope'" in _one_error_line(capsys.readouterr().err)


def test_a_retired_case_leaves_the_run(project, mini_golden):
    from rag_experiments.golden.retire import retire_case

    big = _append_big_case(mini_golden)
    retire_case(mini_golden, big, "100 KB query pasted by mistake", who="tests")
    result = run_experiment(settings_from_cfg(_compose(_mini_overrides(mini_golden))))
    assert result.failed == {} and result.eval.n_cases == 10 and big not in set(result.eval.per_case["case_id"])


def test_golden_label_skips_a_case_no_search_can_take(mini_golden):
    """Sibling: label's pooling searched every case, so one 100 KB case crashed the whole label job."""
    from rag_experiments.golden.label import plan_labelling

    _append_big_case(mini_golden)

    def retrieve(query):
        if len(query) > MAX_QUERY_CHARS:
            raise psycopg.errors.StatementTooComplex("stack depth limit exceeded")
        return []

    plan = plan_labelling(mini_golden, retrieve, k=5)
    assert plan.skipped["query_too_large"] == 1 and plan.cases == 11


def test_golden_file_with_invalid_utf8_names_the_line(tmp_path, mini_golden, capsys):
    """Sibling: a damaged golden file was a UnicodeDecodeError traceback in every command."""
    n = len(mini_golden.read_bytes().splitlines())
    with open(mini_golden, "ab") as fh:
        fh.write(b'{"bad": "\xff"}\n')
    assert cli("golden", "verify", "--golden", str(mini_golden)) == 2
    assert f"{mini_golden}:{n + 1}: not valid UTF-8" in _one_error_line(capsys.readouterr().err)


def test_a_command_whose_database_dies_is_one_line(pg_url, monkeypatch, capsys):
    """Sibling: rag-exp commands (golden add, triage, label...) had no handler for a lost server."""
    import sys
    import types

    from rag_experiments.db.connect import connect

    conn = connect(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))

    class Session:
        def chunk(self, chunk_id):  # golden add --chunk-id reads the store (a quote needs no database)
            return conn.execute("SELECT 1").fetchone()

        def close(self):
            conn.close()

    monkeypatch.setitem(sys.modules, "rag_experiments.session",
                        types.SimpleNamespace(open_retriever=lambda *a, **k: Session()))
    rc = cli("golden", "add", "--golden", "unused.jsonl", "--query", "q", "--chunk-id", "c1")
    assert rc == 2
    assert "the database failed during the command" in _one_error_line(capsys.readouterr().err)
