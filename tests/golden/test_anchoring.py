"""Corpus drift: re-anchoring labelled spans after corpus edits (rag_experiments.golden.anchoring).

A copy of three demo pages, cases built from them with ``case_record``, then real edits to the
files: insert a paragraph (moved), reword a sentence (fuzzy), delete a passage or a page (stale).
No database: evaluation runs on hand-made ranked lists whose hits are placed where a chunker
would put them in the current text.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from rag_experiments.corpus.loader import demo_corpus_dir, load_corpus
from rag_experiments.evaluation.evaluate import EvalParams, evaluate
from rag_experiments.commands.drift import fix_command
from rag_experiments.golden.anchoring import (
    FUZZY_THRESHOLD, check, drift_status, drift_warning, reanchor,
)
from rag_experiments.golden.build import case_record
from rag_experiments.golden.records import new_id
from rag_experiments.golden.resolve import current, load_golden
from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.types import Hit, RankedList

PAGES = ("brin-intro.md", "functions-enum.md", "btree-intro.md")
PROV = {"method": "human", "author": "tests"}

# quote (verbatim in the demo page), page, query
BLOCK_SIZE = ("The size of the block range is determined at index creation time by the `pages_per_range` storage "
              "parameter.")
BITMAP = ("BRIN indexes can satisfy queries via regular bitmap index scans, and will return all tuples in all pages "
          "within each range if the summary info stored by the index is *consistent* with the query conditions.")
DESUMMARIZE = ("Conversely, a range can be de-summarized using the `brin_desummarize_range(regclass, bigint)` "
               "function, which is useful when the index tuple is no longer a very good representation because the "
               "existing values have changed.")
ENUM_FIRST = "Returns the first value of the input enum type."
BTREE = ("The only limitation is that an index entry cannot exceed approximately one-third of a page (after TOAST "
         "compression, if applicable).")
CASES = {
    "block_size": ("brin-intro.md", BLOCK_SIZE, "what sets the size of a BRIN block range?"),
    "bitmap": ("brin-intro.md", BITMAP, "how does a BRIN index answer a query?"),
    "desummarize": ("brin-intro.md", DESUMMARIZE, "how do I de-summarize a BRIN range?"),
    "enum_first": ("functions-enum.md", ENUM_FIRST, "first value of an enum type"),
    "btree": ("btree-intro.md", BTREE, "how large can a btree index entry be?"),
}
INSERTED = ("This paragraph was added by a documentation update. It says nothing about block ranges, but it "
            "pushes every passage below it further down the page.\n\n")


@pytest.fixture
def corpus(tmp_path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    for page in PAGES:
        shutil.copy(demo_corpus_dir() / page, folder / page)
    return folder


@pytest.fixture
def golden(tmp_path, corpus) -> Path:
    docs = {Path(d.source_uri).stem: d for d in load_corpus(corpus, "test")}
    records = [case_record(docs[Path(page).stem], quote, query, "paraphrase", PROV, case_id=f"c-{name}")
               for name, (page, quote, query) in CASES.items()]
    path = tmp_path / "golden.jsonl"
    GoldenFile(path).append(records)
    return path


def edit(corpus: Path, page: str, old: str, new: str) -> None:
    path = corpus / page
    raw = path.read_text(encoding="utf-8")
    assert raw.count(old) == 1, f"{page}: {old[:40]!r} must occur once"
    path.write_text(raw.replace(old, new), encoding="utf-8")


def anchors(path: Path) -> dict[str, dict]:
    return {r["ref"]: r for r in GoldenFile(path).read() if r["type"] == "anchor"}


def docs_of(corpus: Path):
    return load_corpus(corpus, "test")


def doc(corpus: Path, page: str):
    return next(d for d in docs_of(corpus) if d.source_uri.endswith(Path(page).stem + ".html"))


# -- the four outcomes ---------------------------------------------------------------------------
def test_unchanged_corpus_appends_nothing(golden, corpus):
    before = golden.read_bytes()
    report = reanchor(golden, docs_of(corpus))
    assert report.counts["doc_unchanged"] == report.spans == 5
    assert (report.moved, report.fuzzy, report.stale) == (0, 0, 0) and not report.records
    assert golden.read_bytes() == before


def test_inserted_paragraph_moves_the_span_with_correct_offsets(golden, corpus):
    old = doc(corpus, "brin-intro.md")
    old_start = old.text.index(BLOCK_SIZE)
    edit(corpus, "brin-intro.md", "BRIN indexes can satisfy", INSERTED + "BRIN indexes can satisfy")
    new = doc(corpus, "brin-intro.md")

    report = reanchor(golden, docs_of(corpus))

    # BLOCK_SIZE, BITMAP and DESUMMARIZE are below the insertion; nothing else changed
    assert (report.moved, report.fuzzy, report.stale) == (3, 0, 0)
    a = anchors(golden)["c-block_size#0"]
    assert a["status"] == "moved" and a["similarity"] == 1.0
    assert a["span"]["start"] == old_start + len(INSERTED) == new.text.index(BLOCK_SIZE)
    assert a["span"]["end"] == a["span"]["start"] + len(BLOCK_SIZE)
    assert a["span"]["quote"] == new.text[a["span"]["start"]:a["span"]["end"]] == BLOCK_SIZE
    assert a["span"]["doc_hash"] == new.content_hash != old.content_hash
    assert a["previous"] == {"doc_id": old.doc_id, "start": old_start, "end": old_start + len(BLOCK_SIZE),
                             "doc_hash": old.content_hash}
    case = next(c for c in load_golden(golden).cases if c.case_id == "c-block_size")
    assert case.evidence[0].status == "moved" and case.evidence[0].span.start == a["span"]["start"]


def test_passage_above_the_edit_is_unchanged_and_gets_no_record(golden, corpus):
    edit(corpus, "brin-intro.md", "Lastly, the following functions", INSERTED + "Lastly, the following functions")
    report = reanchor(golden, docs_of(corpus))
    assert report.counts["in_place"] == 2  # BLOCK_SIZE and BITMAP stand above the insertion
    assert set(anchors(golden)) == {"c-desummarize#0"}


def test_quote_found_twice_takes_the_occurrence_nearest_the_old_offset(golden, corpus):
    old_start = doc(corpus, "brin-intro.md").text.index(BLOCK_SIZE)
    edit(corpus, "brin-intro.md", "BRIN indexes can satisfy", "Short insert.\n\nBRIN indexes can satisfy")
    edit(corpus, "brin-intro.md", "## 71.1.1. Index Maintenance", "Recap: " + BLOCK_SIZE + "\n\n## 71.1.1. Index Maintenance")
    text = doc(corpus, "brin-intro.md").text
    reanchor(golden, docs_of(corpus))
    a = anchors(golden)["c-block_size#0"]
    assert a["status"] == "moved"
    assert a["span"]["start"] == text.index(BLOCK_SIZE) == old_start + len("Short insert.\n\n")
    assert text.count(BLOCK_SIZE) == 2 and "found 2 times" in a["note"] and "nearest the old offset" in a["note"]


def test_reworded_sentence_is_fuzzy_with_its_similarity(golden, corpus):
    reworded = BITMAP.replace("and will return all tuples in all pages", "and return every tuple in all pages")
    edit(corpus, "brin-intro.md", BITMAP, reworded)
    new = doc(corpus, "brin-intro.md")
    report = reanchor(golden, docs_of(corpus))
    assert (report.moved, report.fuzzy, report.stale) == (2, 1, 0)  # the shorter sentence shifts 2 spans below
    a = anchors(golden)["c-bitmap#0"]
    assert a["status"] == "fuzzy" and FUZZY_THRESHOLD <= a["similarity"] < 1.0
    start = new.text.index(reworded)
    assert (a["span"]["start"], a["span"]["end"]) == (start, start + len(reworded))  # exactly the new sentence
    assert a["span"]["quote"] == reworded and a["span"]["doc_hash"] == new.content_hash


def test_rewritten_sentence_below_the_threshold_is_stale(golden, corpus):
    edit(corpus, "brin-intro.md", BITMAP, "BRIN scans are lossy bitmap scans; the executor rechecks every row.")
    reanchor(golden, docs_of(corpus))
    a = anchors(golden)["c-bitmap#0"]
    assert a["status"] == "stale" and "span" not in a


def test_deleted_passage_is_stale_and_its_case_excluded(golden, corpus):
    edit(corpus, "brin-intro.md", DESUMMARIZE + " See Section 9.27.8 for details.", "")
    report = reanchor(golden, docs_of(corpus))
    assert (report.moved, report.fuzzy, report.stale) == (0, 0, 1)
    a = anchors(golden)["c-desummarize#0"]
    assert a["status"] == "stale" and "span" not in a
    assert a["checked_doc_hash"] == doc(corpus, "brin-intro.md").content_hash
    case = next(c for c in load_golden(golden).cases if c.case_id == "c-desummarize")
    assert case.all_stale


def test_deleted_document_is_stale(golden, corpus):
    (corpus / "functions-enum.md").unlink()
    report = reanchor(golden, docs_of(corpus))
    assert (report.moved, report.fuzzy, report.stale) == (0, 0, 1)
    a = anchors(golden)["c-enum_first#0"]
    assert a["status"] == "stale" and a["checked_doc_hash"] == "" and "removed" in a["note"]


def test_near_duplicate_of_a_deleted_passage_is_not_taken_for_it(tmp_path):
    folder = tmp_path / "dup"
    folder.mkdir()
    a = ("The left-hand side of this form of `NOT IN` is a row constructor. The right-hand side is a "
         "parenthesized subquery, which must return exactly as many columns as there are expressions.")
    b = a.replace("`NOT IN`", "`IN`")
    (folder / "p.md").write_text(f"# Subqueries\n\n{b}\n\n{a}\n")
    d, = load_corpus(folder, "t")
    path = tmp_path / "g.jsonl"
    GoldenFile(path).append([case_record(d, a, "row constructor NOT IN", "exact", PROV, case_id="c-notin")])
    (folder / "p.md").write_text(f"# Subqueries\n\n{b}\n")
    reanchor(path, load_corpus(folder, "t"))
    assert anchors(path)["c-notin#0"]["status"] == "stale"  # not 'fuzzy' at the IN paragraph (0.97 similar)


# -- append-only, idempotent ---------------------------------------------------------------------
def all_edits(corpus: Path) -> None:
    edit(corpus, "brin-intro.md", "BRIN indexes can satisfy", INSERTED + "BRIN indexes can satisfy")
    edit(corpus, "brin-intro.md", "and will return all tuples in all pages", "and return every tuple in all pages")
    edit(corpus, "brin-intro.md", DESUMMARIZE, "")
    (corpus / "functions-enum.md").unlink()


def test_running_twice_appends_nothing_the_second_time(golden, corpus):
    all_edits(corpus)
    first = reanchor(golden, docs_of(corpus))
    assert (first.moved, first.fuzzy, first.stale) == (1, 1, 2) and len(first.records) == 4
    after_first = golden.read_bytes()
    second = reanchor(golden, docs_of(corpus))
    assert second.records == () and golden.read_bytes() == after_first
    assert second.counts["still_stale"] == 2 and second.counts["doc_unchanged"] == 3
    GoldenFile(golden).read()  # chain and manifest still verify


def test_records_are_appended_never_edited(golden, corpus):
    lines_before = golden.read_text().splitlines()
    all_edits(corpus)
    reanchor(golden, docs_of(corpus))
    lines_after = golden.read_text().splitlines()
    assert lines_after[:len(lines_before)] == lines_before
    assert all('"type":"anchor"' in line for line in lines_after[len(lines_before):])


def test_dry_run_writes_nothing(golden, corpus):
    all_edits(corpus)
    before = golden.read_bytes()
    report = reanchor(golden, docs_of(corpus), dry_run=True)
    assert len(report.records) == 4 and golden.read_bytes() == before


def test_edited_again_after_a_fuzzy_anchor_uses_the_anchored_span(golden, corpus):
    edit(corpus, "brin-intro.md", "and will return all tuples in all pages", "and return every tuple in all pages")
    reanchor(golden, docs_of(corpus))
    edit(corpus, "brin-intro.md", "BRIN indexes can satisfy", INSERTED + "BRIN indexes can satisfy")
    reanchor(golden, docs_of(corpus))
    refs = {sr.ref: sr for sr in current(GoldenFile(golden).read_records()).spans}
    sr = refs["c-bitmap#0"]
    text = doc(corpus, "brin-intro.md").text
    # still 'fuzzy' (its text is not the labelled one), at the shifted offsets
    assert sr.status == "fuzzy" and sr.effective.start == text.index("BRIN indexes can satisfy")
    assert reanchor(golden, docs_of(corpus)).records == ()


def test_a_stale_passage_that_comes_back_is_anchored_again(golden, corpus):
    original = (corpus / "functions-enum.md").read_bytes()
    (corpus / "functions-enum.md").unlink()
    reanchor(golden, docs_of(corpus))
    (corpus / "functions-enum.md").write_bytes(original)
    report = reanchor(golden, docs_of(corpus))
    a = anchors(golden)["c-enum_first#0"]
    assert report.moved == 1 and a["status"] == "moved" and "found again" in a["note"]
    assert not next(c for c in load_golden(golden).cases if c.case_id == "c-enum_first").all_stale


# -- read-only drift status for runs -------------------------------------------------------------
def test_drift_status_counts_pending_spans_and_writes_nothing(golden, corpus):
    assert drift_status(golden, docs_of(corpus))["pending"] == 0
    assert drift_warning(drift_status(golden, docs_of(corpus))) is None
    all_edits(corpus)
    before = golden.read_bytes()
    status = drift_status(golden, docs_of(corpus))
    assert golden.read_bytes() == before
    # BLOCK_SIZE, BITMAP, DESUMMARIZE moved/reworded/deleted; ENUM_FIRST's page removed
    assert status == {"spans": 5, "unchanged": 1, "in_place": 0, "pending": 4, "pending_removed": 1,
                      "pending_cases": 4, "anchored": 0, "stale": 0}
    warning = drift_warning(status, golden, corpus)
    assert "4 labelled spans" in warning and "rag-exp golden check" in warning
    reanchor(golden, docs_of(corpus))
    after = drift_status(load_golden(golden), docs_of(corpus))  # a loaded GoldenSet works too
    assert after["pending"] == 0 and after["anchored"] == 2 and after["stale"] == 2


# -- evaluation ----------------------------------------------------------------------------------
def ranked(corpus: Path, query: str, quotes: list[str]) -> RankedList:
    """Hits where a chunker would put them in the *current* text: around each quote."""
    docs = {d.doc_id: d for d in docs_of(corpus)}
    hits = []
    for quote in quotes:
        d = next(d for d in docs.values() if quote in d.text)
        s = d.text.index(quote)
        hits.append(Hit(chunk_id=f"{d.doc_id}:{s}", doc_id=d.doc_id, source_uri=d.source_uri, doc_type=d.doc_type,
                        start=max(0, s - 20), end=min(len(d.text), s + len(quote) + 20), score=1.0 / (len(hits) + 1),
                        rank=len(hits) + 1))
    return RankedList(query, tuple(hits))


def test_unchanged_case_scores_identically_after_an_edit_elsewhere(golden, corpus):
    params = EvalParams(ks=(1, 5), mrr_k=5, ndcg_k=5, judged_k=5, curve_k=5)
    results = {"c-btree": ranked(corpus, "q", [BTREE, BITMAP]),
               "c-block_size": ranked(corpus, "q", [BITMAP, BLOCK_SIZE])}
    gs = load_golden(golden)
    gs = type(gs)(gs.path, gs.digest, tuple(c for c in gs.cases if c.case_id in results), gs.records)
    before = evaluate(gs, results, params).per_case.set_index("case_id")

    edit(corpus, "brin-intro.md", "BRIN indexes can satisfy", INSERTED + "BRIN indexes can satisfy")
    reanchor(golden, docs_of(corpus))
    after_results = {"c-btree": ranked(corpus, "q", [BTREE, BITMAP]),
                     "c-block_size": ranked(corpus, "q", [BITMAP, BLOCK_SIZE])}  # re-chunked: new offsets
    gs2 = load_golden(golden)
    gs2 = type(gs2)(gs2.path, gs2.digest, tuple(c for c in gs2.cases if c.case_id in results), gs2.records)
    assert gs2.digest != gs.digest  # re-anchoring is a new golden-set version
    after = evaluate(gs2, after_results, params).per_case.set_index("case_id")

    # every score column (chunk-id columns differ: the edited page was re-chunked)
    cols = params.metric_names() + ["first_relevant_rank", "recall_curve", "gains", "grades", "n_relevant"]
    assert before.loc["c-btree", cols].to_dict() == after.loc["c-btree", cols].to_dict()
    # the moved passage is still found at rank 2, through its anchor
    assert before.loc["c-block_size", "first_relevant_rank"] == after.loc["c-block_size", "first_relevant_rank"] == 2
    assert after.loc["c-block_size", "recall_at_5"] == 1.0


def test_case_with_only_stale_evidence_is_excluded_not_a_miss(golden, corpus):
    (corpus / "functions-enum.md").unlink()
    reanchor(golden, docs_of(corpus))
    gs = load_golden(golden)
    results = {c.case_id: ranked(corpus, c.query, [BTREE]) for c in gs.cases if c.case_id != "c-enum_first"}
    result = evaluate(gs, results, EvalParams(ks=(1, 5), mrr_k=5, ndcg_k=5, judged_k=5, curve_k=5))
    assert result.excluded == ("c-enum_first",)
    assert "c-enum_first" not in set(result.per_case["case_id"]) and result.n_cases == 4
    assert gs.anchor_counts()["stale"] == 1


# -- check and the CLI ---------------------------------------------------------------------------
def test_check_lists_stale_spans_with_a_command_that_fixes_them(golden, corpus, capsys):
    from rag_experiments.cli import main

    edit(corpus, "brin-intro.md", DESUMMARIZE, "A range can also be de-summarized by a function.")
    assert main(["golden", "check", "--golden", str(golden), "--corpus", str(corpus)]) == 1
    out = capsys.readouterr().out
    assert "stale 1" in out and "rag-exp golden reanchor" in out  # not yet recorded: suggests reanchor
    assert main(["golden", "reanchor", "--golden", str(golden), "--corpus", str(corpus)]) == 0
    rep = check(golden, docs_of(corpus))
    item, = rep.stale
    assert item.ref == "c-desummarize#0" and item.recorded and item.case_all_stale
    cmd = fix_command(item, golden, corpus).replace(item.candidate.quote if item.candidate else "PASTE THE PASSAGE "
                                                     "THAT NOW ANSWERS THE QUESTION",
                                                     "A range can also be de-summarized by a function.")
    argv = shlex.split(cmd)
    assert argv[:3] == ["rag-exp", "golden", "reanchor"] and "--source-uri" in argv and "--quote" in argv
    assert main(argv[1:] + ["--author", "tester", "--reason", "sentence shortened upstream"]) == 0
    a = anchors(golden)["c-desummarize#0"]
    assert a["status"] == "moved" and a["by"] == {"kind": "human", "name": "tester"}
    assert not next(c for c in load_golden(golden).cases if c.case_id == "c-desummarize").all_stale
    assert check(golden, docs_of(corpus)).clean
    assert main(argv[1:]) == 0 and len(anchors(golden)) == 1  # the same fix twice appends nothing
    # a later edit above it moves the human-anchored passage (its text is now the reference)
    edit(corpus, "brin-intro.md", "BRIN indexes can satisfy", INSERTED + "BRIN indexes can satisfy")
    reanchor(golden, docs_of(corpus))
    assert anchors(golden)["c-desummarize#0"]["status"] == "moved"


def test_reanchor_cli_reports_counts(golden, corpus, capsys):
    from rag_experiments.cli import main

    all_edits(corpus)
    assert main(["golden", "reanchor", "--golden", str(golden), "--corpus", str(corpus), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "moved 1, fuzzy 1, stale 2" in out and "would append 4 anchor records" in out
    assert not anchors(golden)
    assert main(["golden", "reanchor", "--golden", str(golden), "--corpus", str(corpus), "--ref", "c-x#0"]) == 2


def test_anchor_ids_stay_unique_when_a_state_recurs(golden, corpus):
    original = (corpus / "functions-enum.md").read_bytes()
    for _ in range(2):  # removed, restored, removed, restored: four distinct records
        (corpus / "functions-enum.md").unlink()
        reanchor(golden, docs_of(corpus))
        (corpus / "functions-enum.md").write_bytes(original)
        reanchor(golden, docs_of(corpus))
    recs = [r for r in GoldenFile(golden).read() if r["type"] == "anchor"]
    assert [r["status"] for r in recs] == ["stale", "moved", "stale", "moved"]
    assert len({r["id"] for r in recs}) == 4 and new_id("a", "x") != new_id("a", "y")


