"""Adding production failures as cases: by chunk id, by quote, and the errors."""

from __future__ import annotations

import sys
import types

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
    overrides = []

    class Session:
        def chunk(self, cid):
            return chunk_lookup(cid)

        def document(self, uri):
            return doc_lookup(uri)

        def close(self):
            pass

    def open_retriever(o=None):
        overrides.append(o)
        return Session()

    monkeypatch.setitem(sys.modules, "rag_experiments.session", types.SimpleNamespace(open_retriever=open_retriever))
    assert cli.main(["golden", "add", "--golden", str(golden), "--query", "deadlock wait", "--chunk-id", "abc123",
                     "--author", "a", "--set", "chunking=fixed"]) == 0
    assert "added case" in capsys.readouterr().out and overrides == [["chunking=fixed"]]
    qf = tmp_path / "quote.txt"
    qf.write_text("if there is a deadlock condition.\n")
    assert cli.main(["golden", "add", "--golden", str(golden), "--query", "lock wait", "--source-uri",
                     "mini/locks.html", "--quote-file", str(qf), "--author", "a"]) == 0
    assert "whitespace differences" in capsys.readouterr().out
    rc = cli.main(["golden", "add", "--golden", str(golden), "--query", "q", "--source-uri", "mini/locks.html",
                   "--quote", "one second"])
    assert rc == 2 and "occurs 2 times" in capsys.readouterr().err
    assert [r["kind"] for r in GoldenFile(golden).read()] == ["production", "production"]
