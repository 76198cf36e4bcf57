"""The chunking strategies. Every chunk satisfies ``chunk.text == doc.text[start:end]``.

* ``heading``: structure-aware. Split at Markdown headings; pack whole sections (and, inside a
  section, whole blocks) into chunks of at most ``max_tokens``. A code block or table is never
  split unless it alone exceeds ``max_tokens``; then it is split at line (row) boundaries and
  each later piece of a table carries the table's header row in its *indexed* text, so a row
  of the SQLSTATE table still says what its columns mean. A paragraph that alone exceeds
  ``max_tokens`` is split at sentence ends, then (last resort) at token boundaries.
* ``fixed``: windows of ``max_tokens`` model tokens, sliding by ``max_tokens - overlap``.
* ``paragraph``: recursive packing of blank-line-separated blocks, ignoring section
  structure; oversize blocks split as above.

``breadcrumbs`` prepends ``Page > Section > Subsection`` (the headings enclosing the chunk's
start) to the indexed/embedded text of every strategy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from ..cache_key import cache_key
from ..types import Chunk, Document
from .markdown_blocks import Block, heading_path_at, parse_blocks
from .params import ChunkingParams, TokenCounter

_SENTENCE_END = re.compile(r"(?<=[.!?:;])\s+")


@dataclass(frozen=True)
class _Piece:
    start: int
    end: int
    tokens: int
    prefix: str = ""  # text to put before the piece in indexed_text if it starts a chunk


# Bump when a change to this module changes the chunks it makes for the same input: the
# version is part of every strategy id, so old strategies are never mistaken for new ones.
CHUNKER_VERSION = 1


def strategy_key(corpus: str, params: ChunkingParams, model_id: str) -> str:
    """The ``strategies.strategy_id``: readable prefix + digest of everything that shapes chunks."""
    digest = cache_key("strategy", corpus=corpus, chunking=params, model=model_id, chunker=CHUNKER_VERSION)
    return f"{params.name}-{digest[:12]}"


# -- splitting oversize spans -----------------------------------------------------------------
def _token_windows(text: str, start: int, end: int, max_tokens: int, tok: TokenCounter,
                   stride: int | None = None) -> list[_Piece]:
    spans = tok.token_spans(text[start:end])
    if not spans:
        return []
    stride = stride or max_tokens
    pieces = []
    for lo in range(0, len(spans), stride):
        window = spans[lo : lo + max_tokens]
        pieces.append(_Piece(start + window[0][0], start + window[-1][1], len(window)))
        if lo + max_tokens >= len(spans):
            break
    return pieces


def _split_on(regex_positions: list[tuple[int, int]], text: str, max_tokens: int, tok: TokenCounter,
              header: str = "") -> list[_Piece]:
    """Greedily pack consecutive sub-spans; sub-spans that alone are too long become token windows."""
    pieces: list[_Piece] = []
    cur_start = cur_end = None
    cur_tokens = 0
    for s, e in regex_positions:
        n = tok.count_tokens(text[s:e])
        if n > max_tokens:
            if cur_start is not None:
                pieces.append(_Piece(cur_start, cur_end, cur_tokens))
                cur_start = None
            pieces.extend(_token_windows(text, s, e, max_tokens, tok))
            continue
        if cur_start is not None and cur_tokens + n > max_tokens:
            pieces.append(_Piece(cur_start, cur_end, cur_tokens))
            cur_start = None
        if cur_start is None:
            cur_start, cur_tokens = s, 0
        cur_end = e
        cur_tokens += n
    if cur_start is not None:
        pieces.append(_Piece(cur_start, cur_end, cur_tokens))
    if header:
        pieces = [pieces[0]] + [_Piece(p.start, p.end, p.tokens, prefix=header) for p in pieces[1:]]
    return pieces


def _block_pieces(text: str, block: Block, max_tokens: int, tok: TokenCounter) -> list[_Piece]:
    n = tok.count_tokens(text[block.start : block.end])
    if n <= max_tokens:
        return [_Piece(block.start, block.end, n)]
    if block.kind in ("code", "table"):
        lines, pos = [], block.start
        for line in text[block.start : block.end].split("\n"):
            if line.strip():
                lines.append((pos, pos + len(line)))
            pos += len(line) + 1
        header = ""
        if block.kind == "table" and len(lines) >= 2:
            header = text[lines[0][0] : lines[1][1]] + "\n"
        return _split_on(lines, text, max_tokens, tok, header=header)
    sentences, pos = [], block.start
    body = text[block.start : block.end]
    last = 0
    for m in _SENTENCE_END.finditer(body):
        sentences.append((block.start + last, block.start + m.start()))
        last = m.end()
    sentences.append((block.start + last, block.end))
    return _split_on([s for s in sentences if s[1] > s[0]], text, max_tokens, tok)


# -- packing ------------------------------------------------------------------------------------
def _pack(groups: Sequence[Sequence[_Piece]], max_tokens: int) -> list[tuple[int, int, int, str]]:
    """Pack groups (sections) of pieces into (start, end, tokens, prefix) chunks.

    A group starts a new chunk when it does not fit whole into the current one.
    """
    chunks: list[tuple[int, int, int, str]] = []
    cur: list[_Piece] = []
    cur_tokens = 0

    def flush() -> None:
        nonlocal cur, cur_tokens
        if cur:
            chunks.append((cur[0].start, cur[-1].end, cur_tokens, cur[0].prefix))
        cur, cur_tokens = [], 0

    for group in groups:
        total = sum(p.tokens for p in group)
        if cur and cur_tokens + total > max_tokens:
            flush()
        for piece in group:
            if cur and cur_tokens + piece.tokens > max_tokens:
                flush()
            cur.append(piece)
            cur_tokens += piece.tokens
    flush()
    return chunks


def _sections(blocks: list[Block]) -> list[list[Block]]:
    sections: list[list[Block]] = [[]]
    for b in blocks:
        if b.kind == "heading" and sections[-1]:
            sections.append([])
        sections[-1].append(b)
    return [s for s in sections if s]


def _spans(doc: Document, params: ChunkingParams, tok: TokenCounter, blocks: list[Block]):
    text = doc.text
    if params.name == "fixed":
        return [(p.start, p.end, p.tokens, "") for p in _token_windows(
            text, 0, len(text), params.max_tokens, tok, stride=params.max_tokens - params.overlap)]
    if params.name == "heading":
        groups = []
        for sec in _sections(blocks):
            pieces: list[_Piece] = []
            for i, b in enumerate(sec):
                if i == 1 and sec[0].kind == "heading" and len(pieces) == 1:
                    # Glue a heading to what follows it (a chunk holding only a title answers
                    # nothing): the first block gets the budget left after the heading.
                    head = pieces.pop()
                    budget = max(1, params.max_tokens - head.tokens)
                    rest = _block_pieces(text, b, budget, tok)
                    pieces.append(_Piece(head.start, rest[0].end, head.tokens + rest[0].tokens))
                    pieces.extend(rest[1:])
                else:
                    pieces.extend(_block_pieces(text, b, params.max_tokens, tok))
            groups.append(pieces)
        return _pack(groups, params.max_tokens)
    # paragraph: every block its own group, headings included as plain blocks
    groups = [_block_pieces(text, b, params.max_tokens, tok) for b in blocks]
    return _pack(groups, params.max_tokens)


def breadcrumb(doc: Document, blocks: list[Block], offset: int) -> str:
    path = heading_path_at(blocks, offset)
    if path and path[0] == doc.title:
        path = path[1:]
    return " > ".join([doc.title, *path])


def chunk_document(doc: Document, params: ChunkingParams, tok: TokenCounter, key: str = "") -> list[Chunk]:
    """Chunks of one document under ``params``; ``key`` (the strategy id) seeds the chunk ids."""
    blocks = parse_blocks(doc.text)
    out: list[Chunk] = []
    for ordinal, (start, end, n_tokens, prefix) in enumerate(_spans(doc, params, tok, blocks)):
        span_text = doc.text[start:end]
        indexed = prefix + span_text
        if params.breadcrumbs:
            indexed = breadcrumb(doc, blocks, start) + "\n\n" + indexed
        out.append(Chunk(
            chunk_id=Chunk.make_id(key, doc.doc_id, start, end),
            doc_id=doc.doc_id, start=start, end=end, text=span_text,
            indexed_text=indexed, n_tokens=n_tokens, ordinal=ordinal,
        ))
    return out


def chunk_corpus(docs: Iterable[Document], params: ChunkingParams, tok: TokenCounter, key: str = "",
                 progress: bool = False) -> list[Chunk]:
    docs = list(docs)
    it: Iterable[Document] = docs
    if progress:
        from tqdm import tqdm

        it = tqdm(docs, desc=f"chunking ({params.name})", unit="doc")
    return [c for d in it for c in chunk_document(d, params, tok, key)]
