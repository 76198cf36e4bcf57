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

The limit always holds, for every strategy (:func:`_bounded`, the last step): no chunk has more
than ``max_tokens`` tokens, nor more than ``max_tokens * MAX_CHARS_PER_TOKEN`` characters. The
second bound is for text the tokenizer counts as little: WordPiece makes one ``[UNK]`` of a word
longer than 100 characters, so a line with no spaces (sqlite3-doc's keyword_index.html: 61,460
characters) counted 3 tokens and became one chunk that ``golden generate`` sent whole to the LLM.
A span over either bound (a heading longer than the chunk glued to its first block, such a line)
is cut into token windows that respect both, a single over-long token by characters.

``breadcrumbs`` prepends ``Page > Section > Subsection`` (the headings enclosing the chunk's
start) to the indexed/embedded text of every strategy.

Definition lists (``heading`` and ``paragraph``): a *term* block (a line bold as a whole, the
form the HTML converter gives a ``<dt>``: a man page's option, a configuration parameter; see
:mod:`.markdown_blocks`) and the blocks after it up to the next term or heading (its definition)
are one *item*. A term is never split from its definition: it is glued to the definition's first
piece, as a heading is to its first block. An item that fits in ``max_tokens`` is never split:
when it does not fit in what is left of the current chunk, it starts the next one. An item longer
than ``max_tokens`` is split inside the definition like any long block (at sentence ends, code
lines or table rows), and every later piece carries the term (``**-v**``) in front of its
*indexed* text, as a split table carries its header row: a chunk from the middle of an option's
description still says which option it describes. ``fixed`` windows ignore structure, terms too.
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
CHUNKER_VERSION = 2  # 2: definition-list items kept whole
# the character bound of a chunk, per token of max_tokens: WordPiece averages ~4 characters a token
# on English prose and ~3 on code; a chunk of 200 tokens over 2,000 characters holds words the
# tokenizer does not count (see the module). Not a version bump: a chunk changes only where a span
# was over a bound; the demo's chunks (heading 200 and 120, paragraph, fixed) are identical before and
# after (compared by a digest of ids, token counts and indexed texts), and the strategy id also keys
# the demo's shipped vectors and the recorded noise floor
MAX_CHARS_PER_TOKEN = 10


def strategy_key(corpus: str, params: ChunkingParams, model_id: str, language: str = "english") -> str:
    """The ``strategies.strategy_id``: readable prefix + digest of everything that shapes chunks and
    their keyword index (``language``: corpus.language; english, the default, is left out of the
    digest so strategies built before the setting keep their ids)."""
    extra = {} if language == "english" else {"language": language}
    digest = cache_key("strategy", corpus=corpus, chunking=params, model=model_id, chunker=CHUNKER_VERSION, **extra)
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
def _sections(blocks: list[Block]) -> list[list[Block]]:
    sections: list[list[Block]] = [[]]
    for b in blocks:
        if b.kind == "heading" and sections[-1]:
            sections.append([])
        sections[-1].append(b)
    return [s for s in sections if s]


def _glued(text: str, lead: list[_Piece], block: Block, max_tokens: int, tok: TokenCounter) -> list[_Piece]:
    """``block``'s pieces with the ``lead`` pieces (a heading, terms) glued to the first one: a
    chunk holding only a title or an option name answers nothing. The first block gets the budget
    left after the lead."""
    if not lead:
        return _block_pieces(text, block, max_tokens, tok)
    head = sum(p.tokens for p in lead)
    rest = _block_pieces(text, block, max(1, max_tokens - head), tok)
    if not rest:
        return lead
    return [_Piece(lead[0].start, rest[0].end, head + rest[0].tokens, lead[0].prefix), *rest[1:]]


def _units(text: str, blocks: Sequence[Block], max_tokens: int, tok: TokenCounter,
           lead_heading: bool) -> list[list[list[_Piece]]]:
    """The blocks as packing units, per block: a definition item (terms + definition) is one unit
    whose later pieces carry the terms as a prefix; each piece of any other block is a unit of its
    own. With ``lead_heading``, a first heading block is glued to what follows it."""
    units: list[list[list[_Piece]]] = []
    i, n = 0, len(blocks)
    while i < n:
        lead: list[_Piece] = []
        if i == 0 and lead_heading and blocks[0].kind == "heading" and n > 1:
            lead.append(_Piece(blocks[0].start, blocks[0].end, tok.count_tokens(text[blocks[0].start:blocks[0].end])))
            i = 1
        j = i
        while j < n and blocks[j].kind == "term":
            j += 1
        terms = [_Piece(b.start, b.end, tok.count_tokens(text[b.start:b.end])) for b in blocks[i:j]]
        lead_tokens = sum(p.tokens for p in lead + terms)
        if (j == i or j == n or blocks[j].kind == "heading" or lead_tokens >= max_tokens
                or (len(terms) > 1 and lead_tokens > max_tokens // 2)):
            # no term here, or terms with no definition after them: plain blocks (a lead heading
            # is glued to the first of them, as it always was). A run of terms that would leave a
            # definition less than half a chunk (a synopsis spread over ten <dt> lines) sheds its
            # first term as a plain block until the rest leaves room: the last terms, those next
            # to the definition, stay with it
            b = blocks[i]
            pieces = _glued(text, lead, b, max_tokens, tok)
            units.append([[p] for p in pieces])
            i += 1
            continue
        label = "\n".join(text[b.start:b.end] for b in blocks[i:j]) + "\n\n"
        k = j + 1
        while k < n and blocks[k].kind not in ("term", "heading"):
            k += 1
        item = _glued(text, lead + terms, blocks[j], max_tokens, tok)
        for b in blocks[j + 1:k]:
            item.extend(_block_pieces(text, b, max_tokens, tok))
        units.append([[item[0], *(_Piece(p.start, p.end, p.tokens, prefix=p.prefix or label) for p in item[1:])]])
        i = k
    return units


def _pack_units(groups: Sequence[Sequence[Sequence[_Piece]]], max_tokens: int) -> list[tuple[int, int, int, str]]:
    """Pack groups (sections) of units of pieces into (start, end, tokens, prefix) chunks: a group,
    else a unit, starts a new chunk when it does not fit whole into the current one but would fit
    into an empty one; pieces fill chunks greedily."""
    chunks: list[tuple[int, int, int, str]] = []
    cur: list[_Piece] = []
    cur_tokens = 0

    def flush() -> None:
        nonlocal cur, cur_tokens
        if cur:
            chunks.append((cur[0].start, cur[-1].end, cur_tokens, cur[0].prefix))
        cur, cur_tokens = [], 0

    for group in groups:
        total = sum(p.tokens for unit in group for p in unit)
        if cur and cur_tokens + total > max_tokens:
            flush()
        for unit in group:
            size = sum(p.tokens for p in unit)
            if cur and len(unit) > 1 and cur_tokens + size > max_tokens >= size:
                flush()
            for piece in unit:
                if cur and cur_tokens + piece.tokens > max_tokens:
                    flush()
                cur.append(piece)
                cur_tokens += piece.tokens
    flush()
    return chunks


def _spans(doc: Document, params: ChunkingParams, tok: TokenCounter, blocks: list[Block]):
    text = doc.text
    if params.name == "fixed":
        return [(p.start, p.end, p.tokens, "") for p in _token_windows(
            text, 0, len(text), params.max_tokens, tok, stride=params.max_tokens - params.overlap)]
    if params.name == "heading":
        groups = [[u for per_block in _units(text, sec, params.max_tokens, tok, lead_heading=True) for u in per_block]
                  for sec in _sections(blocks)]
        return _pack_units(groups, params.max_tokens)
    # paragraph: every block its own group, headings included as plain blocks; a definition item
    # (terms and their definition) is one group
    groups = _units(text, blocks, params.max_tokens, tok, lead_heading=False)
    return _pack_units(groups, params.max_tokens)


def _bounded(text: str, spans: list[tuple[int, int, int, str]], max_tokens: int,
             tok: TokenCounter) -> list[tuple[int, int, int, str]]:
    """``spans`` with every one over ``max_tokens`` tokens or ``max_tokens * MAX_CHARS_PER_TOKEN``
    characters cut into windows within both (each keeps the span's indexed prefix)."""
    max_chars = max_tokens * MAX_CHARS_PER_TOKEN
    out: list[tuple[int, int, int, str]] = []
    for start, end, n, prefix in spans:
        if n <= max_tokens and end - start <= max_chars:
            out.append((start, end, n, prefix))
            continue
        out += [(s, e, k, prefix) for s, e, k in _hard_windows(text, start, end, max_tokens, max_chars, tok)]
    return out


def _hard_windows(text: str, start: int, end: int, max_tokens: int, max_chars: int,
                  tok: TokenCounter) -> list[tuple[int, int, int]]:
    """Greedy windows of whole tokens of ``text[start:end]``, each at most ``max_tokens`` tokens
    (recounted on the window's own text: a window cut inside a word is tokenized anew) and
    ``max_chars`` characters; a token longer than ``max_chars`` alone is cut every ``max_chars`` (and a
    piece the tokenizer then counts as more than ``max_tokens`` word pieces, into windows of them)."""
    toks = [(start + a, start + b) for a, b in tok.token_spans(text[start:end])]
    out: list[tuple[int, int, int]] = []
    i = 0
    while i < len(toks):
        a, b = toks[i]
        if b - a > max_chars:  # one token (an [UNK] of a long run of letters) longer than a chunk
            for x in range(a, b, max_chars):  # a piece of 100 characters or fewer is word pieces again
                y = min(x + max_chars, b)
                k = tok.count_tokens(text[x:y])
                out += [(x, y, k)] if k <= max_tokens else _hard_windows(text, x, y, max_tokens, max_chars, tok)
            i += 1
            continue
        j = i + 1
        while j < len(toks) and j - i < max_tokens and toks[j][1] - a <= max_chars and toks[j][1] - toks[j][0] <= max_chars:
            j += 1
        k = tok.count_tokens(text[a:toks[j - 1][1]])
        while k > max_tokens and j - 1 > i:
            j -= 1
            k = tok.count_tokens(text[a:toks[j - 1][1]])
        out.append((a, toks[j - 1][1], k))
        i = j
    return out


def breadcrumb(doc: Document, blocks: list[Block], offset: int) -> str:
    path = heading_path_at(blocks, offset)
    if path and path[0] == doc.title:
        path = path[1:]
    return " > ".join([doc.title, *path])


def chunk_document(doc: Document, params: ChunkingParams, tok: TokenCounter, key: str = "") -> list[Chunk]:
    """Chunks of one document under ``params``; ``key`` (the strategy id) seeds the chunk ids."""
    blocks = parse_blocks(doc.text)
    out: list[Chunk] = []
    spans = _bounded(doc.text, _spans(doc, params, tok, blocks), params.max_tokens, tok)
    for ordinal, (start, end, n_tokens, prefix) in enumerate(spans):
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
