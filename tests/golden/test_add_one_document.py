"""`golden add` reads the named document alone (issue 44, item 1: under 2 s on a corpus of
thousands of chunks): the other files are converted (or read from the conversion cache) only when
a miss must say where the quote is. Checked by counting the converter's calls on a corpus whose
conversion cache starts empty."""

from __future__ import annotations

import pytest

from rag_experiments import cli
from rag_experiments.corpus import convert_worker, loader
from rag_experiments.golden import GoldenFile
from rag_experiments.golden import add

PAGES = {
    "options.html": "<html><body><h1>Options</h1><p>AUTO_CD: if a command is the name of a directory, "
                    "perform the cd command to that directory.</p></body></html>",
    "history.html": "<html><body><h1>History</h1><p>HISTSIZE is the maximum number of events stored "
                    "in the internal history list.</p></body></html>",
    "files.html": "<html><body><h1>Files</h1><p>Commands are first read from /etc/zshenv.</p></body></html>",
}
GUIDE = "---\nsource_uri: guides/start\n---\n# Start\n\nRead the options page first.\n"


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, html in PAGES.items():
        (folder / name).write_text(html)
    (folder / "guide.md").write_text(GUIDE)
    monkeypatch.setenv("RAG_EXP_CONVERT_CACHE", str(tmp_path / "cache"))  # empty: every read converts
    converted: list[str] = []
    # conversions run in a child process (corpus.convert_worker): count the requests sent to it
    real = convert_worker.ConversionWorker.convert

    def counting(self, data, suffix):
        converted.append(next(n for n, h in PAGES.items() if h.encode() == data))
        return real(self, data, suffix)

    monkeypatch.setattr(convert_worker.ConversionWorker, "convert", counting)
    loader._LOADED.clear()
    yield folder, converted
    loader._LOADED.clear()


def test_a_quote_found_reads_the_named_document_only(corpus, tmp_path):
    folder, converted = corpus
    res = add.production_case("what does AUTO_CD do?", source_uri="options", quote="perform the cd command",
                              corpus_path=folder, kind="exact")
    assert converted == ["options.html"]
    assert res.record["evidence"][0]["source_uri"] == "options.html"
    assert res.record["identifier"] == "AUTO_CD"
    # a Markdown document named by its front matter: found without converting anything
    converted.clear()
    res = add.production_case("which page first?", source_uri="guides/start", quote="Read the options page",
                              corpus_path=folder)
    assert converted == [] and res.record["evidence"][0]["doc_id"] == "guides/start"


def test_a_miss_searches_the_other_documents(corpus):
    folder, converted = corpus
    with pytest.raises(add.QuoteError, match=r"not found in document options.html, but it is in: history.html"):
        add.production_case("how many events?", source_uri="options.html", quote="maximum number of events",
                            corpus_path=folder)
    assert sorted(converted) == sorted(PAGES)  # each file converted once
    converted.clear()
    with pytest.raises(add.NotFoundError, match=r"document 'optionz' is not in the corpus \(4 documents\); "
                                                r"the quote is in: options.html"):
        add.production_case("q", source_uri="optionz", quote="perform the cd command", corpus_path=folder)


def test_the_command_reads_one_document(corpus, tmp_path, capsys):
    folder, converted = corpus
    golden = tmp_path / "g.jsonl"
    rc = cli.main(["golden", "add", "--golden", str(golden), "--corpus", str(folder), "--kind", "exact",
                   "--query", "What is HISTSIZE?", "--source-uri", "history",
                   "--quote", "the maximum number of events"])
    assert rc == 0, capsys.readouterr().err
    assert converted == ["history.html"]
    (rec,) = GoldenFile(golden).read()
    assert rec["identifier"] == "HISTSIZE" and rec["evidence"][0]["quote"] == "the maximum number of events"
