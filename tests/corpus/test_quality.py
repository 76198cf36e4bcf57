"""Conversion quality checks (issue 44, item 5): garbled text and boilerplate pages are named in
``rag-exp corpus convert`` as warnings, and ``--strict`` fails on them.

The samples are real conversions from Debian documentation packages (tests/fixtures/quality/
README.md): a page of groff's pdfmark.pdf as pypdf extracts it (word spacing garbled) and a table
of contents page of zsh-doc's pdfTeX zsh.pdf. The clean text they are judged against is the demo
corpus (186 pages of the PostgreSQL manual), which must raise no warning at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_experiments.corpus.loader import load_corpus
from rag_experiments.corpus.quality import DocQuality, assess, load_dictionary
from rag_experiments.types import Document, SourceFile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "quality"
GARBLED = (FIXTURES / "groff_pdfmark_page1.txt").read_text(encoding="utf-8")
TOC = (FIXTURES / "zsh_pdf_toc_page.txt").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_EXP_CONVERT_CACHE", str(tmp_path / "convert-cache"))


@pytest.fixture(scope="module")
def demo():
    return load_corpus("demo")


def _doc(doc_id: str, text: str, pages: tuple[int, ...] = ()) -> Document:
    source = SourceFile(path=doc_id, file_sha256="0" * 64, converter="pypdf 7.1.1", pages=pages) if pages else None
    return Document(doc_id, doc_id, doc_id, "doc", text, corpus="t", source=source)


@pytest.mark.parametrize("dictionary", [None, "tiny"])
def test_a_garbled_pdf_page_is_named_and_the_demo_is_clean(demo, dictionary):
    words = frozenset({"the", "document"}) if dictionary else None  # a dictionary only adds words
    report = assess([*demo, _doc("pdfmark.pdf", GARBLED)], words)
    flagged = {q.doc_id: q for q in report.flagged}
    assert list(flagged) == ["pdfmark.pdf"]  # no demo page is flagged
    q = flagged["pdfmark.pdf"]
    assert q.garbled and not q.boilerplate and q.distinct_broken >= 3
    assert "an ysection" in q.examples  # the "an ypart": a space one letter off
    (line,) = q.warnings()
    assert line.startswith("text looks garbled: ") and "\n" not in line and "'an ysection'" in line


def test_the_same_words_correctly_spaced_are_not_garbled(demo):
    fixed = (GARBLED.replace("an ysection", "any section").replace("ha ve", "have").replace("na vigate", "navigate")
             .replace("acti ve l inks", "active links").replace("e ven", "even").replace("howthe", "how the")
             .replace("w hich", "which").replace("b een", "been").replace("viewpane", "view pane")
             .replace("a vailable", "available").replace("pro vided", "provided").replace("se veral", "several")
             .replace("e xhaustive,and", "exhaustive, and").replace("an yofthese", "any of these")
             .replace("editor ,for", "editor, for").replace("make,together", "make, together")
             .replace("Reader,by", "Reader, by").replace("Reader,itshould", "Reader, it should"))
    q = assess([*demo, _doc("pdfmark.pdf", fixed)], None).by_id()["pdfmark.pdf"]
    assert not q.garbled, (q.examples, q.broken_per_1000)


def test_glued_words_around_a_digit_and_camel_case_count(demo):
    text = ("The index0contains every row. " + "Creating aDocument outline helps. " * 2
            + " ".join(["The planner reads the table and the index."] * 30))
    q = assess([*demo, _doc("x.pdf", text)], None).by_id()["x.pdf"]
    assert "index0contains" in q.examples and "aDocument" in q.examples


def test_a_table_of_contents_page_is_boilerplate_and_its_pages_are_named(demo):
    body = "\n".join(demo[0].text.split("\n")[:40]) + "\n"
    whole = _doc("toc.pdf", TOC)
    paged = _doc("manual.pdf", body + TOC + body, pages=(0, len(body), len(body) + len(TOC)))
    report = assess([*demo, whole, paged], None).by_id()
    assert report["toc.pdf"].boilerplate
    assert report["toc.pdf"].warnings() == [
        "boilerplate: a table of contents or an index (mostly dot leaders, page numbers, section references)"]
    q = report["manual.pdf"]
    assert not q.boilerplate and q.boilerplate_pages == (2,)
    assert q.boilerplate_spans() == ((len(body), len(body) + len(TOC)),)
    assert q.warnings() == ["boilerplate pages (table of contents / index): 2"]
    assert not any(report[d.doc_id].boilerplate_pages for d in demo)


def test_an_html_index_page_is_boilerplate(demo):
    rows = "\n".join(f"| | {w}, options | | 16.2.{i % 9 + 1} Scripts and Functions |" for i, w in
                     enumerate(["aliases", "arrays", "globbing", "history", "jobs", "prompts", "traps", "widgets",
                                "zle", "zstyle", "zmodload", "zparseopts"]))
    text = f"# Concept Index\n\n| | Index Entry | | Section |\n| --- | --- | --- | --- |\n| A | | | |\n{rows}\n"
    assert assess([*demo, _doc("Concept-Index.html", text)], None).by_id()["Concept-Index.html"].boilerplate


def test_short_or_rare_text_is_not_judged():
    q = DocQuality("d", words=50, unknown=0.9, glued=10, split=10, pages=1, distinct_broken=10)
    assert not q.garbled  # under MIN_WORDS: too little text to judge
    small = DocQuality("d", words=500, unknown=0.5, glued=0, split=0, pages=1, vocabulary_broad=False)
    assert not small.garbled  # a 6-file corpus without a dictionary: "unknown" says nothing
    assert DocQuality("d", words=500, unknown=0.5, glued=0, split=0, pages=1).garbled


def test_dictionary_file_is_read_when_present(tmp_path):
    words = tmp_path / "words"
    words.write_text("Apple\napple's\nzebra\n\n", encoding="utf-8")
    assert load_dictionary(words) == frozenset({"apple", "zebra"})
    assert load_dictionary(tmp_path / "absent") is None
    report = assess([_doc("a", "zebra apple")], words)
    assert report.dictionary == str(words)


def _fpdf_page(lines: list[str]) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=9)
    pdf.add_page()
    for line in lines:
        pdf.cell(0, 4, line.encode("latin-1", "replace").decode("latin-1"), new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def test_corpus_convert_names_the_garbled_pdf_and_strict_fails(tmp_path, capsys):
    from rag_experiments import cli

    for d in load_corpus("demo")[:40]:  # a vocabulary: 40 clean pages
        (tmp_path / (d.doc_id.rsplit("/", 1)[-1].replace(".html", ".md"))).write_text(d.text, encoding="utf-8")
    (tmp_path / "pdfmark.pdf").write_bytes(_fpdf_page(GARBLED.split("\n")))
    (tmp_path / "toc.txt").write_text(TOC, encoding="utf-8")
    assert cli.main(["corpus", "convert", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("  warning ")]
    assert [ln.split(":")[0] for ln in lines] == ["  warning pdfmark.pdf", "  warning toc.txt"]
    assert "text looks garbled" in lines[0] and "boilerplate" in lines[1]
    assert "2 warning(s) from the text checks" in out
    assert cli.main(["corpus", "convert", str(tmp_path), "--strict"]) == 1
    out = capsys.readouterr().out
    assert sum(ln.startswith("  failed ") for ln in out.splitlines()) == 2
