"""SMART/TREC importer: a tiny Cranfield-shaped fixture (CRLF, Latin-1, gapped .I numbers,
positional qrels, -1 grades, an empty document), malformed lines, and the real Cranfield when
it is present."""

from __future__ import annotations

import math
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from rag_experiments.corpus.loader import load_corpus
from rag_experiments.benchmarks.trec import import_trec, load_smart, read_queries, read_smart
from rag_experiments.errors import CorpusError, GoldenSetError
from rag_experiments.golden.golden_file import GoldenFile

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "benchmarks" / "smart_tiny"


def cranfield_dir() -> Path | None:
    for p in (ROOT / ".." / "shared" / "data" / "cranfield", Path("/work/shared/data/cranfield")):
        if (p / "cran.all.1400").is_file() and (p / "cran.qry").is_file() and (p / "cranqrel").is_file():
            return p.resolve()
    return None


CRANFIELD = cranfield_dir()
needs_cranfield = pytest.mark.skipif(CRANFIELD is None, reason="Cranfield collection not found (../shared/data/cranfield)")


def _import(tmp_path: Path, src: Path = TINY, **kw):
    return import_trec(src, tmp_path / "out" / "corpus", tmp_path / "out" / "golden.jsonl", name="tiny", **kw)


def test_smart_records_fields_and_latin1(tmp_path):
    recs = read_smart(TINY / "tiny.all.6")
    assert [r.id for r in recs] == ["1", "2", "3", "4", "5", "6"]
    assert recs[0].text("A") == "smith,j." and recs[0].where.endswith("tiny.all.6:1")
    assert "régime" in recs[1].text("W")  # byte 0xE9 (Latin-1) decoded, not an error
    assert recs[3].text("W") == "" and "W" in recs[3].fields


def test_import_tiny_collection(tmp_path):
    report = _import(tmp_path)
    docs = {d.doc_id: d for d in load_corpus(tmp_path / "out" / "corpus", "tiny")}
    assert sorted(docs) == ["1", "2", "3", "5", "6"]  # 4 is empty: skipped and reported
    assert report.empty_documents == ["4"] and report.empty_doc_qrels == ["2:4"]
    d2 = docs["2"]
    assert d2.source_uri == "tiny/2" and d2.doc_type == "tiny" and d2.title == "heat transfer to a blunt body in hypersonic flow ."
    assert d2.text.startswith("heat transfer to a blunt body in hypersonic flow .\n\nheat transfer")
    assert "\r" not in d2.text and "régime" in d2.text
    assert (tmp_path / "out" / "corpus" / "2.md").read_bytes().decode("utf-8")  # written as UTF-8

    records = GoldenFile(tmp_path / "out" / "golden.jsonl").read()
    # queries by position: qrels query 2 is the second record (.I 003), not .I 2
    assert [(r["benchmark"]["query_id"], r["query"]) for r in records] == [
        ("1", "boundary layer transition on swept wings ."),
        ("2", "heat transfer in hypersonic flow ."),
        ("3", "buckling of thin cylinders under axial compression ."),
    ]
    ev = {(r["benchmark"]["query_id"], e["doc_id"]): e for r in records for e in r["evidence"]}
    # Cleverdon: gain = 5 - grade; golden 2 for grades 1-2, 1 for grades 3-4; -1 dropped
    assert {k: (e["qrel_grade"], e["qrel_gain"], e["grade"]) for k, e in ev.items()} == {
        ("1", "1"): (1, 4, 2), ("1", "5"): (3, 2, 1), ("2", "2"): (2, 3, 2),
        ("3", "3"): (1, 4, 2), ("3", "1"): (4, 1, 1),
    }
    assert all(e["start"] == 0 and e["quote"] == docs[e["doc_id"]].text for e in ev.values())
    assert report.no_relevant == ["4"] and report.dropped_grades == {-1: 2}
    assert records[0]["provenance"]["files"]["query_numbering"] == "position"


def test_query_numbering_by_id_is_an_option(tmp_path):
    with pytest.raises(GoldenSetError, match=r"tinyqrel:4: query 2: no query in tiny.qry has .I 2"):
        _import(tmp_path, query_numbering="id")
    with pytest.raises(GoldenSetError, match=r"numbered 1..4 by position"):
        src = tmp_path / "src"
        shutil.copytree(TINY, src)
        (src / "tinyqrel").write_text("1 1 1\n9 2 1\n")
        import_trec(src, tmp_path / "c", tmp_path / "g.jsonl")


def test_grade_map_raw_rejects_nothing_and_cleverdon_rejects_off_scale(tmp_path):
    report = _import(tmp_path, grades="raw")  # gain = grade: grade 4 -> gain 4 -> golden 2
    assert report.golden_grades == {1: 2, 2: 3}
    src = tmp_path / "src"
    shutil.copytree(TINY, src)
    (src / "tinyqrel").write_text("1 1 1\n1 2 7\n")
    with pytest.raises(GoldenSetError, match=r"tinyqrel:2: grade 7 is not on the Cleverdon scale"):
        import_trec(src, tmp_path / "c", tmp_path / "g.jsonl")


def _corrupt(tmp_path: Path, name: str, line_no: int, new: str) -> Path:
    src = tmp_path / "src"
    shutil.copytree(TINY, src)
    raw = (src / name).read_bytes().decode("latin-1").split("\r\n")
    raw[line_no - 1] = new
    (src / name).write_bytes("\r\n".join(raw).encode("latin-1"))
    return src


@pytest.mark.parametrize("name, line_no, new, error, message", [
    ("tiny.all.6", 1, "stray text", CorpusError, "text before the first '.I' record"),
    ("tiny.all.6", 1, ".T", CorpusError, "field marker '.T' before the first '.I' record"),
    ("tiny.all.6", 12, ".I", CorpusError, "'.I' without a record id"),
    ("tiny.all.6", 12, ".I 1", CorpusError, "duplicate document id '1'"),
    ("tiny.all.6", 12, ".I 2 3", CorpusError, "contains whitespace"),
    ("tiny.qry", 2, "orphan line", GoldenSetError, "text outside any field of record 001"),
    ("tiny.qry", 4, ".I 001", GoldenSetError, "duplicate query id"),
    ("tinyqrel", 2, "1 5", GoldenSetError, "expected 'query doc grade'"),
    ("tinyqrel", 3, "1 6 x", GoldenSetError, "grade 'x' is not an integer"),
    ("tinyqrel", 4, "2 99 2", GoldenSetError, "document '99' is not in the corpus"),
    ("tinyqrel", 4, "2 5 3", GoldenSetError, None),  # valid line: no error
    ("tinyqrel", 5, "1 5 2", GoldenSetError, "judged again with grade 2"),
])
def test_malformed_lines_name_file_and_line(tmp_path, name, line_no, new, error, message):
    src = _corrupt(tmp_path, name, line_no, new)
    if message is None:
        _import(tmp_path, src)
        return
    with pytest.raises(error) as err:
        _import(tmp_path, src)
    text = str(err.value)
    assert message in text
    # the reported line is the corrupted one, or (duplicates) names it as the first occurrence
    assert f"{src / name}:{line_no}" in text or re.search(rf"{re.escape(str(src / name))}:\d+", text)
    assert not (tmp_path / "out" / "golden.jsonl").exists()


def test_files_are_found_by_name_or_given(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(TINY, src)
    shutil.copy(src / "tiny.qry", src / "other.qry")
    with pytest.raises(CorpusError, match=r"which file holds the queries \(found: other.qry, tiny.qry\)"):
        load_smart(src)
    assert len(load_smart(src, queries="tiny.qry").queries) == 4


def test_cli_import_trec(tmp_path, monkeypatch, capsys):
    from rag_experiments.cli import main

    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))
    assert main(["import-trec", str(TINY), str(tmp_path / "bench"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "3 benchmark cases from 4 queries" in out and "empty documents skipped: 4" in out
    assert (tmp_path / "bench" / "golden.jsonl").exists() and (tmp_path / "bench" / "corpus" / "1.md").exists()


# -- the real collection ------------------------------------------------------------------------
@needs_cranfield
def test_cranfield_import_counts(tmp_path):
    report = import_trec(CRANFIELD, tmp_path / "corpus", tmp_path / "golden.jsonl", name="cranfield")
    assert report.qrels == 1837 and report.raw_grades == {-1: 225, 1: 128, 2: 387, 3: 734, 4: 363}
    assert report.dropped_grades == {-1: 225}
    assert report.empty_documents == ["471", "995"] and report.empty_doc_qrels == ["125:995"]
    assert report.documents == 1398 and report.queries == 225 and report.cases == 225
    assert report.relevant == 1611 and report.golden_grades == {2: 128 + 387, 1: 734 + 363 - 1}
    assert len(list((tmp_path / "corpus").glob("*.md"))) == 1398


def _tfidf_mrr(coll, queries: dict[str, str]) -> float:
    """A crude lexical ranker (tf-idf over lowercased words): enough to tell right query
    matching from wrong (Cranfield's positional numbering trap)."""
    def words(t: str) -> list[str]:
        return re.findall(r"[a-z]{3,}", t.lower())

    docs = {d.doc_id: Counter(words(d.title + " " + d.body)) for d in coll.docs}
    df = Counter(w for c in docs.values() for w in c)
    idf = {w: math.log(len(docs) / n) for w, n in df.items()}
    rel: dict[str, set[str]] = {}
    for q in coll.qrels:
        if q.grade > 0:
            rel.setdefault(q.query_id, set()).add(q.doc_id)
    rr = []
    for qid, text in queries.items():
        if qid not in rel:
            continue
        terms = set(words(text))
        scores = sorted(((sum(c[w] * idf.get(w, 0) for w in terms), d) for d, c in docs.items()), reverse=True)
        ranked = [d for _, d in scores[:10]]
        rr.append(next((1 / i for i, d in enumerate(ranked, 1) if d in rel[qid]), 0.0))
    return sum(rr) / len(rr)


@needs_cranfield
def test_cranfield_positional_query_numbering_is_the_right_one():
    by_position = load_smart(CRANFIELD)
    assert list(by_position.queries)[:3] == ["1", "2", "3"]
    assert by_position.queries["3"].startswith("what problems of heat conduction in composite slabs")  # .I 004
    by_id, _ = read_queries(CRANFIELD / "cran.qry", "id")
    # match qrels to .I numbers: only queries whose .I happens to be a qrels number survive
    wrong = {q: t for q, t in by_id.items() if q in by_position.queries}
    right_mrr = _tfidf_mrr(by_position, by_position.queries)
    wrong_mrr = _tfidf_mrr(by_position, wrong)
    assert right_mrr > 0.4 and wrong_mrr < 0.1, (right_mrr, wrong_mrr)

