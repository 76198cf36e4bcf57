"""PDF, DOCX, PPTX, HTML and plain text in a corpus folder (issue 28, item 3).

Every file is made at test time by the real library a team's tools would use (fpdf2, python-docx,
python-pptx) with known words, then loaded through load_corpus / read_corpus: the text, the page
and heading metadata, the manifest's converter entries, the conversion cache (a second load
converts nothing) and the failures (named, skipped, counted, never a traceback).
"""

from __future__ import annotations

import hashlib
import io
import json
import warnings

import pytest

from rag_experiments.corpus.convert import ConversionError, convert_bytes, tidy
from rag_experiments.corpus.convert_cache import ConversionCache
from rag_experiments.corpus.html_import import html_to_markdown
from rag_experiments.corpus.loader import corpus_manifest, load_corpus, read_corpus
from rag_experiments.errors import CorpusError
from rag_experiments.types import Document, SourceFile

P1 = "The work_mem setting caps the memory of one sort or hash step."
P2 = "Autovacuum reclaims dead tuples; see autovacuum_naptime for its period."
P3 = "A BRIN index stores one summary per block range."


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    """Every test gets its own conversion cache: nothing is written under the working folder."""
    monkeypatch.setenv("RAG_EXP_CONVERT_CACHE", str(tmp_path / "convert-cache"))


# ---- generators -------------------------------------------------------------------------------


def make_pdf(pages: list[str | None], *, title: str | None = "Tuning notes", enc: dict | None = None) -> bytes:
    """One page per entry: its text under a bookmark ``Part n``; None = a page with only a drawing."""
    from fpdf import FPDF

    pdf = FPDF()
    if enc:
        pdf.set_encryption(**enc)
    if title:
        pdf.set_title(title)
    pdf.set_font("helvetica", size=11)
    for n, text in enumerate(pages, start=1):
        pdf.add_page()
        if text is None:
            pdf.rect(20, 20, 80, 40, style="F")  # a scan would be an image: no text operator either way
            continue
        pdf.start_section(f"Part {n}")
        pdf.multi_cell(0, 6, f"Part {n}", align="L", new_x="LMARGIN", new_y="NEXT")
        pdf.multi_cell(0, 6, text, align="L", new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def make_docx() -> bytes:
    import docx

    d = docx.Document()
    d.core_properties.title = "Memory settings"
    d.add_heading("Memory settings", level=1)
    d.add_paragraph(P1)
    d.add_heading("Vacuum", level=2)
    d.add_paragraph(P2)
    t = d.add_table(rows=2, cols=2)
    for r, (a, b) in enumerate([("parameter", "default"), ("work_mem", "4MB")]):
        t.cell(r, 0).text, t.cell(r, 1).text = a, b
    d.add_paragraph("first point", style="List Bullet")
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def make_pptx() -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    s1 = prs.slides.add_slide(prs.slide_layouts[5])
    s1.shapes.title.text = "Memory"
    box = s1.shapes.add_textbox(Inches(1), Inches(2), Inches(8), Inches(2)).text_frame
    box.text = P1
    s1.notes_slide.notes_text_frame.text = "Say why 4MB is small."
    s2 = prs.slides.add_slide(prs.slide_layouts[5])
    s2.shapes.title.text = "Indexes"
    s2.shapes.add_textbox(Inches(1), Inches(1.5), Inches(8), Inches(1)).text_frame.text = P3
    group = s2.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(6), Inches(4), Inches(1)).text_frame.text = "grouped caption"
    table = s2.shapes.add_table(2, 2, Inches(1), Inches(4), Inches(6), Inches(1)).table
    for r, (a, b) in enumerate([("index", "size"), ("brin", "tiny")]):
        table.cell(r, 0).text, table.cell(r, 1).text = a, b
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


HTML = (f"<html><head><title>Vacuum</title></head><body><h1>Vacuum</h1><p>{P2}</p>"
        "<pre>VACUUM (VERBOSE) t;</pre><table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>"
        "</body></html>")


def _docs(folder) -> dict[str, Document]:
    return {d.doc_id: d for d in read_corpus(folder).docs}


# ---- each format ------------------------------------------------------------------------------


def test_pdf_text_pages_and_bookmarks(tmp_path):
    (tmp_path / "notes.pdf").write_bytes(make_pdf([P1, None, P2 + "\n" + P3]))
    doc = _docs(tmp_path)["notes.pdf"]
    assert (doc.source_uri, doc.title, doc.doc_type) == ("notes.pdf", "Tuning notes", "doc")
    for sentence in (P1, P2, P3):
        assert sentence in doc.text
    src = doc.source
    assert src.converter.startswith("pypdf ") and len(src.pages) == 3
    # page 2 has no text: nothing maps to it; a span's offset maps to the page it was printed on
    assert src.page_at(doc.text.index(P1)) == 1
    assert src.page_at(doc.text.index(P2)) == 3 and src.page_at(doc.text.index(P3)) == 3
    assert [(lvl, t) for _, lvl, t in src.headings] == [(1, "Part 1"), (1, "Part 3")]
    # a bookmark sits where its title is printed on its page
    assert [doc.text[o:o + 6] for o, _, _ in src.headings] == ["Part 1", "Part 3"]
    assert src.file_sha256 == hashlib.sha256((tmp_path / "notes.pdf").read_bytes()).hexdigest()


def test_docx_keeps_headings_tables_and_unescaped_identifiers(tmp_path):
    (tmp_path / "mem.docx").write_bytes(make_docx())
    doc = _docs(tmp_path)["mem.docx"]
    assert doc.title == "Memory settings" and doc.source.converter.startswith("mammoth ")
    assert doc.text.startswith("# Memory settings\n\n" + P1 + "\n")
    assert P2 in doc.text and "work\\_mem" not in doc.text  # a quote of work_mem still matches
    assert "| work_mem | 4MB |" in doc.text and "- first point" in doc.text
    heads = [(lvl, t) for _, lvl, t in doc.source.headings]
    assert heads[0] == (1, "Memory settings") and (2, "Vacuum") in heads
    assert all(doc.text[o:].startswith("#") for o, _, _ in doc.source.headings)


def test_pptx_slides_are_pages(tmp_path):
    (tmp_path / "deck.pptx").write_bytes(make_pptx())
    doc = _docs(tmp_path)["deck.pptx"]
    text, src = doc.text, doc.source
    assert src.converter.startswith("python-pptx ") and doc.title == "Memory"
    assert text.startswith("# Memory\n\n" + P1 + "\n\nNotes: Say why 4MB is small.\n")
    assert "<!--" not in text  # slide numbers are metadata, not words in the text
    assert src.page_at(text.index(P1)) == 1 and src.page_at(text.index(P3)) == 2
    # top to bottom: the text box, the table, then the grouped text box at the slide's foot
    assert text.index(P3) < text.index("| brin | tiny |") < text.index("grouped caption")
    assert [t for _, _, t in src.headings] == ["Memory", "Indexes"]


def test_html_gives_the_import_html_text(tmp_path):
    (tmp_path / "vacuum.html").write_text(HTML, encoding="utf-8")
    (tmp_path / "old.htm").write_text(HTML.replace("Vacuum", "Old"), encoding="utf-8")
    docs = _docs(tmp_path)
    doc = docs["vacuum.html"]
    # loading a page directly and importing it first (rag-exp corpus import-html) give one text
    assert doc.text == html_to_markdown(HTML)[1]
    assert doc.title == "Vacuum" and "```\nVACUUM (VERBOSE) t;\n```" in doc.text
    assert docs["old.htm"].source.converter == doc.source.converter and doc.source.converter.startswith("html_import ")


def test_html_declared_charset_is_honoured(tmp_path):
    (tmp_path / "latin.html").write_bytes(b"<html><head><meta charset='iso-8859-1'></head><body><h1>Caf\xe9</h1>"
                                          b"<p>cr\xe8me br\xfbl\xe9e</p></body></html>")
    doc = _docs(tmp_path)["latin.html"]
    assert (doc.title, doc.text) == ("Caf\u00e9", "# Caf\u00e9\n\ncr\u00e8me br\u00fbl\u00e9e\n")


def test_plain_text_as_it_is(tmp_path):
    (tmp_path / "readme.txt").write_bytes(b"\xef\xbb\xbfLine one\r\nLine two\r\n")
    doc = _docs(tmp_path)["readme.txt"]
    assert (doc.text, doc.title, doc.source) == ("Line one\nLine two\n", "readme", None)


# ---- the markdown corpus and the manifest --------------------------------------------------------


def test_demo_corpus_is_unchanged_by_the_new_formats():
    docs = load_corpus("demo")
    manifest = corpus_manifest(docs)
    # the digest formula of before this change, by hand: ids and text hashes only
    by_hand = hashlib.sha256("\n".join(f"{d.doc_id}\t{hashlib.sha256(d.text.encode()).hexdigest()}"
                                       for d in sorted(docs, key=lambda d: d.doc_id)).encode()).hexdigest()
    assert manifest["digest"] == by_hand and "converters" not in manifest
    assert all(d.source is None for d in docs) and len(docs) == 186  # NOTICE is not a document


def test_manifest_records_the_converter_and_text_hash(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\nMarkdown.\n", encoding="utf-8")
    (tmp_path / "notes.pdf").write_bytes(make_pdf([P1]))
    (tmp_path / "deck.pptx").write_bytes(make_pptx())
    docs = read_corpus(tmp_path).docs
    m = corpus_manifest(docs)
    assert set(m["converters"]) == {"notes.pdf", "deck.pptx"}  # the Markdown file has no converter
    pdf = next(d for d in docs if d.doc_id == "notes.pdf")
    assert m["converters"]["notes.pdf"]["converter"] == pdf.source.converter
    assert m["converters"]["deck.pptx"]["pages"] == 2
    # the drift machinery sees converted text like any other: the hash is of the converted text
    assert m["documents"]["notes.pdf"] == hashlib.sha256(pdf.text.encode()).hexdigest()


def test_source_metadata_leaves_document_equality_alone():
    a = Document("d", "d", "t", "doc", "text\n", "c")
    b = Document("d", "d", "t", "doc", "text\n", "c", source=SourceFile("d.pdf", "0" * 64, "pypdf 0", (0,)))
    assert a == b and hash(a) == hash(b) and b.source.page_at(3) == 1 and a.content_hash == b.content_hash


# ---- the cache ----------------------------------------------------------------------------------


def test_second_load_converts_nothing_and_is_keyed_by_content(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.pdf").write_bytes(make_pdf([P1, P2]))
    (folder / "mem.docx").write_bytes(make_docx())
    (folder / "bad.pdf").write_bytes(make_pdf([P1])[:300])
    first = read_corpus(folder)
    assert first.report.converted == 3 and not any(r.cached for r in first.report.files)
    second = read_corpus(folder)
    assert second.report.converted == 0 and all(r.cached for r in second.report.files)
    assert [d.text for d in second.docs] == [d.text for d in first.docs]
    assert [r.failure for r in second.report.failures] == [r.failure for r in first.report.failures]
    # a renamed copy is the same content: served from the cache under its new name
    (folder / "notes.pdf").rename(folder / "renamed.pdf")
    third = read_corpus(folder)
    assert third.report.converted == 0 and "renamed.pdf" in {d.doc_id for d in third.docs}
    # an edited file is new content: converted again (and only it)
    (folder / "renamed.pdf").write_bytes(make_pdf([P3]))
    fourth = read_corpus(folder)
    assert fourth.report.converted == 1 and P3 in {d.doc_id: d for d in fourth.docs}["renamed.pdf"].text


def test_the_cache_really_serves_the_text(tmp_path):
    """A cache entry edited by hand comes back as the document text: proof that the second load
    read the cache and ran no converter (a cache that re-converted would give the file's text)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.pdf").write_bytes(make_pdf([P1]))
    read_corpus(tmp_path / "docs")
    [entry] = (tmp_path / "convert-cache").rglob("*.json")
    body = json.loads(entry.read_text())
    body["converted"]["text"] = "served from the cache\n"
    entry.write_text(json.dumps(body))
    assert read_corpus(tmp_path / "docs").docs[0].text == "served from the cache\n"
    entry.write_text("{torn")  # an unreadable entry is a miss, not an error
    again = read_corpus(tmp_path / "docs")
    assert P1 in again.docs[0].text and again.report.converted == 1


def test_unwritable_cache_still_loads(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.pdf").write_bytes(make_pdf([P1]))
    with pytest.warns(UserWarning, match="cannot write the conversion cache"):
        loaded = read_corpus(tmp_path / "docs", cache=ConversionCache(blocker / "cache"))
    assert P1 in loaded.docs[0].text


# ---- failures -----------------------------------------------------------------------------------


def test_failures_are_named_skipped_and_counted(tmp_path):
    good = make_pdf([P1])
    files = {
        "good.pdf": good,
        "locked.pdf": make_pdf([P2], enc={"owner_password": "o", "user_password": "secret"}),
        "scan.pdf": make_pdf([None, None]),
        "truncated.pdf": good[: len(good) // 2],
        "zero.pdf": b"",
        "notapdf.pdf": b"hello, I am text",
        "broken.docx": make_docx()[:500],
        "fake.pptx": b"PK\x03\x04 not really a zip",
        "latin.txt": "caf\xe9".encode("latin-1"),
        "binary.txt": b"abc\x00def",
        "empty.txt": b"  \n",
        "old.doc": b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1 anything",
        "blank.html": b"<html><body><div class='navheader'>nav</div></body></html>",
        "latin.html": "<p>caf\xe9</p>".encode("latin-1"),  # no charset declared: read as UTF-8, fails
        "ok.md": b"# Fine\n\nMarkdown.\n",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    # not documents: ignored, not reported
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    (tmp_path / "~$good.docx").write_bytes(b"lock")
    (tmp_path / "NOTICE").write_text("x")
    with pytest.warns(UserWarning) as caught:
        docs = load_corpus(tmp_path)
    assert sorted(d.doc_id for d in docs) == ["good.pdf", "ok.md"]
    [w] = [w for w in caught if "could not be loaded" in str(w.message)]
    summary = str(w.message)
    assert summary.startswith("13 of 15 files in ")
    reasons = {r.path: r.failure for r in read_corpus(tmp_path).report.failures}
    assert set(reasons) == set(files) - {"good.pdf", "ok.md"}
    for name in reasons:
        assert name in summary
    assert reasons["locked.pdf"].startswith("encrypted")
    assert reasons["scan.pdf"].startswith("no text layer in 2 page(s)")
    assert reasons["truncated.pdf"].startswith("corrupt PDF")
    assert reasons["zero.pdf"] == "empty file (0 bytes)"
    assert reasons["notapdf.pdf"].startswith("not a PDF")
    assert reasons["broken.docx"].startswith("corrupt DOCX") and reasons["fake.pptx"].startswith("corrupt PPTX")
    assert reasons["latin.txt"].startswith("not valid UTF-8 (byte 3)")
    assert "NUL" in reasons["binary.txt"] and reasons["empty.txt"] == "empty file"
    assert reasons["old.doc"] == "unsupported format .doc: save it as .docx"
    assert reasons["blank.html"] == "no text"
    assert reasons["latin.html"] == "cannot be decoded as utf-8 (byte 6)"


def test_owner_password_only_pdf_opens(tmp_path):
    """Locked against printing or copying, not against opening: readable, not a failure."""
    (tmp_path / "policy.pdf").write_bytes(make_pdf([P1], enc={"owner_password": "owner"}))
    assert P1 in _docs(tmp_path)["policy.pdf"].text


def test_nothing_loadable_is_one_clear_error(tmp_path):
    (tmp_path / "locked.pdf").write_bytes(make_pdf([P1], enc={"owner_password": "o", "user_password": "u"}))
    (tmp_path / "old.ppt").write_bytes(b"x")
    with pytest.raises(CorpusError, match=r"no document in .* could be loaded: 2 of 2 files .*locked.pdf "
                                          r"\(encrypted.*old.ppt \(unsupported format .ppt: save it as .pptx\)"):
        load_corpus(tmp_path)
    (tmp_path / "locked.pdf").unlink()
    (tmp_path / "old.ppt").unlink()
    with pytest.raises(CorpusError, match="holds no .md files"):
        load_corpus(tmp_path)


def test_markdown_errors_still_stop_the_load(tmp_path):
    """Markdown keeps its old contract (a bad .md names the file and stops), even beside PDFs."""
    (tmp_path / "notes.pdf").write_bytes(make_pdf([P1]))
    (tmp_path / "latin.md").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(CorpusError, match="latin.md: not valid UTF-8"):
        load_corpus(tmp_path)


def test_duplicate_id_between_markdown_and_pdf(tmp_path):
    (tmp_path / "a.md").write_text("---\nsource_uri: a.pdf\n---\nA\n", encoding="utf-8")
    (tmp_path / "a.pdf").write_bytes(make_pdf([P1]))
    with pytest.raises(CorpusError, match="duplicate document id 'a.pdf'"):
        load_corpus(tmp_path)


def test_same_stem_in_two_formats_gives_two_documents(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\nMarkdown.\n", encoding="utf-8")
    (tmp_path / "a.pdf").write_bytes(make_pdf([P1]))
    assert sorted(_docs(tmp_path)) == ["a.md", "a.pdf"]


def test_convert_bytes_never_raises_other_errors():
    for data, suffix in [(b"%PDF-1.7\n" + b"\xff" * 5000, ".pdf"), (b"PK\x05\x06" + b"\x00" * 18, ".docx"),
                         (b"<p>" * 20000, ".html"), (b"x", ".odt")]:
        try:
            convert_bytes(data, suffix)
        except ConversionError as exc:
            assert exc.reason and "\n" not in exc.reason


def test_tidy():
    assert tidy("a \r\nb\x00\x0c\n\n\n\nc\t \n") == "a\nb\n\nc\n"
    assert tidy(" \n\x07\n") == ""


def test_load_corpus_memo_does_not_repeat_the_warning(tmp_path):
    (tmp_path / "ok.md").write_text("# A\n\nx\n", encoding="utf-8")
    (tmp_path / "zero.pdf").write_bytes(b"")
    with pytest.warns(UserWarning, match="zero.pdf"):
        load_corpus(tmp_path, "memo-test")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [d.doc_id for d in load_corpus(tmp_path, "memo-test")] == ["ok.md"]


# ---- drift: converted text that changes is seen by the golden set's drift check ------------------


def test_changed_converted_text_is_drift_and_reanchors(tmp_path):
    """A span labelled on a PDF's text: when the text changes (here the file gains a page in front;
    a converter upgrade changes the text the same way, through a cache miss on the new converter
    id), the content hash changes, drift_status reports the span pending, and re-anchoring finds
    the quote at its new offsets. Evidence never moves silently."""
    from rag_experiments.corpus.convert_cache import entry_key
    from rag_experiments.golden.anchoring import drift_status, reanchor
    from rag_experiments.golden.build import case_record
    from rag_experiments.golden.golden_file import GoldenFile

    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "notes.pdf").write_bytes(make_pdf([P1, P2]))
    [doc] = read_corpus(corpus).docs
    golden = tmp_path / "golden.jsonl"
    GoldenFile(golden).append([case_record(doc, P2, "what reclaims dead tuples", "exact", {"method": "manual", "author": "test"})])
    assert drift_status(golden, [doc])["unchanged"] == 1
    (corpus / "notes.pdf").write_bytes(make_pdf([P3, P1, P2]))
    [new] = read_corpus(corpus).docs
    assert new.content_hash != doc.content_hash and new.text.index(P2) != doc.text.index(P2)
    assert drift_status(golden, [new])["pending"] == 1
    reanchor(golden, [new])
    after = drift_status(golden, [new])
    assert after["pending"] == 0 and after["anchored"] == 1
    # a converter upgrade is a new cache key: the file is converted again by the new version
    sha = new.source.file_sha256
    assert entry_key(sha, ".pdf", "pypdf 7.1.1") != entry_key(sha, ".pdf", "pypdf 7.2.0")


def test_corpus_convert_command_prints_the_formats_table(tmp_path, capsys):
    from rag_experiments import cli

    (tmp_path / "a.md").write_text("# A\n\nMarkdown.\n", encoding="utf-8")
    (tmp_path / "notes.pdf").write_bytes(make_pdf([P1]))
    (tmp_path / "deck.pptx").write_bytes(make_pptx())
    (tmp_path / "zero.docx").write_bytes(b"")
    assert cli.main(["corpus", "convert", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| format | files | documents | characters | seconds | from cache | failures | converter |" in out
    pdf_row = next(line for line in out.splitlines() if line.startswith("| pdf |"))
    assert pdf_row.split("|")[2:5] == [" 1 ", " 1 ", f" {len(make_pdf_text())} "] and "pypdf " in pdf_row
    assert "| docx | 1 | 0 | 0 |" in out and "skipped zero.docx: empty file (0 bytes)" in out
    assert "3 files run through a converter now, 0 answered" in out  # the empty file is tried (and its failure cached)
    assert cli.main(["corpus", "convert", str(tmp_path), "--strict"]) == 1
    assert "0 files run through a converter now, 3 answered from the conversion cache" in capsys.readouterr().out


def make_pdf_text() -> str:
    from rag_experiments.corpus.convert import convert_bytes as cb

    return cb(make_pdf([P1]), ".pdf").text


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path, monkeypatch):
    import rag_experiments.corpus.loader as loader

    monkeypatch.setattr(loader, "MAX_FILE_BYTES", 1000)  # the real limit is 200 MiB: too big to write here
    (tmp_path / "big.pdf").write_bytes(make_pdf([P1 * 40]))
    (tmp_path / "ok.md").write_text("# A\n\nx\n", encoding="utf-8")
    [bad] = read_corpus(tmp_path).report.failures
    assert bad.path == "big.pdf" and "over the 0 MiB limit" in bad.failure and bad.seconds == 0


def test_which_files_are_documents(tmp_path):
    """``.markdown`` is Markdown; suffixes of converted formats match in any case; hidden folders
    (an editor's or a tool's state) are not looked into for converted formats."""
    (tmp_path / "guide.markdown").write_text("# Guide\n\nText.\n", encoding="utf-8")
    (tmp_path / "SCAN.PDF").write_bytes(make_pdf([P1]))
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "copy.pdf").write_bytes(make_pdf([P2]))
    (tmp_path / "data.json").write_text("{}")
    docs = _docs(tmp_path)
    assert sorted(docs) == ["SCAN.PDF", "guide.markdown"] and docs["guide.markdown"].title == "Guide"
    assert P1 in docs["SCAN.PDF"].text
