"""Definition lists keep each term with its definition (issue 44, item 5).

An HTML ``<dl>`` (a man page's option list) converts to one bold term line per ``<dt>`` followed by
the ``<dd>`` blocks; the old chunker packed blocks greedily, so a term often ended one chunk and its
definition began the next (the issue's misses on ``push.autoSetupRemote`` and ``--autosquash``).
The sample is four-plus entries of zsh-doc's ``Options.html`` (tests/fixtures/quality/README.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_experiments.chunking import ChunkingParams, chunk_document
from rag_experiments.chunking.markdown_blocks import parse_blocks
from rag_experiments.corpus.html_import import html_to_markdown
from rag_experiments.types import Document

HTML = (Path(__file__).resolve().parents[1] / "fixtures" / "quality" / "zsh_options.html").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def options_doc() -> Document:
    title, text = html_to_markdown(HTML)
    return Document("Options.html", "Options.html", title, "doc", text, corpus="zsh")


def _items(doc: Document) -> list[tuple[int, int, int, str]]:
    """(term start, definition start, item end, term line) of each term followed by a definition."""
    blocks = parse_blocks(doc.text)
    out = []
    for i, b in enumerate(blocks):
        if b.kind != "term" or i + 1 >= len(blocks) or blocks[i + 1].kind in ("term", "heading"):
            continue
        j = i + 1
        while j + 1 < len(blocks) and blocks[j + 1].kind not in ("term", "heading"):
            j += 1
        out.append((b.start, blocks[i + 1].start, blocks[j].end, doc.text[b.start:b.end]))
    return out


def test_the_converter_emits_terms_the_chunker_recognises(options_doc):
    items = _items(options_doc)
    assert [t for *_, t in items] == ["**`AUTO_CD` (`-J`)**", "**`AUTO_PUSHD` (`-N`)**", "**`CDABLE_VARS` (`-T`)**",
                                      "**`CD_SILENT`**", "**`CHASE_DOTS`**", "**`CHASE_LINKS` (`-w`)**"]


@pytest.mark.parametrize("name,max_tokens", [("heading", 60), ("heading", 90), ("heading", 200),
                                             ("paragraph", 60), ("paragraph", 90)])
def test_no_term_is_split_from_its_definition(options_doc, embedder, name, max_tokens):
    chunks = chunk_document(options_doc, ChunkingParams(name, max_tokens), embedder, "k")
    for term_start, def_start, end, term in _items(options_doc):
        holder = next(c for c in chunks if c.start <= term_start < c.end)
        assert holder.start <= def_start < holder.end, f"{term} ends a chunk; its definition starts the next"
        item_tokens = embedder.count_tokens(options_doc.text[term_start:end])
        if item_tokens <= max_tokens - embedder.count_tokens("## 16.2.1 Changing Directories"):
            assert holder.end >= end, f"{term} ({item_tokens} tokens) fits one chunk but was split"
    for c in chunks:
        assert c.text == options_doc.text[c.start:c.end] and c.n_tokens <= max_tokens


def test_a_definition_longer_than_a_chunk_repeats_its_term(options_doc, embedder):
    """CHASE_DOTS (two paragraphs, ~150 tokens) in 60-token chunks: split at sentence ends inside
    its definition; every later piece's indexed text names the option after the breadcrumb."""
    chunks = chunk_document(options_doc, ChunkingParams("heading", 60), embedder, "k")
    term_start, _, end, term = next(i for i in _items(options_doc) if "CHASE_DOTS" in i[3])
    inside = [c for c in chunks if term_start <= c.start < end]
    assert len(inside) >= 3 and inside[0].start == term_start
    crumb = "16 Options > 16.2.1 Changing Directories\n\n"
    assert inside[0].indexed_text == crumb + inside[0].text
    for c in inside[1:]:
        assert c.indexed_text == crumb + term + "\n\n" + c.text
        assert not c.text.startswith("**")  # the term is in the indexed text only, not in the span


def test_mini_corpus_configuration_parameters_stay_with_their_descriptions(mini_docs, embedder):
    """runtime-config-resource: DocBook variablelists (``**`shared_buffers` (`integer`)**``)."""
    doc = next(d for d in mini_docs if d.doc_id.endswith("runtime-config-resource.html"))
    items = _items(doc)
    assert len(items) == 4
    for p in (ChunkingParams("heading", 60), ChunkingParams("heading", 75), ChunkingParams("paragraph", 60)):
        chunks = chunk_document(doc, p, embedder, "k")
        for term_start, def_start, _, term in items:
            holder = next(c for c in chunks if c.start <= term_start < c.end)
            assert holder.start <= def_start < holder.end, (p, term)
