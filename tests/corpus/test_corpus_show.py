"""`rag-exp corpus list` and `rag-exp corpus show` (issue 44, item 2): the text a golden quote
must match, as loaded (Markdown after its front matter, HTML as converted), with line numbers and
the char offsets spans use."""

from __future__ import annotations

import pytest

from rag_experiments import cli
from rag_experiments.corpus.loader import load_corpus
from rag_experiments.corpus.lookup import Lines

from ..conftest import FIXTURES
from ..golden.test_add import GIT_CONFIG, GIT_REBASE

MINI = FIXTURES / "mini_corpus"


@pytest.fixture
def mixed(tmp_path, monkeypatch):
    """Two HTML pages (converted on load) and a Markdown page with front matter."""
    monkeypatch.setenv("RAG_EXP_CONVERT_CACHE", str(tmp_path / "convert-cache"))
    folder = tmp_path / "docs"
    (folder / "man").mkdir(parents=True)
    (folder / "man" / "git-rebase.html").write_text(GIT_REBASE)
    (folder / "man" / "git-config.html").write_text(GIT_CONFIG)
    (folder / "howto.md").write_text("---\nsource_uri: howto/branches\ntitle: Branches\n---\n# Branches\n\nUse "
                                     "`git switch -c NAME` to make one.\n")
    (folder / "notes").mkdir()
    (folder / "notes" / "git-config.txt").write_text("Another git-config: a file stem two documents share.\n")
    return folder


def _run(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_list_shows_source_uri_title_chars_and_format(mixed, capsys):
    rc, out, _ = _run(capsys, "corpus", "list", "--corpus", str(mixed))
    lines = out.splitlines()
    assert rc == 0 and lines[0].split() == ["source_uri", "title", "chars", "format"]
    docs = {d.source_uri: d for d in load_corpus(mixed)}
    rows = {ln.split()[0]: ln for ln in lines[1:-1]}
    assert set(rows) == set(docs) == {"howto/branches", "man/git-config.html", "man/git-rebase.html",
                                      "notes/git-config.txt"}
    assert rows["man/git-rebase.html"].split()[1] == "git-rebase(1)"
    assert f"{len(docs['man/git-rebase.html'].text):,}" in rows["man/git-rebase.html"].split()
    assert rows["man/git-rebase.html"].split()[-2] == "html_import"  # the converter, with its version
    assert rows["howto/branches"].split()[-1] == "md" and rows["notes/git-config.txt"].split()[-1] == "txt"
    assert lines[-1].startswith("4 documents, ") and "rag-exp corpus show DOC" in lines[-1]
    rc, out, _ = _run(capsys, "corpus", "list", "--corpus", str(mixed), "--grep", "REBASE")
    assert rc == 0 and [ln.split()[0] for ln in out.splitlines()[1:-1]] == ["man/git-rebase.html"]


def test_show_prints_the_converted_text_with_line_numbers_and_offsets(mixed, capsys):
    doc = {d.doc_id: d for d in load_corpus(mixed)}["man/git-rebase.html"]
    lines = Lines(doc.text)
    for name in ("man/git-rebase.html", "git-rebase"):  # by source_uri, and by its unique file stem
        rc, out, _ = _run(capsys, "corpus", "show", name, "--corpus", str(mixed))
        assert rc == 0
        head, *body = out.splitlines()
        assert head.startswith(f"man/git-rebase.html: 'git-rebase(1)', {len(doc.text):,} chars, {len(lines)} lines")
        assert len(body) == len(lines)
        for n, row in enumerate(body, 1):
            number, offset, rest = row.split(maxsplit=2) if row.split(maxsplit=2)[2:] else (*row.split(), "|")
            start, end = lines.span(n)
            assert (int(number), int(offset)) == (n, start)
            assert rest.rstrip() == ("| " + doc.text[start:end]).rstrip()  # the converted text, markup and all
    assert "`git reset --hard ORIG_HEAD`" in out and "**--autosquash**" in out
    # a Markdown page: the text after its front matter, by the stem of its source_uri
    rc, out, _ = _run(capsys, "corpus", "show", "branches", "--corpus", str(mixed))
    assert rc == 0 and "title: Branches" not in out and out.splitlines()[1].split() == ["1", "0", "|", "#", "Branches"]


def test_show_grep_finds_as_golden_add_does_with_context_and_char_spans(mixed, capsys):
    doc = {d.doc_id: d for d in load_corpus(mixed)}["man/git-rebase.html"]
    rc, out, _ = _run(capsys, "corpus", "show", "git-rebase", "--corpus", str(mixed), "--grep", "reset --HARD orig_head",
                      "--context", "1")
    start = doc.text.index("`git reset")
    end = doc.text.index("ORIG_HEAD`") + len("ORIG_HEAD`")
    lines = Lines(doc.text)
    n = lines.line_of(start)
    rows = out.splitlines()
    assert rc == 0 and rows[1] == "'reset --HARD orig_head': 1 match(es), through whitespace, markup and case"
    assert rows[2] == f"match 1: chars {doc.text.index('reset')}..{end}, line {n}"
    shown = [int(r.split()[0]) for r in rows[3:]]
    assert shown == [n - 1, n, n + 1]  # --context 1
    assert [r for r in rows[3:] if ">|" in r] == [next(r for r in rows[3:] if r.split()[0] == str(n))]
    rc, out, _ = _run(capsys, "corpus", "show", "git-rebase", "--corpus", str(mixed), "--grep", "squash")
    assert rc == 0 and "'squash': 2 match(es), verbatim" in out  # --autosquash and "squash! ..."
    first = doc.text.index("squash")
    second = doc.text.index("squash", first + 1)
    assert [r.split(",")[0] for r in out.splitlines() if r.startswith("match ")] == [
        f"match 1: chars {first}..{first + 6}", f"match 2: chars {second}..{second + 6}"]
    numbers = [r.split()[0] for r in out.splitlines()[2:] if not r.startswith("match ")]
    assert len(numbers) == len(set(numbers))  # overlapping context (lines 5 and 7, -C 2) is shown once
    rc, out, _ = _run(capsys, "corpus", "show", "git-rebase", "--corpus", str(mixed), "--grep", "cherry-pick")
    assert rc == 1 and "no match" in out


def test_show_names_a_missing_or_ambiguous_document_in_one_line(mixed, capsys):
    rc, _, err = _run(capsys, "corpus", "show", "git-config", "--corpus", str(mixed))
    lines = err.splitlines()
    assert rc == 2 and lines[0].startswith("error: document 'git-config' is not in corpus")
    assert "file stem 'git-config' names 2 documents" in lines[0]
    assert "man/git-config.html" in lines[0] and "notes/git-config.txt" in lines[0]
    assert lines[1] == f"  hint: give its source_uri as `rag-exp corpus list --corpus {mixed}` shows it"
    rc, _, err = _run(capsys, "corpus", "show", "git-rebas", "--corpus", str(mixed))
    assert rc == 2 and "no such document; closest: man/git-rebase.html" in err
    rc, _, err = _run(capsys, "corpus", "show", "git-rebase", "--corpus", str(mixed), "--context", "-1")
    assert rc == 2 and "--context must be >= 0, got -1" in err


def test_list_and_show_default_to_the_configured_corpus(capsys):
    rc, out, _ = _run(capsys, "corpus", "list")
    assert rc == 0 and "postgresql-15/runtime-config-resource.html" in out and "(demo)" in out.splitlines()[-1]
    rc, out, _ = _run(capsys, "corpus", "show", "runtime-config-resource", "--grep", "WORK_MEM (integer)")
    assert rc == 0 and "**`work_mem` (`integer`)**" in out
