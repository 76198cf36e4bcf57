"""Documents that are mostly copies of others (issue 57 item 4): found at load by word-shingle
containment, reported by rag-exp corpus convert, ingest and the run, excluded by
corpus.copies=exclude; a small corpus written here: pages, an all-in-one page repeating two of
them, an index page made of the pages' first lines, an unrelated page."""

from __future__ import annotations

import shutil

import pytest
from mlflow.tracking import MlflowClient

from rag_experiments import cli
from rag_experiments.config import CorpusParams, settings_from_cfg
from rag_experiments.corpus.copies import CopyReport, find_copies, indexed_documents
from rag_experiments.corpus.loader import load_corpus
from rag_experiments.errors import ConfigError
from rag_experiments.experiment import run_experiment
from rag_experiments.golden.build import case_record
from rag_experiments.golden.copies_evidence import relocate_to_kept
from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.golden.resolve import load_golden
from rag_experiments.serving.retriever import corpus_name
from rag_experiments.types import Document

from ..conftest import FIXTURES
from ..test_config import _compose

WORDS = ("index table column lock write scan build option server query plan cost row page vacuum "
         "replica slot wal segment checkpoint buffer cache tuple heap toast").split()


def _prose(seed: int, n: int) -> str:
    """``n`` words of text no other seed repeats five words of (a linear walk over WORDS)."""
    return " ".join(f"{WORDS[(seed * 7 + i * (seed + 3)) % len(WORDS)]}{(i * 31 + seed) % 97}" for i in range(n)) + "."


def _doc(doc_id: str, text: str) -> Document:
    return Document(doc_id=doc_id, source_uri=doc_id, title=doc_id, doc_type="doc", text=text, corpus="t")


PAGE_A = "# A\n\n" + _prose(1, 300)
PAGE_B = "# B\n\n" + _prose(2, 300)
OTHER = "# Other\n\n" + _prose(5, 300)


def test_the_all_in_one_page_goes_and_the_pages_it_repeats_stay():
    docs = [_doc("a.html", PAGE_A), _doc("b.html", PAGE_B), _doc("all.html", PAGE_A + "\n\n" + PAGE_B),
            _doc("other.html", OTHER)]
    report = find_copies(docs)
    assert [c.doc_id for c in report.copies] == ["all.html"]
    (copy,) = report.copies
    assert copy.contained > 0.97 and copy.source in ("a.html", "b.html") and 0.4 < copy.source_share < 0.6
    assert report.line().startswith("1 of 4 document is mostly copies of others (≥ 80% contained): all.html ⊂ "
                                     "other documents together (")


def test_a_page_inside_a_bigger_page_is_the_copy_and_an_unrelated_page_is_not():
    docs = [_doc("page.html", PAGE_A), _doc("big.html", PAGE_A + "\n\n" + _prose(3, 900)), _doc("other.html", OTHER)]
    report = find_copies(docs)
    assert report.line() == ("1 of 3 document is mostly copies of others (≥ 80% contained): "
                             "page.html ⊂ big.html (100%)")


def test_an_index_page_of_the_pages_first_lines_is_contained_in_them_together():
    pages = [_doc(f"p{i}.html", f"p{i} - {_prose(10 + i, 12)}\n\n{_prose(30 + i, 200)}") for i in range(6)]
    index = _doc("index.txt", "\n".join(f"p{i} - {_prose(10 + i, 12)}" for i in range(6)))
    report = find_copies([*pages, index])
    assert [c.doc_id for c in report.copies] == ["index.txt"]
    assert report.copies[0].contained == pytest.approx(1.0, abs=0.1) and report.copies[0].source_share < 0.3


def test_a_template_sibling_is_a_copy_and_its_own_part_is_said():
    """Two module pages from one template (nginx's imap and smtp pages: 87% shared): one is reported as
    a copy, and the report says how many of its words no kept document holds (its own directives),
    which corpus.copies=exclude would take out of the index; a run with exclude warns with them."""
    template = _prose(7, 340)
    docs = [_doc("smtp.html", template + " " + _prose(8, 60)), _doc("imap.html", template + " " + _prose(9, 40)),
            _doc("o.html", OTHER)]
    report = find_copies(docs)
    (copy,) = report.copies
    assert copy.doc_id == "smtp.html" and copy.words == 400  # the larger goes first
    assert copy.own_words == 60 and "not found in the kept documents" in copy.describe()  # its own 60 words
    assert copy.describe().startswith("smtp.html ⊂ imap.html (85%; its other 15%, ")
    assert report.exclusion_loss().startswith(f"corpus.copies=exclude: {copy.own_words} words of the 1 excluded "
                                               f"documents are not found in the kept ones and cannot be retrieved (most: smtp.html")
    # read back from the disk cache: the same report, words and all
    assert CopyReport.from_cache(report.to_cache()).copies == report.copies
    assert find_copies([_doc("page.html", PAGE_A), _doc("big.html", PAGE_A + " " + _prose(3, 900))]
                       ).exclusion_loss() == ""  # wholly inside another page: nothing of its own


def test_two_equal_copies_lose_exactly_one_and_no_text_is_lost():
    docs = [_doc("manual.html", PAGE_A), _doc("manual.txt", PAGE_A.replace("# A", "A\n=")), _doc("o.html", OTHER)]
    report = find_copies(docs)
    assert len(report.copies) == 1 and report.copies[0].source in ("manual.html", "manual.txt")
    assert find_copies(docs[:1] + docs[2:]).copies == ()  # nothing repeated: nothing found
    assert find_copies([_doc("a", "---"), _doc("b", "***")]).copies == ()  # no words at all
    assert find_copies([_doc("a", "---"), _doc("b", PAGE_A), _doc("c", PAGE_A)]).n_documents == 3


def test_exclude_drops_the_copies_and_keys_the_index_by_its_own_corpus_name():
    docs = [_doc("a.html", PAGE_A), _doc("all.html", PAGE_A + _prose(4, 200)), _doc("o.html", OTHER)]
    kept, report = indexed_documents(docs, "exclude")
    assert [d.doc_id for d in kept] == ["all.html", "o.html"] and report.doc_ids == {"a.html"}
    assert {d.corpus for d in kept} == {"t~without-copies"}  # a strategy of its own: no rewrite of the other's
    assert indexed_documents(docs, "report")[0] == docs
    assert indexed_documents(docs, "keep") == (docs, None)


@pytest.mark.parametrize("bad", [{"copies": "drop"}, {"copy_threshold": 0}, {"copy_threshold": 1.5}])
def test_bad_copies_settings_are_refused_naming_the_key(bad):
    with pytest.raises(ConfigError, match="corpus.cop"):
        CorpusParams(**bad)


def _folder_with_an_all_in_one_page(tmp_path):
    folder = tmp_path / "corpus"
    shutil.copytree(FIXTURES / "mini_corpus", folder)

    def body(name: str) -> str:
        return (folder / name).read_text().split("\n---\n", 1)[1]

    (folder / "all-in-one.md").write_text("---\nsource_uri: mini/all-in-one.html\ntitle: Everything\n---\n"
                                          + body("sql-createindex.md") + body("textsearch-controls.md"))
    return folder


def test_corpus_convert_lists_the_copies(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RAG_EXP_CONVERT_CACHE", str(tmp_path / "cc"))
    assert cli.main(["corpus", "convert", str(_folder_with_an_all_in_one_page(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "1 of 7 documents are mostly copies of others" in out
    assert "  mini/all-in-one.html ⊂ other documents together (" in out


SENTENCE = "Indexes are primarily used to enhance database performance."


def test_a_run_with_exclude_indexes_without_the_copy_and_logs_it(project, tmp_path, mini_golden, capsys):
    """The copy is not indexed, and a case quoted from the copy is scored on the same sentence in
    the page it copies (without that it could never be found: recall 0); ingest prints the copies."""
    from rag_experiments.pipeline import log_result

    folder = _folder_with_an_all_in_one_page(tmp_path)
    copy = {d.doc_id: d for d in load_corpus(folder, "mini")}["mini/all-in-one.html"]
    GoldenFile(mini_golden).append([case_record(copy, SENTENCE, "what are indexes primarily used for", "exact",
                                                {"method": "human", "author": "tests"}, case_id="c-copy")])
    base = [f"corpus.path={folder}", "corpus.name=mini", f"golden.path={mini_golden}", "chunking.max_tokens=60",
            "progress=false", "eval.bootstrap_samples=50", "tracking.plots=false", "retrieval=keyword"]
    runs = {}
    for mode in ("report", "exclude"):
        cfg = _compose([*base, f"corpus.copies={mode}"])
        runs[mode] = result = run_experiment(settings_from_cfg(cfg))
        assert result.corpus_manifest["copies"]["copies"][0]["doc_id"] == "mini/all-in-one.html"
        run_id = log_result(result, cfg, mode)
        assert MlflowClient().get_run(run_id).data.tags["corpus.copies_found"] == "1"
    assert runs["report"].ingest.n_documents == 7 and runs["exclude"].ingest.n_documents == 6
    assert runs["report"].ingest.strategy_id != runs["exclude"].ingest.strategy_id
    assert "mini/all-in-one.html" not in runs["exclude"].corpus_manifest["documents"]
    hits = {h.doc_id for r in runs["exclude"].results.values() for h in r.hits}
    assert hits and "mini/all-in-one.html" not in hits
    assert "mini/all-in-one.html" in {h.doc_id for r in runs["report"].results.values() for h in r.hits}
    assert runs["exclude"].corpus_manifest["copies"]["evidence_moved"] == 1
    per_case = runs["exclude"].eval.per_case.set_index("case_id")
    assert per_case.loc["c-copy", "hit_at_5"] == 1.0  # found in sql-createindex, where the copy's text came from

    # rag-exp ingest (the strategy is built above: nothing to do) says what it found and did
    capsys.readouterr()
    sets = [f"corpus.path={folder}", "corpus.name=mini", "chunking.max_tokens=60", "progress=false",
            "retrieval=keyword", "corpus.copies=exclude"]
    assert cli.main(["ingest", *[a for s in sets for a in ("--set", s)]]) == 0
    out = capsys.readouterr().out
    assert ("1 of 7 document is mostly copies of others (≥ 80% contained): mini/all-in-one.html ⊂ other documents "
            "together (") in out
    assert "; excluded from the index (corpus.copies=exclude; 6 documents indexed)" in out
    assert runs["exclude"].ingest.strategy_id + ": unchanged" in out


def test_relocated_spans_move_to_the_kept_source_and_unfound_ones_are_counted(tmp_path):
    chunk = ("Record changes to the repository: the new commit holds the index as its tree, and the "
             "current branch moves to point at it, unless --dry-run is given.")
    page = _doc("page.html", "# Page\n\nThe **index** holds\nthe snapshot.\n\n" + chunk + "\n")
    source = chunk.replace(": the", "; the").replace("--dry-run", "`--dry-run`::").replace(".", "!")
    copy = _doc("all.html", "# All\n\nThe index holds the snapshot.\n\nOnly here.\n\n" + source + "\n")
    path = tmp_path / "g.jsonl"
    author = {"method": "human", "author": "t"}
    GoldenFile(path).append([case_record(copy, "The index holds the snapshot.", "what holds the snapshot", "exact",
                                         author, case_id="c-1"),
                             case_record(copy, "Only here.", "what is only here", "exact", author, case_id="c-2"),
                             case_record(copy, source, "what does commit record", "paraphrase", author, case_id="c-3")])
    got = relocate_to_kept(load_golden(path), [page, copy], frozenset({"all.html"}), {"all.html": "page.html"})
    assert (got.moved, got.unreachable) == (2, 1)
    near = got.golden.cases[2].evidence[0].span  # markup and punctuation differ: found approximately
    assert near.doc_id == "page.html" and chunk.startswith(page.text[near.start:near.end][:60])
    moved = got.golden.cases[0].evidence[0].span
    assert (moved.doc_id, page.text[moved.start:moved.end]) == ("page.html", "The **index** holds\nthe snapshot.")
    assert got.golden.cases[1].evidence[0].span.doc_id == "all.html"  # nowhere else: stays, unreachable


def test_serving_looks_for_the_strategy_a_run_with_exclude_built():
    exclude = settings_from_cfg(_compose(["corpus.copies=exclude"]))
    assert corpus_name(exclude) == "demo~without-copies"
    assert corpus_name(settings_from_cfg(_compose([]))) == "demo"


def test_the_report_is_cached_on_disk_by_corpus_and_threshold(tmp_path, monkeypatch):
    """A second process (the in-process memo cleared) reads the report from the disk cache and does
    not compute it again; an edited document, or another threshold, computes it again. Before, every
    run, ingest and serving process recomputed it (0.6-1.6 s on the demo)."""
    from rag_experiments.corpus import copies

    monkeypatch.setenv("RAG_EXP_CONVERT_CACHE", str(tmp_path / "cache"))
    computed: list[int] = []
    real = copies._find_copies
    monkeypatch.setattr(copies, "_find_copies", lambda docs, t: computed.append(len(docs)) or real(docs, t))
    docs = [_doc("a.html", PAGE_A), _doc("b.html", PAGE_B), _doc("all.html", PAGE_A + "\n\n" + PAGE_B)]

    copies._FOUND.clear()
    first = find_copies(docs)
    assert computed == [3] and first.doc_ids == {"all.html"} and not first.cached
    (entry,) = (tmp_path / "cache" / "copies").glob("*.json")

    copies._FOUND.clear()  # the next process
    again = find_copies(docs)
    assert computed == [3] and again.cached  # read, not computed
    assert again.copies == first.copies and again.n_documents == 3 and "cached" in again.lines()[0]

    copies._FOUND.clear()
    edited = [docs[0], _doc("b.html", PAGE_B + " One more sentence."), docs[2]]
    assert find_copies(edited).doc_ids == {"all.html"} and computed == [3, 3]  # another corpus: computed
    copies._FOUND.clear()
    find_copies(docs, threshold=0.9)
    assert computed == [3, 3, 3]  # another corpus.copy_threshold: computed
    entry.write_text("{torn", encoding="utf-8")
    copies._FOUND.clear()
    assert find_copies(docs).copies == first.copies and computed == [3, 3, 3, 3]  # unreadable: computed again
