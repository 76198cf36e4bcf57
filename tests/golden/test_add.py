"""Adding production failures as cases: by chunk id, by quote, and the errors."""

from __future__ import annotations

import sys
import types

import psycopg
import pytest

from rag_experiments import cli
from rag_experiments.errors import GoldenSetError, UserError
from rag_experiments.golden import GoldenFile
from rag_experiments.golden import add
from rag_experiments.golden.records import new_id

DOC_TEXT = ("# Lock Management\n\n"
            "deadlock_timeout (integer)\n\n"
            "This is the amount of time to wait on a lock before checking to see if there is a deadlock\n"
            "condition. The default is one second (1s).\n\n"
            "See also: the default is one second for most installations.\n")
DOC = {"doc_id": "mini/locks.html", "source_uri": "mini/locks.html", "title": "Locks", "doc_type": "config",
       "text": DOC_TEXT, "content_hash": "hash-locks"}
CHUNK_START = DOC_TEXT.index("This is")
CHUNK_END = DOC_TEXT.index("See also")
CHUNK = {"chunk_id": "abc123", "doc_id": DOC["doc_id"], "source_uri": DOC["source_uri"], "start": CHUNK_START,
         "end": CHUNK_END, "text": DOC_TEXT[CHUNK_START:CHUNK_END], "doc_hash": "hash-locks", "doc_type": "config"}


def chunk_lookup(cid):
    return CHUNK if cid == CHUNK["chunk_id"] else None


def doc_lookup(uri):
    return DOC if uri in (DOC["source_uri"], DOC["doc_id"]) else None


@pytest.fixture
def golden(tmp_path):
    return tmp_path / "experiments" / "golden" / "g.jsonl"


def test_add_by_chunk_id(golden, monkeypatch):
    monkeypatch.setenv("USER", "oncall")
    res = add.add_production_case(golden, "  how long before deadlock   detection? ", chunk_id="abc123",
                                  chunk_lookup=chunk_lookup, note="INC-42")
    rec = res.record
    assert res.located == "chunk"
    assert rec["kind"] == "production" and rec["query"] == "how long before deadlock detection?"
    assert rec["provenance"] == {"method": "human", "author": "oncall", "note": "INC-42"}
    ev = rec["evidence"][0]
    assert (ev["start"], ev["end"], ev["grade"], ev["doc_hash"]) == (CHUNK_START, CHUNK_END, 2, "hash-locks")
    assert DOC_TEXT[ev["start"]:ev["end"]] == ev["quote"]
    assert rec["id"] == new_id("c", rec["query"], DOC["doc_id"], CHUNK_START, CHUNK_END)
    assert GoldenFile(golden).read()[0]["id"] == rec["id"]
    with pytest.raises(GoldenSetError, match="already there"):
        add.add_production_case(golden, "how long before deadlock detection?", chunk_id="abc123",
                                chunk_lookup=chunk_lookup)
    with pytest.raises(add.NotFoundError, match="nope"):
        add.add_production_case(golden, "q", chunk_id="nope", chunk_lookup=chunk_lookup)


def test_add_by_quote_exact_and_whitespace_insensitive(golden):
    res = add.add_production_case(golden, "deadlock check delay", source_uri="mini/locks.html",
                                  quote="The default is one second (1s).", doc_lookup=doc_lookup, author="me")
    assert res.located == "exact"
    ev = res.record["evidence"][0]
    assert DOC_TEXT[ev["start"]:ev["end"]] == "The default is one second (1s)."
    assert ev["doc_id"] == "mini/locks.html" and ev["doc_hash"] == "hash-locks"
    assert res.record["doc_type"] == "config" and res.record["provenance"]["author"] == "me"

    res = add.add_production_case(golden, "wait on a lock", source_uri="mini/locks.html",
                                  quote="if there is a deadlock condition.", doc_lookup=doc_lookup, author="me")
    assert res.located == "whitespace"  # the document has a newline where the quote has a space
    ev = res.record["evidence"][0]
    assert ev["quote"] == "if there is a deadlock\ncondition." == DOC_TEXT[ev["start"]:ev["end"]]
    assert len(GoldenFile(golden).read()) == 2


def test_add_quote_errors_name_the_quote_and_the_document(golden):
    with pytest.raises(add.QuoteError, match=r"'two seconds' not found in document mini/locks.html"):
        add.add_production_case(golden, "q", source_uri="mini/locks.html", quote="two seconds", doc_lookup=doc_lookup)
    with pytest.raises(add.QuoteError, match=r"occurs 2 times in document mini/locks.html") as exc:
        add.add_production_case(golden, "q", source_uri="mini/locks.html", quote="one second", doc_lookup=doc_lookup)
    assert "longer passage" in str(exc.value)
    with pytest.raises(add.QuoteError, match="occurs 2 times"):  # also ambiguous when whitespace-insensitive
        add.locate_unique("a  b\na b", "a b", "doc")
    with pytest.raises(add.NotFoundError):
        add.add_production_case(golden, "q", source_uri="mini/missing.html", quote="x", doc_lookup=doc_lookup)
    with pytest.raises(UserError):
        add.production_case("q", chunk_id="abc123", source_uri="mini/locks.html", chunk_lookup=chunk_lookup)
    assert not golden.exists()


def test_cli_add(golden, monkeypatch, capsys, tmp_path):
    """--chunk-id opens the store (a session); --source-uri reads the corpus folder alone."""
    overrides = []

    class Session:
        def chunk(self, cid):
            return chunk_lookup(cid)

        def close(self):
            pass

    def open_retriever(o=None):
        overrides.append(o)
        return Session()

    monkeypatch.setitem(sys.modules, "rag_experiments.session", types.SimpleNamespace(open_retriever=open_retriever))
    assert cli.main(["golden", "add", "--golden", str(golden), "--query", "deadlock wait", "--chunk-id", "abc123",
                     "--author", "a", "--set", "chunking=fixed"]) == 0
    assert "added case" in capsys.readouterr().out and overrides == [["chunking=fixed"]]
    corpus = locks_corpus(tmp_path)
    qf = tmp_path / "quote.txt"
    qf.write_text("if there is a deadlock condition.\n")
    assert cli.main(["golden", "add", "--golden", str(golden), "--query", "lock wait", "--source-uri",
                     "mini/locks.html", "--quote-file", str(qf), "--author", "a", "--corpus", str(corpus)]) == 0
    assert "whitespace differences" in capsys.readouterr().out
    rc = cli.main(["golden", "add", "--golden", str(golden), "--query", "q", "--source-uri", "mini/locks.html",
                   "--quote", "one second", "--corpus", str(corpus)])
    assert rc == 2 and "occurs 2 times" in capsys.readouterr().err
    assert [r["kind"] for r in GoldenFile(golden).read()] == ["production", "production"]
    assert overrides == [["chunking=fixed"]]  # the quotes never opened a session


# == issue 44: adding a case never ingests; quotes through markup and case; kinds ===============
def locks_corpus(tmp_path):
    folder = tmp_path / "locks-corpus"
    folder.mkdir(exist_ok=True)
    (folder / "locks.md").write_text("---\nsource_uri: mini/locks.html\ntitle: Locks\ndoc_type: config\n---\n"
                                     + DOC_TEXT)
    return folder


GIT_REBASE = """<html><head><title>git-rebase(1)</title></head><body>
<h1>git-rebase(1)</h1>
<h2>OPTIONS</h2>
<dl>
<dt><strong>--autosquash</strong></dt>
<dd><p>When the commit log message begins with "squash! ..." or "fixup! ...", automatically modify the todo list
of <code>rebase -i</code>.</p></dd>
</dl>
<p>If something goes wrong, <code>git reset --hard ORIG_HEAD</code> returns the branch to where it was before
the rebase.</p>
<p>The <em>upstream</em> branch is read from the configuration.</p>
</body></html>
"""
GIT_CONFIG = """<html><head><title>git-config(1)</title></head><body>
<h1>git-config(1)</h1>
<p>If <strong>push.autoSetupRemote</strong> is true, assume <code>--set-upstream</code> on a default push when no
upstream tracking exists for the current branch.</p>
<p>The <em>upstream</em> branch is read from the configuration.</p>
</body></html>
"""


@pytest.fixture
def git_docs(tmp_path, monkeypatch):
    """An HTML corpus (converted to Markdown on load), a golden path, and no database: DATABASE_URL
    names a closed port, and the session module (the only path to the store) and psycopg.connect
    refuse to be called."""
    import socket

    folder = tmp_path / "git-docs"
    folder.mkdir()
    (folder / "git-rebase.html").write_text(GIT_REBASE)
    (folder / "git-config.html").write_text(GIT_CONFIG)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens once the socket is closed
    monkeypatch.setenv("DATABASE_URL", f"postgresql://u:pw@127.0.0.1:{closed}/nope?connect_timeout=2")
    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RAG_EXP_CONVERT_CACHE", str(tmp_path / "convert-cache"))

    def no_session(*a, **k):
        raise AssertionError("golden add by quote opened the retriever's store")

    monkeypatch.setitem(sys.modules, "rag_experiments.session",
                        types.SimpleNamespace(open_retriever=no_session, compose_settings=no_session))
    monkeypatch.setattr(psycopg, "connect", no_session)  # nor any other way to a server
    return folder, tmp_path / "g.jsonl"


def _add(folder, golden, *argv):
    return cli.main(["golden", "add", "--golden", str(golden), "--corpus", str(folder), "--author", "ana", *argv])


def test_add_by_quote_needs_no_database_and_matches_through_markup_and_case(git_docs, capsys, tmp_path):
    from rag_experiments.corpus.loader import load_corpus

    folder, golden = git_docs
    # the rendered page shows `git reset --hard ORIG_HEAD` without backticks; typed in other case too
    assert _add(folder, golden, "--query", "how do I undo a rebase that went wrong", "--source-uri", "git-rebase",
                "--quote", "git reset --hard orig_head returns the branch to where it was") == 0
    out = capsys.readouterr().out
    assert "kind production" in out and "through whitespace, markup and case" in out
    doc = {d.doc_id: d for d in load_corpus(folder)}["git-rebase.html"]
    ev = GoldenFile(golden).read()[0]["evidence"][0]
    assert ev["source_uri"] == "git-rebase.html"  # the stem resolved to the document's source_uri
    assert ev["quote"] == doc.text[ev["start"]:ev["end"]] == "`git reset --hard ORIG_HEAD` returns the branch to where it was"
    assert ev["doc_hash"] == doc.content_hash
    # the stored span is the converted text's: `golden verify` (no database either) resolves it
    assert cli.main(["golden", "verify", "--golden", str(golden), "--corpus", str(folder)]) == 0
    assert "1 labelled spans resolve" in capsys.readouterr().out
    assert not (tmp_path / "home" / ".rag-exp").exists()  # no embedded PostgreSQL was set up either


def test_kinds_exact_paraphrase_production_and_the_identifier(git_docs, capsys):
    folder, golden = git_docs
    # exact: the question's identifier (found by the shapes of rag_experiments.identifiers) is in the document
    assert _add(folder, golden, "--query", "What does --autosquash do?", "--kind", "exact", "--source-uri",
                "git-rebase.html", "--quote", "automatically modify the todo list of rebase -i") == 0
    assert "kind exact, identifier '--autosquash'" in capsys.readouterr().out
    # an identifier of another shape is named by hand; it must be in the question and the document
    assert _add(folder, golden, "--query", "What does push.autoSetupRemote change?", "--kind", "exact",
                "--identifier", "push.autoSetupRemote", "--source-uri", "git-config.html", "--quote",
                "assume --set-upstream on a default push") == 0
    assert _add(folder, golden, "--query", "Can git push set the upstream by itself the first time?", "--kind",
                "paraphrase", "--source-uri", "git-config.html", "--quote", "when no upstream tracking exists") == 0
    recs = GoldenFile(golden).read()
    assert [(r["kind"], r.get("identifier")) for r in recs] == [
        ("exact", "--autosquash"), ("exact", "push.autoSetupRemote"), ("paraphrase", None)]
    assert recs[0]["evidence"][0]["quote"] == "automatically modify the todo list of `rebase -i`"  # both markers
    assert all(r["provenance"] == {"method": "human", "author": "ana"} for r in recs)  # a person wrote them
    capsys.readouterr()
    # an exact question without an identifier the document holds is refused, naming what to do
    rc = _add(folder, golden, "--query", "How do I go back after a failed rebase?", "--kind", "exact", "--source-uri",
              "git-rebase.html", "--quote", "returns the branch to where it was")
    err = capsys.readouterr().err
    assert rc == 2 and "--kind exact: the question names no identifier" in err and "--identifier TEXT" in err
    rc = _add(folder, golden, "--query", "What does push.default do?", "--kind", "exact", "--identifier",
              "push.default", "--source-uri", "git-config.html", "--quote", "assume --set-upstream")
    assert rc == 2 and "--identifier 'push.default' is not in the evidence's document" in capsys.readouterr().err
    assert len(GoldenFile(golden).read()) == 3


def test_kind_is_validated(git_docs, capsys):
    folder, golden = git_docs
    with pytest.raises(SystemExit) as exc:  # argparse: usage and one error line, exit 2
        _add(folder, golden, "--query", "q", "--kind", "identifier", "--source-uri", "git-rebase.html", "--quote", "x")
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "argument --kind: invalid choice: 'identifier'" in err and "'exact'" in err
    with pytest.raises(UserError, match="--kind must be one of exact, paraphrase, production, got 'bogus'"):
        add.production_case("q", source_uri="mini/locks.html", quote="one second (1s)", doc_lookup=doc_lookup,
                            kind="bogus")
    assert add.KINDS == ("exact", "paraphrase", "production")
    from rag_experiments.commands.golden import ADD_KINDS

    from rag_experiments.golden.multi import KIND as MULTI

    assert ADD_KINDS == (*add.KINDS, MULTI)  # multi: golden add --kind multi --group (rag_experiments.golden.multi)
    assert not golden.exists()


def test_a_miss_shows_the_closest_passages_and_a_command_that_shows_them(git_docs, capsys):
    import shlex

    from rag_experiments.corpus.loader import load_corpus
    from rag_experiments.corpus.lookup import Lines

    folder, golden = git_docs
    rc = _add(folder, golden, "--query", "undo a rebase", "--source-uri", "git-rebase.html", "--quote",
              "git reset --soft ORIG_HEAD returns the branch to where it was")  # --soft: the page says --hard
    err = capsys.readouterr().err.splitlines()
    doc = {d.doc_id: d for d in load_corpus(folder)}["git-rebase.html"]
    at = doc.text.index("If something goes wrong")
    assert rc == 2 and err[0] == (f"closest passages in git-rebase.html (its text as a quote must match it: "
                                  f"rag-exp corpus show git-rebase.html --corpus {folder}):")
    assert err[1].startswith(f"  line {Lines(doc.text).line_of(at)}, chars {at}..") and "If something goes wrong" in err[1]
    assert "of the quote's 11 words" in err[1]
    assert err[-2].startswith("error: quote 'git reset --soft ORIG_HEAD returns") and err[-2].endswith(
        "not found in document git-rebase.html (compared through whitespace, Markdown markup and case)")
    hint = err[-1].split("hint: copy the passage from the document's text as converted: ")[1]
    argv = shlex.split(hint)
    assert argv[:3] == ["rag-exp", "corpus", "show"]
    assert cli.main(argv[1:]) == 0  # the command the hint names exists and shows the passage
    assert "`git reset --hard ORIG_HEAD`" in capsys.readouterr().out
    assert not golden.exists()


def test_a_quote_in_another_document_is_named_with_the_option_that_takes_it(git_docs, capsys):
    folder, golden = git_docs
    quote = "assume --set-upstream on a default push"
    assert _add(folder, golden, "--query", "q", "--source-uri", "git-rebase.html", "--quote", quote) == 2
    err = capsys.readouterr().err
    assert f"error: quote {quote!r} not found in document git-rebase.html, but it is in: git-config.html" in err
    assert "hint: pass --source-uri git-config.html" in err
    assert _add(folder, golden, "--query", "q", "--source-uri", "git-confg", "--quote", quote) == 2  # a typo
    err = capsys.readouterr().err
    assert ("error: document 'git-confg' is not in the corpus (2 documents); the quote is in: git-config.html" in err
            and "hint: pass --source-uri git-config.html" in err)
    assert _add(folder, golden, "--query", "q", "--source-uri", "git-confg", "--quote", "not anywhere at all") == 2
    err = capsys.readouterr().err
    assert "and the quote is in none of them; closest names: git-config.html" in err
    assert f"rag-exp corpus list --corpus {folder}" in err
    assert not golden.exists()


def test_the_quote_normalisation_is_the_one_external_passages_get():
    """golden.normalise is placement's normalisation: one function, not two copies."""
    from rag_experiments.golden.normalise import MARKUP, find_normalised, normalised
    from rag_experiments.retrieval import placement

    samples = ["", "  **`work_mem`** (`integer`)\n\n Sets  the BASE\tmaximum ", "İstanbul ß ǅ", "a\\_b | > # c  ",
               DOC_TEXT, GIT_REBASE]
    for text in samples:
        assert normalised(text) == placement._normalised(text)
    assert placement._normalised is normalised
    assert all(c not in normalised("".join(MARKUP) + "x")[0] for c in MARKUP)
    text = "x **--force** y `ORIG_HEAD` z"
    assert [text[a:b] for a, b in find_normalised(text, "--FORCE y orig_head")] == ["--force** y `ORIG_HEAD"]
