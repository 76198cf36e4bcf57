"""Converters in a child process with a time and a memory limit (issue 55, probes 3 and 4): a DOCX
whose varied XML passes the archive checks but converts for minutes ends at the time limit in one
line, is not converted again on the next load unless the file changes or the limit is raised; a
page nested thousands of elements deep is converted, not skipped with RecursionError."""

from __future__ import annotations

import io
import random
import zipfile
from pathlib import Path

import pytest

from rag_experiments.corpus.convert_worker import MEMORY_ENV, SECONDS_ENV, ConversionWorker, Limits
from rag_experiments.corpus.loader import read_corpus
from rag_experiments.errors import UserError

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def slow_docx(paragraphs: int) -> bytes:
    """A small zip (about a third of its XML) whose document.xml is varied text: it passes every
    archive check (no member expands 100x) and mammoth takes seconds per MB of it."""
    rnd = random.Random(55)
    words = ["planner", "vacuum", "index", "tuple", "buffer", "query", "page", "lock", "heap", "scan"]
    body = "".join(f'<w:p><w:r><w:t>{" ".join(rnd.choice(words) + str(rnd.randrange(10**6)) for _ in range(12))}'
                   "</w:t></w:r></w:p>" for _ in range(paragraphs))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml",
                   '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/'
                   '2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-'
                   'package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override '
                   'PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.'
                   'wordprocessingml.document.main+xml"/></Types>')
        z.writestr("_rels/.rels",
                   '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/'
                   'package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/'
                   'officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>')
        z.writestr("word/document.xml", f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{_W}">'
                   f"<w:body>{body}</w:body></w:document>")
    return buf.getvalue()


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("RAG_EXP_CONVERT_CACHE", str(tmp_path / "convert-cache"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ok.md").write_text("# OK\n\nA page.\n", encoding="utf-8")
    return docs


def test_a_docx_that_converts_for_too_long_ends_at_the_limit_and_is_remembered(folder, monkeypatch):
    (folder / "slow.docx").write_bytes(slow_docx(12_000))  # ~2 MB of XML in a ~0.7 MB zip: 10+ s of mammoth
    monkeypatch.setenv(SECONDS_ENV, "1")
    [bad] = read_corpus(folder).report.failures  # before: converted for as long as it took, unbounded
    assert bad.path == "slow.docx" and bad.failure.startswith("conversion took more than 1 s, the limit "
                                                              "(RAG_EXP_CONVERT_TIMEOUT)")
    assert bad.seconds < 8 and not bad.cached
    [again] = read_corpus(folder).report.failures  # the next load does not convert it again
    assert (again.failure, again.cached, again.seconds) == (bad.failure, True, 0.0)
    monkeypatch.setenv(SECONDS_ENV, "1.5")  # a raised limit tries it again
    [retried] = read_corpus(folder).report.failures
    assert not retried.cached and "more than 1.5 s" in retried.failure


def test_the_worker_runs_under_the_memory_limit():
    with ConversionWorker(Limits(seconds=60, memory_mb=700)) as worker:
        converted, at_limit = worker.convert(b"<html><body><h1>T</h1><p>Words here.</p></body></html>", ".html")
        assert not at_limit and "Words here." in converted.text
        limits = Path(f"/proc/{worker._proc.pid}/limits").read_text()
    [line] = [ln for ln in limits.splitlines() if ln.startswith("Max address space")]
    assert line.split()[3:5] == [str(700 * 2**20)] * 2


def test_bad_limits_are_one_line(monkeypatch):
    monkeypatch.setenv(MEMORY_ENV, "lots")
    with pytest.raises(UserError, match="RAG_EXP_CONVERT_MEMORY_MB='lots': must be a positive number"):
        Limits.from_env()


def test_a_deeply_nested_page_is_converted(folder):
    depth = 2_000  # in-process: RecursionError past ~300 levels (sqlite3-doc's doc_backlink_crossref.html)
    html = ("<html><body><h1>Deep page</h1>" + "<div><span>level</span>" * depth + "<p>The bottom words.</p>"
            + "</div>" * depth + "</body></html>")
    (folder / "deep.html").write_text(html, encoding="utf-8")
    load = read_corpus(folder)
    assert not load.report.failures  # before: skipped, 'HTML conversion failed (RecursionError: ...)'
    deep = {d.doc_id: d for d in load.docs}["deep.html"]
    assert "The bottom words." in deep.text and deep.text.count("level") == depth
