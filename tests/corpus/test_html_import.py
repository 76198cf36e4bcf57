"""HTML -> Markdown conversion of DocBook pages, document typing, and directory import."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_experiments.corpus.html_import import (
    DOC_TYPES,
    ImportReport,
    classify_doc_type,
    html_to_markdown,
    import_html_dir,
)
from rag_experiments.errors import CorpusError

NAV = """<div class="navheader"><table width="100%" summary="Navigation header"><tr>
<th colspan="5" align="center">{title}</th></tr><tr><td><a accesskey="p" href="a.html">Prev</a>&nbsp;</td>
<td><a accesskey="u" href="b.html">Up</a></td><th>Chapter 20. Server Configuration</th>
<td><a accesskey="h" href="index.html">Home</a></td><td>&nbsp;<a accesskey="n" href="c.html">Next</a></td>
</tr></table><hr /></div>"""

FOOTER = """<div class="navfooter"><hr /><table width="100%" summary="Navigation footer"><tr>
<td><a accesskey="p" href="a.html">Prev</a>&nbsp;</td><td><a accesskey="u" href="b.html">Up</a></td>
<td>&nbsp;<a accesskey="n" href="c.html">Next</a></td></tr><tr><td>Previous Page&nbsp;</td>
<td><a accesskey="h" href="index.html">Home</a></td><td>&nbsp;Next Page</td></tr></table></div>"""


def page(body: str, title: str = "20.4. Resource Consumption") -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
        '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" '
        '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">'
        '<html xmlns="http://www.w3.org/1999/xhtml"><head>'
        '<meta http-equiv="Content-Type" content="text/html; charset=UTF-8" />'
        f"<title>{title}</title></head><body>" + NAV.format(title=title) + body + FOOTER
        + "</body></html>"
    )


SECT_PAGE = page(
    """<div class="sect1" id="RUNTIME-CONFIG-RESOURCE"><div class="titlepage"><div><div>
<h2 class="title" style="clear: both">20.4.&nbsp;Resource Consumption</h2></div></div></div>
<div class="toc"><dl class="toc"><dt><span class="sect2"><a href="#M">20.4.1. Memory</a></span></dt></dl></div>
<div class="sect2" id="M"><div class="titlepage"><div><div><h3 class="title">20.4.1.&nbsp;Memory</h3>
</div></div></div><div class="variablelist"><dl class="variablelist">
<dt id="GUC-WORK-MEM"><span class="term"><code class="varname">work_mem</code> (<code class="type">integer</code>)
      <a id="id-1.6.7.7.2.2.6.1.3" class="indexterm"></a>
      </span></dt><dd><p>
        Sets the base maximum amount of memory.
        The default value is four megabytes (<code class="literal">4MB</code>).
       </p><p>
        Hash-based operations are more   sensitive.
       </p></dd></dl></div>
<div class="sect3" id="X"><div class="titlepage"><div><div><h4 class="title">20.4.1.1.&nbsp;Deeper</h4>
</div></div></div><p>Deep text.</p></div></div>
<div class="sect2" id="D"><div class="titlepage"><div><div><h3 class="title">20.4.2.&nbsp;Disk</h3>
</div></div></div><div class="note"><h3 class="title">Note</h3><p>Be careful.</p></div>
<pre class="programlisting">
SELECT *
  FROM   t   -- keep   spacing
 WHERE a | b;
</pre>
<div class="itemizedlist"><ul class="itemizedlist"><li class="listitem"><p>first
 item</p></li><li class="listitem"><p>second</p></li></ul></div>
<div class="orderedlist"><ol class="orderedlist"><li class="listitem"><p>one</p></li>
<li class="listitem"><p>two</p></li></ol></div>
</div></div>"""
)

EXPECTED_SECT = """# 20.4. Resource Consumption

## 20.4.1. Memory

**`work_mem` (`integer`)**

Sets the base maximum amount of memory. The default value is four megabytes (`4MB`).

Hash-based operations are more sensitive.

### 20.4.1.1. Deeper

Deep text.

## 20.4.2. Disk

> **Note**
>
> Be careful.

```
SELECT *
  FROM   t   -- keep   spacing
 WHERE a | b;
```

- first item
- second

1. one
2. two
"""


def test_sect1_page_converts_exactly() -> None:
    title, text = html_to_markdown(SECT_PAGE)
    assert title == "20.4. Resource Consumption"
    assert text == EXPECTED_SECT


def test_navigation_and_toc_are_dropped() -> None:
    _, text = html_to_markdown(SECT_PAGE)
    for nav in ("Prev", "Next", "Home", "Up", "Chapter 20", "Previous Page"):
        assert nav not in text


ERRCODES_PAGE = page(
    """<div class="appendix" id="ERRCODES-APPENDIX"><div class="titlepage"><div><div>
<h2 class="title">Appendix&nbsp;A.&nbsp;<span class="productname">PostgreSQL</span> Error Codes</h2>
</div></div></div><a id="id-1.11.2.2" class="indexterm"></a>
<p>All messages are assigned codes.</p>
<div class="table" id="ERRCODES-TABLE"><p class="title"><strong>Table A.1. Error Codes</strong></p>
<div class="table-contents"><table class="table" summary="PostgreSQL Error Codes" border="1">
<colgroup><col class="errorcode" /><col class="condname" /></colgroup>
<thead><tr><th>Error Code</th><th>Condition Name</th></tr></thead><tbody>
<tr><td colspan="2"><span class="bold"><strong>Class 23 — Integrity Constraint Violation</strong></span></td></tr>
<tr><td><code class="literal">23505</code></td><td><code class="symbol">unique_violation</code></td></tr>
<tr><td>a | b</td><td><p>multi
  line</p><p>second   para</p></td></tr>
</tbody></table></div></div><br class="table-break" /></div>""",
    title="Appendix A. PostgreSQL Error Codes",
)


def test_table_with_spanning_row() -> None:
    title, text = html_to_markdown(ERRCODES_PAGE)
    assert title == "Appendix A. PostgreSQL Error Codes"
    assert text == (
        "# Appendix A. PostgreSQL Error Codes\n\n"
        "All messages are assigned codes.\n\n"
        "**Table A.1. Error Codes**\n\n"
        "| Error Code | Condition Name |\n"
        "| --- | --- |\n"
        "| Class 23 — Integrity Constraint Violation | |\n"
        "| `23505` | `unique_violation` |\n"
        "| a \\| b | multi line <br> second para |\n"
    )


def test_rowspan_and_partial_colspan_keep_columns_aligned() -> None:
    html = page(
        """<div class="sect1"><div class="titlepage"><h2 class="title">T</h2></div>
<table><thead><tr><th>When</th><th>Event</th><th>Row</th></tr></thead><tbody>
<tr><td rowspan="2">BEFORE</td><td>INSERT</td><td>Tables</td></tr>
<tr><td>TRUNCATE</td><td>—</td></tr>
<tr><td colspan="2">both</td><td>x</td></tr></tbody></table></div>""",
        title="T",
    )
    _, text = html_to_markdown(html)
    assert text.endswith(
        "| When | Event | Row |\n| --- | --- | --- |\n| BEFORE | INSERT | Tables |\n"
        "| BEFORE | TRUNCATE | — |\n| both | | x |\n"
    )


REFENTRY_PAGE = page(
    """<div class="refentry" id="SQL-CREATEINDEX"><div class="titlepage"></div>
<a id="id-1.9.3.69.1" class="indexterm"></a><div class="refnamediv">
<h2><span class="refentrytitle">CREATE INDEX</span></h2><p>CREATE INDEX — define a new index</p></div>
<div class="refsynopsisdiv"><h2>Synopsis</h2><pre class="synopsis">
CREATE [ UNIQUE ] INDEX <em class="replaceable"><code>name</code></em> ON <em class="replaceable"><code>table_name</code></em>
    ( <em class="replaceable"><code>column_name</code></em> [, ...] )
</pre></div>
<div class="refsect1" id="P"><h2>Parameters</h2><div class="variablelist"><dl class="variablelist">
<dt><span class="term"><code class="literal">UNIQUE</code></span></dt><dd><p>Causes the system to check.</p></dd>
</dl></div><div class="refsect2" id="S"><h3>Index Storage Parameters</h3>
<p>Use <code class="literal">\\</code><em class="replaceable"><code>digits</code></em> here.</p></div></div></div>""",
    title="CREATE INDEX",
)


def test_refentry_headings_and_synopsis() -> None:
    title, text = html_to_markdown(REFENTRY_PAGE)
    assert title == "CREATE INDEX"
    assert text == (
        "# CREATE INDEX\n\n"
        "CREATE INDEX — define a new index\n\n"
        "## Synopsis\n\n"
        "```\n"
        "CREATE [ UNIQUE ] INDEX name ON table_name\n"
        "    ( column_name [, ...] )\n"
        "```\n\n"
        "## Parameters\n\n"
        "**`UNIQUE`**\n\n"
        "Causes the system to check.\n\n"
        "### Index Storage Parameters\n\n"
        "Use `\\digits` here.\n"
    )


def test_output_properties() -> None:
    for html in (SECT_PAGE, ERRCODES_PAGE, REFENTRY_PAGE):
        _, text = html_to_markdown(html)
        assert text.endswith("\n") and not text.endswith("\n\n")
        assert "\u00a0" not in text
        assert all(line == line.rstrip() for line in text.split("\n"))
        assert "\n\n\n" not in text
        assert [ln for ln in text.split("\n") if ln.startswith("# ")] == [text.split("\n")[0]]
        assert html_to_markdown(html) == (html_to_markdown(html)[0], text)  # deterministic
        text.encode("utf-8")


def test_code_fence_longer_than_backticks_in_code() -> None:
    html = page('<div class="sect1"><h2>T</h2><pre class="screen">a\n```\nb</pre></div>', "T")
    _, text = html_to_markdown(html)
    assert "````\na\n```\nb\n````" in text


def test_page_with_only_a_title_is_empty() -> None:
    html = page(
        '<div class="chapter"><div class="titlepage"><h2 class="title">Chapter 12. Full Text Search'
        '</h2></div><div class="toc"><dl class="toc"><dt>12.1. Introduction</dt></dl></div></div>',
        "Chapter 12. Full Text Search",
    )
    assert html_to_markdown(html) == ("Chapter 12. Full Text Search", "")


@pytest.mark.parametrize(
    ("filename", "title", "doc_type"),
    [
        ("sql-createindex.html", "CREATE INDEX", "reference"),
        ("app-psql.html", "psql", "reference"),
        ("sql-syntax-lexical.html", "4.1. Lexical Structure", "tutorial"),
        ("runtime-config-resource.html", "20.4. Resource Consumption", "config"),
        ("config-setting.html", "20.1. Setting Parameters", "config"),
        ("errcodes-appendix.html", "Appendix A. PostgreSQL Error Codes", "errcodes"),
        ("functions-string.html", "9.4. String Functions and Operators", "functions"),
        ("textsearch-controls.html", "12.3. Controlling Text Search", "fulltext"),
        ("indexes-partial.html", "11.8. Partial Indexes", "indexes"),
        ("gin-intro.html", "70.1. Introduction", "indexes"),
        ("tutorial-agg.html", "2.7. Aggregate Functions", "tutorial"),
        ("tutorial-arch.html", "1.2. Architectural Fundamentals", "tutorial"),
        ("intro-whatis.html", "1. What Is PostgreSQL?", "tutorial"),
        ("/some/dir/sql-select.html", "SELECT", "reference"),
    ],
)
def test_classify_doc_type(filename: str, title: str, doc_type: str) -> None:
    assert classify_doc_type(filename, title) == doc_type
    assert doc_type in DOC_TYPES


def test_import_html_dir_writes_front_matter_and_reports(tmp_path: Path) -> None:
    src = tmp_path / "postgresql-15"
    src.mkdir()
    (src / "sql-createindex.html").write_text(REFENTRY_PAGE, encoding="utf-8")
    (src / "errcodes-appendix.html").write_text(ERRCODES_PAGE, encoding="utf-8")
    (src / "broken.html").write_bytes(b"<html><body><p>caf\xe9 \xff\xfe</p></body></html>")
    (src / "textsearch.html").write_text(
        page('<div class="chapter"><h2 class="title">Chapter 12</h2></div>', "Chapter 12"),
        encoding="utf-8",
    )
    (src / "notes.txt").write_text("not html", encoding="utf-8")
    dest = tmp_path / "out"

    report = import_html_dir(src, dest, progress=False)

    assert isinstance(report, ImportReport)
    assert report.doc_type_counts == {"errcodes": 1, "reference": 1}
    assert report.documents == 2
    assert sorted(p.name for p in dest.iterdir()) == ["errcodes-appendix.md", "sql-createindex.md"]
    assert report.total_bytes == sum(p.stat().st_size for p in dest.iterdir())
    skipped = {s.filename: s.reason for s in report.skipped}
    assert set(skipped) == {"broken.html", "textsearch.html"}
    assert "decode" in skipped["broken.html"]
    assert "no text" in skipped["textsearch.html"]

    raw = (dest / "sql-createindex.md").read_bytes().decode("utf-8")
    assert raw.startswith(
        "---\n"
        "source_uri: postgresql-15/sql-createindex.html\n"
        "title: CREATE INDEX\n"
        "doc_type: reference\n"
        "---\n"
        "# CREATE INDEX\n"
    )
    assert raw.split("\n---\n", 1)[1] == html_to_markdown(REFENTRY_PAGE)[1]
    with pytest.raises(AttributeError):
        report.total_bytes = 0  # type: ignore[misc]  # frozen


def test_import_html_dir_select_and_prefix(tmp_path: Path) -> None:
    src = tmp_path / "html"
    src.mkdir()
    (src / "sql-createindex.html").write_text(REFENTRY_PAGE, encoding="utf-8")
    (src / "errcodes-appendix.html").write_text(ERRCODES_PAGE, encoding="utf-8")
    report = import_html_dir(
        src, tmp_path / "out", select=lambda n: n.startswith("sql-"), progress=False,
        prefix="postgresql-15",
    )
    assert report.doc_type_counts == {"reference": 1}
    text = (tmp_path / "out" / "sql-createindex.md").read_text(encoding="utf-8")
    assert "source_uri: postgresql-15/sql-createindex.html\n" in text


def test_missing_folder_raises_corpus_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    with pytest.raises(CorpusError) as info:
        import_html_dir(missing, tmp_path / "out", progress=False)
    assert str(missing) in str(info.value)
    assert "postgresql-doc-15" in str(info.value)  # says what to pass instead
    assert not (tmp_path / "out").exists()


def test_folder_without_html_raises_corpus_error(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    with pytest.raises(CorpusError, match="no \\*.html"):
        import_html_dir(tmp_path, tmp_path / "out", progress=False)


def test_demo_selection_rule() -> None:
    from devtools.demo_selection import is_demo_page

    for name in (
        "sql-select.html", "sql-createindex.html", "runtime-config-resource.html",
        "errcodes-appendix.html", "functions-json.html", "textsearch-intro.html",
        "indexes-partial.html", "tutorial-join.html", "gin-intro.html",
    ):
        assert is_demo_page(name), name
    for name in ("sql-createcast.html", "textsearch.html", "plpgsql.html", "index.html", "x.md"):
        assert not is_demo_page(name), name


def test_shipped_demo_corpus_is_well_formed() -> None:
    from rag_experiments.corpus import html_import

    root = Path(html_import.__file__).resolve().parent.parent / "data" / "demo_corpus"
    files = sorted(root.glob("*.md"))
    assert 180 <= len(files) <= 230
    assert sum(f.stat().st_size for f in files) < 8_000_000
    assert "PostgreSQL" in (root / "NOTICE").read_text(encoding="utf-8")
    types = set()
    for f in files:
        raw = f.read_bytes().decode("utf-8")
        head, text = raw[4:].split("\n---\n", 1)
        meta = dict(line.split(": ", 1) for line in head.split("\n"))
        assert raw.startswith("---\n") and list(meta) == ["source_uri", "title", "doc_type"]
        assert meta["source_uri"] == f"postgresql-15/{f.stem}.html"
        assert meta["doc_type"] == classify_doc_type(f.stem + ".html", meta["title"])
        assert text.startswith("# ") and text.endswith("\n") and not text.endswith("\n\n")
        types.add(meta["doc_type"])
    assert types == set(DOC_TYPES)
