"""Golden evidence must resolve or the run refuses (issue 12).

Before: a case whose span lies past the end of its (unchanged) document, ``start=9000000``,
passed ``golden verify``, ``golden check`` said "nothing to fix" and a run scored it 0 with
exit 0. Now verify, check and every run name file:line and the case id; drift (the document's
hash changed) stays a counted warning, as before."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rag_experiments.cli import main
from rag_experiments.errors import GoldenSetError
from rag_experiments.golden import GoldenFile
from rag_experiments.golden.anchoring import drift_status
from rag_experiments.golden.build import span_json
from rag_experiments.golden.evidence_check import require_cases, require_scorable, unscorable_spans
from rag_experiments.golden.records import new_id
from rag_experiments.golden.resolve import load_golden
from tests.conftest import FIXTURES, build_mini_golden

PROV = {"method": "human", "author": "tests"}


def _doc(docs, stem):
    return next(d for d in docs if d.doc_id.split("/")[-1].removesuffix(".html") == stem)


def _bad_case(doc, start: int, end: int, quote: str) -> dict:
    return {"type": "case", "id": new_id("c", "bad", start, end), "query": "a question about nothing?",
            "kind": "paraphrase", "doc_type": doc.doc_type, "provenance": PROV,
            "evidence": [{"doc_id": doc.doc_id, "source_uri": doc.source_uri, "start": start, "end": end,
                          "quote": quote, "doc_hash": doc.content_hash, "grade": 2}]}


@pytest.fixture
def golden_with_bad_span(tmp_path, mini_docs):
    path = build_mini_golden(tmp_path / "mini.jsonl", mini_docs)
    doc = _doc(mini_docs, "runtime-config-resource")
    bad = _bad_case(doc, 9_000_000, 9_000_008, "work_mem")  # past the end; hash is the document's
    GoldenFile(path).append([bad])
    return path, bad["id"], len(GoldenFile(path).read())


def test_span_past_the_end_of_an_unchanged_document_is_named_with_file_line_and_case(golden_with_bad_span, mini_docs):
    path, case_id, line = golden_with_bad_span
    problems = unscorable_spans(GoldenFile(path).read_records(), mini_docs)
    assert len(problems) == 1
    msg = problems[0].describe(path)
    assert msg.startswith(f"{path}:{line}: case {case_id} ({case_id}#0): span 9000000..9000008 lies outside")
    with pytest.raises(GoldenSetError, match=f"{path}:{line}: case {case_id}"):
        require_scorable(path, GoldenFile(path).read_records(), mini_docs)
    # before: drift_status counted it "unchanged" and the run scored it 0
    assert drift_status(path, mini_docs)["pending"] == 0


def test_quote_not_at_its_offsets_is_an_error(tmp_path, mini_docs):
    path = build_mini_golden(tmp_path / "mini.jsonl", mini_docs)
    doc = _doc(mini_docs, "errcodes-appendix")
    GoldenFile(path).append([_bad_case(doc, 0, 8, "work_mem")])  # inside the document, wrong text
    [p] = unscorable_spans(GoldenFile(path).read_records(), mini_docs)
    assert "is not the text at 0..8" in p.reason


def test_an_anchor_that_moved_a_span_out_of_its_document_is_named_at_the_anchor_line(tmp_path, mini_docs):
    path = build_mini_golden(tmp_path / "mini.jsonl", mini_docs)
    records = GoldenFile(path).read()
    case = records[0]
    doc = next(d for d in mini_docs if d.doc_id == case["evidence"][0]["doc_id"])
    span = {**span_json(doc, 0, 5), "start": len(doc.text) + 10, "end": len(doc.text) + 15}
    GoldenFile(path).append([{"type": "anchor", "id": "a-1", "case_id": case["id"], "ref": f"{case['id']}#0",
                              "status": "moved", "span": span}])
    [p] = unscorable_spans(GoldenFile(path).read_records(), mini_docs)
    assert p.line == len(records) + 1 and p.ref == f"{case['id']}#0"


def test_drift_is_not_an_error(tmp_path, mini_docs):
    """The document changed: reported and counted as drift, as before, never an error."""
    path = build_mini_golden(tmp_path / "mini.jsonl", mini_docs)
    edited = [replace(d, text="Intro paragraph added.\n\n" + d.text) for d in mini_docs]
    assert unscorable_spans(GoldenFile(path).read_records(), edited) == []
    assert drift_status(path, edited)["pending"] == 10  # counted and warned about, as before


def test_retired_cases_are_not_checked(golden_with_bad_span, mini_docs):
    path, case_id, _ = golden_with_bad_span
    GoldenFile(path).append([{"type": "retire", "id": "r-1", "target": case_id, "reason": "bad span", "who": "t"}])
    assert unscorable_spans(GoldenFile(path).read_records(), mini_docs) == []


def test_golden_verify_and_check_report_it(golden_with_bad_span, capsys):
    path, case_id, line = golden_with_bad_span
    corpus = str(FIXTURES / "mini_corpus")
    assert main(["golden", "verify", "--golden", str(path), "--corpus", corpus]) == 2
    err = capsys.readouterr().err
    assert f"{path}:{line}: case {case_id}" in err and "1 labelled spans cannot be scored" in err
    assert main(["golden", "check", "--golden", str(path), "--corpus", corpus]) == 1
    out = capsys.readouterr().out
    assert f"case {case_id}" in out and "nothing to fix" not in out


def test_golden_verify_on_the_demo_set_is_clean(capsys):
    assert main(["golden", "verify"]) == 0
    assert "labelled spans resolve in corpus demo" in capsys.readouterr().out


def test_a_golden_set_without_cases_stops(tmp_path, mini_docs):
    empty = tmp_path / "empty.jsonl"
    GoldenFile(empty).append([])  # writes the manifest of an empty set
    empty.touch()
    with pytest.raises(GoldenSetError, match="nothing to evaluate: it has no case records"):
        require_cases(load_golden(empty))
    path = build_mini_golden(tmp_path / "mini.jsonl", mini_docs)
    ids = [r["id"] for r in GoldenFile(path).read()]
    GoldenFile(path).append([{"type": "retire", "id": f"r-{i}", "target": cid, "reason": "x", "who": "t"}
                             for i, cid in enumerate(ids)])
    with pytest.raises(GoldenSetError, match="none of its 10 cases"):
        require_cases(load_golden(path))


def test_a_golden_set_for_another_corpus_is_refused(tmp_path, mini_docs):
    """Sibling: the demo golden set run on the mini corpus scored every case 0 behind a drift
    warning (every document 'removed')."""
    from rag_experiments.golden.evidence_check import require_same_corpus

    demo = FIXTURES.parent.parent / "experiments" / "golden" / "demo.jsonl"
    with pytest.raises(GoldenSetError, match="none of the .* documents its evidence points into is in corpus mini"):
        require_same_corpus(demo, GoldenFile(demo).read_records(), mini_docs, "mini")
    path = build_mini_golden(tmp_path / "mini.jsonl", mini_docs)
    require_same_corpus(path, GoldenFile(path).read_records(), mini_docs[1:], "mini")  # one document gone: drift
