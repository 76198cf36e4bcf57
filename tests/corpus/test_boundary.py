"""The corpus boundary (issue 55, item 4 and probes 1, 3, 4): no file outside the corpus folder is
read, a file name that is not UTF-8 is one line, the size limit holds for Markdown too, and a UTF-8
byte order mark does not hide a file's front matter."""

from __future__ import annotations

import os

import pytest

from rag_experiments import cli
from rag_experiments.corpus import loader
from rag_experiments.corpus.loader import corpus_manifest, load_corpus, read_corpus
from rag_experiments.errors import CorpusError


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_EXP_CONVERT_CACHE", str(tmp_path / "convert-cache"))
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "guide.md").write_text("# Guide\n\nHow to tune the planner.\n", encoding="utf-8")
    return folder


def _run(capsys, *argv) -> tuple[int, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out + err


def test_a_link_to_a_file_outside_is_not_read(corpus, capsys):
    os.symlink("/etc/passwd", corpus / "passwd.md")
    os.symlink("/etc/hostname", corpus / "host.txt")
    with pytest.warns(UserWarning) as warned:
        docs = load_corpus(corpus)
    assert [d.doc_id for d in docs] == ["guide.md"]
    assert not any("root:x:0:0" in d.text for d in docs)
    [line] = [str(w.message) for w in warned]
    assert "passwd.md (a symbolic link to /etc/passwd, outside the corpus folder: not read" in line
    assert "host.txt (a symbolic link to /etc/hostname" in line

    rc, out = _run(capsys, "corpus", "convert", str(corpus))
    assert rc == 0 and "skipped passwd.md: a symbolic link to /etc/passwd, outside the corpus folder" in out
    assert "root:x" not in out
    rc, out = _run(capsys, "corpus", "show", "passwd.md", "--corpus", str(corpus))
    assert rc != 0 and "root:x" not in out and "not in corpus" in out and "Traceback" not in out


def test_a_link_to_a_folder_is_never_followed(corpus, tmp_path):
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nThe launch code is 0000.\n", encoding="utf-8")
    os.symlink(outside, corpus / "shared")
    os.symlink(corpus / "sub", corpus / "loop")  # a link inside: not followed either (documented)
    (corpus / "sub").mkdir()
    (corpus / "sub" / "inner.md").write_text("# Inner\n\nText.\n", encoding="utf-8")
    load = read_corpus(corpus)
    assert sorted(d.doc_id for d in load.docs) == ["guide.md", "sub/inner.md"]
    reasons = {r.path: r.failure for r in load.report.failures}
    assert reasons["shared"].startswith(f"a symbolic link to the folder {outside} (outside the corpus folder): not "
                                        "followed")
    assert "(inside the corpus folder): not followed" in reasons["loop"]
    assert "| link | 2 | 0 |" in load.report.formats_table()


def test_a_link_inside_the_corpus_is_read(corpus):
    os.symlink("guide.md", corpus / "alias.md")  # inside: allowed (documented); the same text twice
    # a link whose target leaves the folder through a relative path is outside
    os.symlink("../../../../../../../../etc/passwd", corpus / "dots.md")
    load = read_corpus(corpus)
    assert {d.doc_id: d.text for d in load.docs}["alias.md"] == "# Guide\n\nHow to tune the planner.\n"
    [bad] = load.report.failures
    assert bad.path == "dots.md" and "outside the corpus folder: not read" in bad.failure


def test_load_document_refuses_a_link_out(corpus):
    os.symlink("/etc/passwd", corpus / "passwd.md")
    with pytest.raises(CorpusError, match=r"passwd.md: a symbolic link to /etc/passwd, outside the corpus folder"):
        loader.load_document(corpus / "passwd.md", corpus, "c")


def test_a_file_name_that_is_not_utf8_is_one_line(corpus, capsys):
    name = os.fsdecode(b"caf\xe9.txt")
    (corpus / name).write_text("Coffee.\n", encoding="utf-8")
    (corpus / os.fsdecode(b"men\xfc.md")).write_text("# Menu\n\nSoup.\n", encoding="utf-8")
    load = read_corpus(corpus)
    corpus_manifest(load.docs)  # raised UnicodeEncodeError on the name before
    reasons = {r.path: r.failure for r in load.report.failures}
    assert reasons.keys() == {"caf\\xe9.txt", "men\\xfc.md"}
    assert "the file name is not valid UTF-8 (caf\\xe9.txt); rename it" in reasons["caf\\xe9.txt"]
    rc, out = _run(capsys, "corpus", "convert", str(corpus))
    assert rc == 0 and "skipped caf\\xe9.txt: the file name is not valid UTF-8" in out and "Traceback" not in out


def test_the_size_limit_holds_for_markdown_before_reading(corpus, monkeypatch):
    monkeypatch.setattr(loader, "MAX_FILE_BYTES", 1000)  # the real limit is 200 MiB: too big to write here
    (corpus / "huge.md").write_text("# Huge\n\n" + "word " * 400, encoding="utf-8")
    (corpus / "huge.txt").write_text("word " * 400, encoding="utf-8")
    load = read_corpus(corpus)
    reasons = {r.path: r.failure for r in load.report.failures}
    assert reasons.keys() == {"huge.md", "huge.txt"}
    assert all("over the 0 MiB limit for one document: not read" in r for r in reasons.values())
    assert [d.doc_id for d in load.docs] == ["guide.md"]


def test_a_fifo_named_like_a_document_does_not_block(corpus):
    os.mkfifo(corpus / "pipe.md")
    [bad] = read_corpus(corpus).report.failures
    assert bad.path == "pipe.md" and "not a regular file" in bad.failure


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_byte_order_mark_keeps_the_front_matter(corpus, newline):
    body = newline.join(["---", "source_uri: pg/bom.html", "title: With BOM", "doc_type: reference", "---",
                         "# Heading", "", "Body text.", ""])
    (corpus / "bom.md").write_bytes(b"\xef\xbb\xbf" + body.encode("utf-8"))
    doc = {d.doc_id: d for d in load_corpus(corpus)}["pg/bom.html"]
    assert (doc.title, doc.doc_type, doc.text) == ("With BOM", "reference", "# Heading\n\nBody text.\n")
    # the raw frame (a library's loader reads the file in text mode: U+FEFF, then LF line ends)
    raw = (corpus / "bom.md").read_text(encoding="utf-8")
    assert raw[doc.text_offset:] == doc.text
