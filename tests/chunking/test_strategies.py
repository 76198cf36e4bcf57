from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_experiments.chunking import ChunkingParams, chunk_document
from rag_experiments.chunking.markdown_blocks import parse_blocks
from rag_experiments.errors import ConfigError
from rag_experiments.types import Document

PARAMS = [ChunkingParams("heading", 40), ChunkingParams("heading", 200), ChunkingParams("fixed", 32, 8),
          ChunkingParams("paragraph", 50), ChunkingParams("heading", 25, breadcrumbs=False)]

md_line = st.one_of(
    st.builds(lambda lvl, t: "#" * lvl + " " + t, st.integers(1, 4), st.text("abc work_mem 23505", min_size=1, max_size=20)),
    st.just("```"), st.just("| a | b |"), st.just(""), st.just("  ```"),
    # definition-list terms (a bold line), long ones included: glued to what follows when there is room
    st.builds(lambda t: f"**{t}**", st.text("abc work_mem -x ", min_size=1, max_size=120).map(str.strip).filter(bool)),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"), max_size=120),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(md_line, min_size=1, max_size=40), which=st.integers(0, len(PARAMS) - 1))
def test_every_chunk_is_an_exact_span(embedder, lines, which):
    text = "\n".join(lines) + "\n"
    if not text.strip():
        return
    doc = Document("d", "d", "T", "doc", text)
    chunks = chunk_document(doc, PARAMS[which], embedder, "key")
    for c in chunks:
        assert c.text == doc.text[c.start:c.end]
        assert 0 <= c.start < c.end <= len(text)
        assert c.n_tokens <= PARAMS[which].max_tokens
    starts = [c.start for c in chunks]
    assert starts == sorted(starts)


def test_spans_hold_on_the_mini_corpus_and_ids_are_stable(mini_docs, embedder):
    for p in PARAMS:
        for d in mini_docs:
            a = chunk_document(d, p, embedder, "k")
            b = chunk_document(d, p, embedder, "k")
            assert [c.chunk_id for c in a] == [c.chunk_id for c in b]
            assert len({c.chunk_id for c in a}) == len(a)
            for c in a:
                assert d.text[c.start:c.end] == c.text


def test_heading_never_splits_a_fitting_code_block_and_adds_breadcrumbs(mini_docs, embedder):
    doc = next(d for d in mini_docs if d.doc_id.endswith("sql-createindex.html"))
    fence_start = doc.text.index("```")
    fence_end = doc.text.index("```", fence_start + 3) + 3
    chunks = chunk_document(doc, ChunkingParams("heading", 120), embedder, "k")
    containing = [c for c in chunks if c.start <= fence_start < c.end]
    assert len(containing) == 1 and containing[0].end >= fence_end
    assert containing[0].indexed_text.startswith("CREATE INDEX\n\n")  # page breadcrumb
    small = chunk_document(doc, ChunkingParams("heading", 70), embedder, "k")
    section = [c for c in small if c.text.startswith("## Building Indexes Concurrently")]
    assert section and section[0].indexed_text.startswith("CREATE INDEX > Building Indexes Concurrently\n\n")
    assert section[0].text == doc.text[section[0].start:section[0].end]  # breadcrumb not in the span


def test_oversize_table_is_split_at_rows_and_carries_its_header(mini_docs, embedder):
    doc = next(d for d in mini_docs if d.doc_type == "errcodes")
    chunks = chunk_document(doc, ChunkingParams("heading", 30, breadcrumbs=False), embedder, "k")
    table_chunks = [c for c in chunks if "| 23505 |" in c.text or "| 40P01 |" in c.text]
    assert table_chunks
    for c in table_chunks:
        assert c.text.startswith("|") and c.text.rstrip().endswith("|")  # whole rows only
        assert c.indexed_text.startswith("| Error Code | Condition Name |")


def test_fixed_windows_overlap(mini_docs, embedder):
    doc = mini_docs[0]
    chunks = chunk_document(doc, ChunkingParams("fixed", 32, 8, breadcrumbs=False), embedder, "k")
    assert len(chunks) > 2
    for a, b in zip(chunks, chunks[1:]):
        assert b.start < a.end  # consecutive windows share 8 tokens


def test_indented_fence_is_atomic():
    blocks = parse_blocks("- item\n\n  ```\n  # not a heading\n  ```\n\n# Real\n")
    assert [b.kind for b in blocks] == ["para", "code", "heading"]


@pytest.mark.parametrize("kwargs, key", [
    ({"max_tokens": 0}, "chunking.max_tokens"),
    ({"max_tokens": 10, "overlap": 10}, "chunking.overlap"),
    ({"name": "sentences"}, "chunking.name"),
    ({"overlap": -1}, "chunking.overlap"),
])
def test_bad_chunking_parameters_are_rejected_with_the_key(kwargs, key):
    with pytest.raises(ConfigError) as err:
        ChunkingParams(**kwargs)
    assert key in str(err.value)
