"""``rag-exp init`` finds the corpus's earlier conversions wherever they were made (issue 58 item 5):
converted from one folder, the project made from another copies them in (the cache folders a
user converted into are remembered); with none anywhere, it says where it looked."""

from __future__ import annotations

from rag_experiments.cli import main
from rag_experiments.corpus.convert_cache import ConversionCache, known_caches
from rag_experiments.corpus.loader import read_corpus
from tests.test_init_portable import HTML


def test_init_copies_conversions_made_from_another_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("RAG_EXP_HOME", raising=False)
    monkeypatch.delenv("RAG_EXP_CONVERT_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    docs = tmp_path / "shared" / "docs"
    docs.mkdir(parents=True)
    (docs / "ranking.html").write_text(HTML)
    # converted with the shell in one folder (what `rag-exp corpus convert` does from there) ...
    made_in = tmp_path / "where-we-converted" / ".rag-exp" / "convert-cache"
    read_corpus(docs, cache=ConversionCache(made_in))
    assert list(made_in.rglob("*.json")) and known_caches() == [made_in.resolve()]
    # ... the project made from another: init copies the conversion into the project's cache
    monkeypatch.chdir(tmp_path)
    assert main(["init", "evals", "--corpus", str(docs), "--name", "x"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"copied 1 conversion(s) of the corpus from {made_in.resolve()}" in out, out
    assert list((tmp_path / "evals" / ".rag-exp" / "convert-cache").rglob("*.json"))


def test_init_says_where_it_looked_when_no_conversion_exists(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("RAG_EXP_HOME", raising=False)
    monkeypatch.delenv("RAG_EXP_CONVERT_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ranking.html").write_text(HTML)
    monkeypatch.chdir(tmp_path)
    assert main(["init", "evals", "--corpus", str(docs), "--name", "x"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"no earlier conversion of the corpus found (looked in {tmp_path / '.rag-exp' / 'convert-cache'})" in out, out
