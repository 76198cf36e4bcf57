"""The libraries' own loaders over real files (issue 49, B3/B5): LangChain ``TextLoader`` +
``RecursiveCharacterTextSplitter(add_start_index=True)`` and LlamaIndex ``SimpleDirectoryReader``
+ ``SentenceSplitter`` keep a Markdown file's front matter, so their offsets count from the raw
file; LlamaIndex's ``get_content(metadata_mode="all")`` puts six metadata lines in front of the
text. Every chunk must be placed where the library says it is (its own raw offsets, shifted by
:attr:`Document.text_offset`), by offsets or by its text alone, and a run must never stop on them.

Independent check: the placed span's text is the library's chunk read from the library's own
document text at the library's own offsets (front matter, which is no document text, cut off)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_experiments.corpus.loader import demo_corpus_dir, load_corpus
from rag_experiments.experiment import run_experiment
from rag_experiments.retrieval.passages import Passage, read_passage
from rag_experiments.retrieval.placement import Placer

from .test_external import MINI, golden_env, settings  # noqa: F401 - the fixture

DEMO = demo_corpus_dir()
FILES = sorted(DEMO.glob("*.md"))[::8]  # 24 of the 186 demo pages: a second of splitting, not ten


def _langchain_chunks(files):
    pytest.importorskip("langchain_community")
    from langchain_community.document_loaders import TextLoader
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    docs = [d for f in files for d in TextLoader(str(f), encoding="utf-8").load()]
    return docs, RecursiveCharacterTextSplitter(chunk_size=800, chunk_overlap=100,
                                                add_start_index=True).split_documents(docs)


def _llamaindex_nodes(files):
    pytest.importorskip("llama_index.core")
    from llama_index.core import SimpleDirectoryReader
    from llama_index.core.node_parser import SentenceSplitter

    docs = SimpleDirectoryReader(input_files=[str(f) for f in files]).load_data()
    return docs, SentenceSplitter(chunk_size=256, chunk_overlap=32, tokenizer=str.split).get_nodes_from_documents(docs)


def _expected(placer, name, raw_text, start, end):
    """What the library's chunk is in our document: its raw span, shifted, front matter cut off."""
    doc = placer.document(name)
    assert raw_text[doc.text_offset:] == doc.text  # the library read the file as we do, front matter kept
    return doc, doc.text[max(0, start - doc.text_offset):end - doc.text_offset]


@pytest.mark.parametrize("offsets", ["auto", "raw"])
def test_langchain_textloader_chunks_are_placed_by_their_raw_offsets(offsets):
    docs, chunks = _langchain_chunks(FILES)
    placer = Placer(load_corpus(DEMO), offsets=offsets)
    raw = {d.metadata["source"]: d.page_content for d in docs}
    assert sum(1 for c in chunks if c.metadata["start_index"] + len(c.page_content) > len(
        placer.document(c.metadata["source"]).text)) > 0  # chunks past the stored text's end: the old abort
    for c in chunks:
        p = read_passage(c, "langchain")
        placed = placer.place(p, "langchain")
        doc, want = _expected(placer, c.metadata["source"], raw[c.metadata["source"]], p.start, p.end)
        assert placed.method == "offsets", placed.note
        assert doc.text[placed.start:placed.end] == want
        by_text = placer.place(Passage(p.document, text=p.text), "langchain")  # the text alone: front matter stripped
        assert by_text.method == "exact" and doc.text[by_text.start:by_text.end] == want


def test_langchain_raw_offsets_declared_as_text_never_stop_the_run():
    docs, chunks = _langchain_chunks(FILES)
    placer = Placer(load_corpus(DEMO), offsets="text")
    methods = {placer.place(read_passage(c, "w"), "w").method for c in chunks}  # before: ExternalResultError
    assert methods <= {"offsets", "exact"}  # wrong offsets: placed by the text, each noted


@pytest.mark.parametrize("with_offsets", [True, False])
def test_llamaindex_nodes_with_all_their_metadata_are_placed(with_offsets):
    from llama_index.core.schema import MetadataMode

    docs, nodes = _llamaindex_nodes(FILES)
    placer = Placer(load_corpus(DEMO))
    raw = {d.id_: d.text for d in docs}
    methods = set()
    for n in nodes:
        text = n.get_content(metadata_mode=MetadataMode.ALL)
        assert text.startswith("file_path: ") and text.count("\n") > n.get_content().count("\n") + 3  # > 3 lines
        p = Passage(n.metadata["file_path"], n.start_char_idx if with_offsets else None,
                    n.end_char_idx if with_offsets else None, text)
        placed = placer.place(p, "llamaindex")
        methods.add(placed.method)
        doc, want = _expected(placer, n.metadata["file_path"], raw[n.ref_doc_id], n.start_char_idx, n.end_char_idx)
        assert doc.text[placed.start:placed.end] == want, placed.note
    assert methods == ({"offsets"} if with_offsets else {"exact"})


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_text_offset_is_counted_as_the_libraries_read_the_file(tmp_path, newline):
    """CRLF: our loader reads CRLF as LF and counts the front matter's length in LF characters, as
    LangChain's TextLoader reads the file (Python's text mode): its offsets agree. LlamaIndex's
    SimpleDirectoryReader keeps the CRs, so its offsets count them: they fit neither frame, and
    its chunks are placed by their text (CRLF is whitespace to the normalised match)."""
    body = "# Title\n\nA first paragraph that is long enough.\n\nA second paragraph, also long enough.\n"
    front = "---\nsource_uri: x/page.html\ntitle: Page\n---\n"
    (tmp_path / "page.md").write_bytes((front + body).replace("\n", newline).encode())
    (tmp_path / "plain.txt").write_bytes(b"\xef\xbb\xbfplain text\n")
    docs = {d.doc_id: d for d in load_corpus(tmp_path)}
    assert (docs["x/page.html"].text_offset, docs["x/page.html"].text) == (len(front), body)
    assert docs["plain.txt"].text_offset == 1  # the BOM the libraries keep as a character
    placer = Placer(list(docs.values()))
    _, chunks = _langchain_chunks([tmp_path / "page.md"])
    _, nodes = _llamaindex_nodes([tmp_path / "page.md"])
    for library, p in [("langchain", read_passage(c, "w")) for c in chunks] + [("llamaindex", read_passage(n, "w"))
                                                                                for n in nodes]:
        placed = placer.place(p, "w")
        crs = library == "llamaindex" and newline == "\r\n"
        assert placed.method == ("normalised" if crs else "offsets"), placed.note
        assert body[placed.start:placed.end].strip() in p.text.replace("\r\n", "\n")


class RawOffsets:
    """A LangChain stack over the mini corpus that reads the files itself (TextLoader): its offsets
    count from the raw file, front matter included."""

    def __init__(self) -> None:
        _, self.chunks = _langchain_chunks(sorted(Path(MINI).glob("*.md")))

    def search(self, query: str, k: int):
        words = set(query.lower().split())
        return sorted(self.chunks, key=lambda c: (-len(words & set(c.page_content.lower().split())),
                                                  c.metadata["source"], c.metadata["start_index"]))[:k]


def test_a_run_over_a_library_loader_with_raw_offsets_completes(golden_env):
    from dataclasses import replace

    s = settings(golden_env, "oracle")
    s = replace(s, retrieval=replace(s.retrieval, external=replace(
        s.retrieval.external, target="tests.retrieval.test_library_loaders:RawOffsets")))
    docs = {d.source_uri: d for d in load_corpus(MINI, "mini")}
    system, queries = RawOffsets(), [r for r in run_experiment(s).results.values()]
    # the chunks it returned that end past the stored text (raw offsets): before, the first of them
    # ended the run with "offsets ... are outside document"
    past = sum(1 for r in queries for c in system.search(r.query, 20)
               if c.metadata["start_index"] + len(c.page_content) > len(Placer(docs.values()).document(
                   c.metadata["source"]).text))
    assert past > 0
    result = run_experiment(s)  # again, from the answer cache: the same placement
    a = result.external
    n_hits = sum(len(r.hits) for r in result.results.values())
    assert a["alignment.offsets"] == n_hits > 0
    assert a["alignment.failed"] == 0 == a["alignment.unknown_document"]
