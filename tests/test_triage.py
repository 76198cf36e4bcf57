from __future__ import annotations

import pytest

from rag_experiments.session import RetrieverSession
from rag_experiments.config import settings_from_cfg
from rag_experiments.errors import UserError
from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.triage import parse_expected, triage

from .test_config import _compose
from .test_pipeline import _mini_overrides


@pytest.fixture
def session(project, mini_golden):
    s = RetrieverSession(settings_from_cfg(_compose(_mini_overrides(mini_golden))), progress=False)
    yield s
    s.close()


def _span_of(session, phrase):
    doc = next(d for d in session._docs.values() if phrase in d.text)
    start = doc.text.index(phrase)
    return f"{doc.source_uri}:{start}-{start + len(phrase)}"


def test_evidence_in_context_is_a_generation_failure(session):
    exp = parse_expected(_span_of(session, "| 23505 | unique_violation |"), session)
    report = triage(session, "What does SQLSTATE 23505 mean?", exp, context=3)
    assert report.verdict == "GENERATION"
    assert report.ranks["keyword"] is not None and report.ranks["hybrid"] <= 3
    assert report.render().startswith("GENERATION: chunk was in context")


def test_evidence_out_of_context_is_a_retrieval_failure_and_names_better_variants(session):
    exp = parse_expected(_span_of(session, "To create a new database named mydb"), session)
    report = triage(session, "What does SQLSTATE 23505 mean?", exp, context=1)
    assert report.verdict == "RETRIEVAL"
    text = report.render()
    assert text.startswith("RETRIEVAL: relevant chunk never reached the context")
    assert "vector" in text and "keyword" in text and "would have put it in context" in text


def test_expected_by_chunk_id_and_bad_input(session):
    chunk = session.chunks()[0]
    exp = parse_expected(chunk["chunk_id"], session)
    assert (exp.start, exp.end) == (chunk["start"], chunk["end"])
    with pytest.raises(UserError, match="--expected"):
        parse_expected("no-such-thing", session)
    with pytest.raises(UserError, match="outside"):
        parse_expected(f"{chunk['source_uri']}:0-99999999", session)


def test_cli_appends_a_production_case(project, mini_golden, capsys):
    from rag_experiments.cli import main

    before = len(GoldenFile(mini_golden).read())
    code = main(["triage", "which error is a duplicate key?", "--expected", "mini/errcodes-appendix.html:0-40",
                 "--context", "5", "--add", "yes", "--golden", str(mini_golden),
                 "--set", f"corpus.path={_mini_overrides(mini_golden)[0].split('=', 1)[1]}", "--set", "corpus.name=mini",
                 "--set", f"golden.path={mini_golden}", "--set", "chunking.max_tokens=60"])
    assert code == 0
    out = capsys.readouterr().out
    assert "appended production case" in out
    records = GoldenFile(mini_golden).read()
    assert len(records) == before + 1 and records[-1]["kind"] == "production"
