"""A chunk's size limit always holds (issue 55, probe 4): whatever the page, no chunk has more than
``max_tokens`` tokens (recounted on its text) nor more than ``max_tokens * MAX_CHARS_PER_TOKEN``
characters. sqlite3-doc's keyword_index.html became one 61,460-character chunk: WordPiece counts a
word longer than 100 characters as one [UNK]."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_experiments.chunking.params import ChunkingParams
from rag_experiments.chunking.strategies import MAX_CHARS_PER_TOKEN, chunk_document
from rag_experiments.embedding.tokens import WordPieceCounter
from rag_experiments.types import Document

TOK = WordPieceCounter()

HOSTILE = {
    "a line with no spaces": "# Index\n\n" + "x" * 61_460 + "\n",
    "a table row with no spaces": "# T\n\n| a |\n|---|\n| " + "y" * 20_000 + " |\n",
    "a heading longer than a chunk": "# " + " ".join(f"h{i}" for i in range(400)) + "\n\nbody text.\n",
    "one huge paragraph": "# T\n\n" + " ".join(f"word{i}" for i in range(3000)) + "\n",
    "a huge table": "# T\n\n| a | b |\n|---|---|\n" + "".join(f"| cell{i} | value {i} |\n" for i in range(1500)),
    "a huge list": "# T\n\n" + "".join(f"- item {i} with a few words\n" for i in range(1500)),
    "a term longer than a chunk": "# T\n\n**" + "-".join(f"opt{i}" for i in range(290)) + "**\n\nIts text.\n",
}


def _check(text: str, params: ChunkingParams, slack: int = 0) -> None:
    """``slack``: a token window cut inside a word (the document's word pieces ``xx ##yy``) is
    tokenized anew when recounted alone, a piece or two more; the chunker counts in the document."""
    doc = Document("d", "d", "T", "doc", text, "c")
    chunks = chunk_document(doc, params, TOK)
    assert chunks and all(c.text == text[c.start:c.end] for c in chunks)
    for c in chunks:
        assert c.n_tokens <= params.max_tokens
        assert TOK.count_tokens(c.text) <= params.max_tokens + slack, (c.start, c.end)
        assert len(c.text) <= params.max_tokens * MAX_CHARS_PER_TOKEN, (c.start, c.end, len(c.text))
    # every non-blank character of the page is in some chunk
    covered = set()
    for c in chunks:
        covered.update(range(c.start, c.end))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


@pytest.mark.parametrize("name", ["heading", "paragraph", "fixed"])
@pytest.mark.parametrize("page", list(HOSTILE), ids=list(HOSTILE))
def test_hostile_pages_respect_the_limit(page, name):
    """Before: 'a line with no spaces' was one 61,465-character chunk (every strategy), 'a heading
    longer than a chunk' one of 1,130 tokens (heading), the long table row one of 20,021 characters."""
    _check(HOSTILE[page], ChunkingParams(name=name, max_tokens=200))


_WORD = st.one_of(st.text("abcdefghij", min_size=1, max_size=8), st.text("xyz", min_size=90, max_size=400))
_LINE = st.one_of(
    st.lists(_WORD, min_size=1, max_size=40).map(" ".join),
    st.lists(_WORD, min_size=1, max_size=6).map(lambda ws: "| " + " | ".join(ws) + " |"),
    st.lists(_WORD, min_size=1, max_size=8).map(lambda ws: "# " + " ".join(ws)),
    st.lists(_WORD, min_size=1, max_size=8).map(lambda ws: "**" + " ".join(ws) + "**"),
    st.just("```"), st.just(""),
)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_LINE, min_size=1, max_size=40), name=st.sampled_from(["heading", "paragraph", "fixed"]),
       max_tokens=st.sampled_from([8, 30, 64]))
def test_any_page_respects_the_limit(lines, name, max_tokens):
    text = "\n".join(lines) + "\n"
    if not text.strip():
        return
    _check(text, ChunkingParams(name=name, max_tokens=max_tokens, overlap=0), slack=2)
