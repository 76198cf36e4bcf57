"""BEIR importer: corpus folder + benchmark golden set from a tiny BEIR folder; malformed lines
are reported with their file and line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rag_experiments.benchmarks.beir import import_beir, load_beir
from rag_experiments.corpus.loader import load_corpus
from rag_experiments.errors import CorpusError, GoldenSetError
from rag_experiments.golden.resolve import load_golden
from rag_experiments.golden.golden_file import GoldenFile

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "benchmarks" / "beir_tiny"


def _import(tmp_path: Path, src: Path = TINY, **kw):
    return import_beir(src, tmp_path / "out" / "corpus", tmp_path / "out" / "golden.jsonl", name="tiny", **kw)


def test_import_writes_a_loadable_corpus_and_whole_document_evidence(tmp_path):
    report = _import(tmp_path)
    docs = {d.doc_id: d for d in load_corpus(tmp_path / "out" / "corpus", "tiny")}
    assert sorted(docs) == ["8", "d1", "d2", "d3", "d4", "d5", "d6", "d7"]  # an integer _id becomes "8"
    d1 = docs["d1"]
    assert (d1.source_uri, d1.title, d1.doc_type) == ("tiny/d1", "Photosynthesis", "tiny")
    assert d1.text.startswith("Photosynthesis\n\nPlants capture sunlight") and d1.text.endswith("oxygen.\n")
    assert docs["d7"].text.startswith("Sourdough bread rises")  # no title: the text alone

    records = GoldenFile(tmp_path / "out" / "golden.jsonl").read()
    assert [r["benchmark"]["query_id"] for r in records] == ["q1", "q2", "q3", "q4"]
    assert {r["kind"] for r in records} == {"benchmark"}
    assert all(r["provenance"]["method"] == "import" and r["provenance"]["grade_map"] == "raw" for r in records)
    q1 = records[0]
    assert q1["query"] == "how do plants turn sunlight into energy"
    by_doc = {e["doc_id"]: e for e in q1["evidence"]}
    assert set(by_doc) == {"d1", "d2"}
    for doc_id, ev in by_doc.items():
        doc = docs[doc_id]
        assert (ev["start"], ev["end"], ev["quote"], ev["doc_hash"]) == (0, len(doc.text), doc.text, doc.content_hash)
    # score 2 -> golden 2, score 1 -> golden 1; the score itself is kept for exact trec_eval numbers
    assert (by_doc["d1"]["grade"], by_doc["d1"]["qrel_grade"], by_doc["d1"]["qrel_gain"]) == (2, 2, 2)
    assert (by_doc["d2"]["grade"], by_doc["d2"]["qrel_grade"], by_doc["d2"]["qrel_gain"]) == (1, 1, 1)
    # score 0 is dropped: q3 keeps d5, d6; q7 (only a 0) is no case and is reported
    assert [e["doc_id"] for e in records[2]["evidence"]] == ["d5", "d6"]
    assert report.no_relevant == ["q7"] and report.dropped_grades == {0: 2}
    assert report.cases == 4 and report.queries == 5 and report.documents == 8
    golden = load_golden(tmp_path / "out" / "golden.jsonl")
    assert len(golden.scorable) == 4 and report.golden_sha256 == golden.digest
    assert "4 benchmark cases from 5 queries" in report.summary()


def test_split_selects_the_qrels_and_reuses_an_identical_corpus(tmp_path):
    _import(tmp_path)
    dev = import_beir(TINY, tmp_path / "out" / "corpus", tmp_path / "out" / "golden-dev.jsonl", split="dev", name="tiny")
    assert dev.corpus_reused and dev.cases == 1
    (case,) = GoldenFile(tmp_path / "out" / "golden-dev.jsonl").read()
    assert case["benchmark"] == {"collection": "tiny", "split": "dev", "query_id": "q5"}
    with pytest.raises(GoldenSetError, match=r"no qrels/train\.tsv[\s\S]*available splits: dev, test"):
        load_beir(TINY, "train")


def test_grade_maps_are_options(tmp_path):
    _import(tmp_path, grades="binary")
    records = GoldenFile(tmp_path / "out" / "golden.jsonl").read()
    assert {(e["grade"], e["qrel_gain"]) for r in records for e in r["evidence"]} == {(2, 1)}


def test_an_existing_golden_set_or_different_corpus_is_refused(tmp_path):
    _import(tmp_path)
    with pytest.raises(GoldenSetError, match="already exists"):
        _import(tmp_path)
    other = tmp_path / "other"
    shutil.copytree(TINY, other)
    (other / "corpus.jsonl").write_text('{"_id": "d1", "title": "Changed", "text": "changed text"}\n')
    (other / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with pytest.raises(CorpusError, match="already holds a different corpus"):
        import_beir(other, tmp_path / "out" / "corpus", tmp_path / "g2.jsonl", name="tiny")
    assert not (tmp_path / "g2.jsonl").exists()


def _corrupt(tmp_path: Path, rel: str, line_no: int, new: str | None) -> Path:
    src = tmp_path / "src"
    shutil.copytree(TINY, src)
    path = src / rel
    lines = path.read_text().split("\n")
    if new is None:
        lines.insert(line_no - 1, lines[line_no - 1])  # duplicate the line
    else:
        lines[line_no - 1] = new
    path.write_text("\n".join(lines))
    return src


@pytest.mark.parametrize("rel, line_no, new, error, message", [
    ("corpus.jsonl", 3, '{"_id": "d3", "title": "x", "text": ', CorpusError, "not valid JSON"),
    ("corpus.jsonl", 2, '{"title": "x", "text": "y"}', CorpusError, "missing or empty '_id'"),
    ("corpus.jsonl", 4, '{"_id": "d4", "text": 17}', CorpusError, "field 'text' is missing or not a string"),
    ("corpus.jsonl", 5, '["d5"]', CorpusError, "must be a JSON object"),
    ("corpus.jsonl", 2, '{"_id": "d 2", "text": "spaces in the id"}', CorpusError, "contains whitespace"),
    ("corpus.jsonl", 6, None, CorpusError, "duplicate document id 'd6'"),
    ("queries.jsonl", 2, '{"_id": "q2"}', GoldenSetError, "field 'text' is missing"),
    ("queries.jsonl", 4, None, GoldenSetError, "duplicate query id 'q4'"),
    ("qrels/test.tsv", 3, "q1\td2", GoldenSetError, "expected 3 columns"),
    ("qrels/test.tsv", 4, "q2\td3\thigh", GoldenSetError, "score 'high' is not an integer"),
    ("qrels/test.tsv", 5, "q99\td4\t1", GoldenSetError, "query 'q99' is not in the queries file"),
    ("qrels/test.tsv", 6, "q3\td99\t1", GoldenSetError, "document 'd99' is not in the corpus"),
    ("qrels/test.tsv", 7, "q3\td5\t1", GoldenSetError, "judged again with grade 1"),
])
def test_malformed_lines_name_file_and_line(tmp_path, rel, line_no, new, error, message):
    src = _corrupt(tmp_path, rel, line_no, new)
    where = f"{src / rel}:{line_no + (1 if new is None else 0)}"
    with pytest.raises(error) as err:
        _import(tmp_path, src)
    assert where in str(err.value) and message in str(err.value)
    assert not (tmp_path / "out" / "corpus").exists() and not (tmp_path / "out" / "golden.jsonl").exists()


def test_skip_missing_drops_and_counts_unknown_documents(tmp_path):
    src = _corrupt(tmp_path, "qrels/test.tsv", 6, "q3\td99\t1")
    report = _import(tmp_path, src, skip_missing=True)
    assert report.missing_docs == ["d99"] and "name a document not in the corpus" in report.summary()


def test_cli_import_beir_defaults_to_benchmarks_folder_under_the_project(tmp_path, monkeypatch, capsys):
    from rag_experiments.cli import main

    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))
    assert main(["import-beir", str(TINY), "--name", "tiny", "--no-progress"]) == 0
    assert (tmp_path / "benchmarks" / "tiny" / "golden.jsonl").exists()
    assert len(list((tmp_path / "benchmarks" / "tiny" / "corpus").glob("*.md"))) == 8
    assert "4 benchmark cases" in capsys.readouterr().out
    assert main(["import-beir", str(TINY), "--name", "tiny", "--split", "dev"]) == 0
    assert (tmp_path / "benchmarks" / "tiny" / "golden-dev.jsonl").exists()
    assert main(["import-beir", str(TINY), "--name", "tiny"]) == 2  # append-only: no second import
    assert "already exists" in capsys.readouterr().err


def test_awkward_document_ids_get_safe_distinct_file_names(tmp_path):
    src = tmp_path / "src"
    (src / "qrels").mkdir(parents=True)
    ids = ["a/b", "a_b", "A_b", "..", "ü"]
    (src / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "text": f"text of {i}"}) + "\n" for i in ids))
    (src / "queries.jsonl").write_text(json.dumps({"_id": "1", "text": "q"}) + "\n")
    (src / "qrels" / "test.tsv").write_text("".join(f"1\t{i}\t1\n" for i in ids))
    import_beir(src, tmp_path / "c", tmp_path / "g.jsonl", name="odd")
    assert len(list((tmp_path / "c").glob("*.md"))) == 5
    assert sorted(d.doc_id for d in load_corpus(tmp_path / "c", "odd")) == sorted(ids)
