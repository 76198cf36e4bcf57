"""Split Markdown into blocks with exact char spans: headings, code fences, tables, paragraphs,
and definition-list terms.

A *term* is a paragraph of one line that is bold as a whole (``**AUTO_CD** (-J)`` is not;
``**`shared_buffers` (`integer`)**`` is): the form :mod:`rag_experiments.corpus.html_markdown` gives
each ``<dt>`` of an HTML definition list (a man page's option list, a configuration parameter),
the blocks after it being the ``<dd>``. A bold line standing alone as a pseudo-heading is read the
same way, which is what the chunker wants too: it belongs with what follows it.

Hand-written rather than a Markdown library because we need exact source offsets for every
block and a guarantee that fences and tables are atomic; parsers such as markdown-it give
line maps but normalise text, and their tokens do not round-trip to the source bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")  # fences may be indented inside list items
# one line, bold as a whole: "**term**", no other "**" inside, at most 300 characters
_TERM = re.compile(r"^\*\*(?=\S)(?:(?!\*\*).){1,296}(?<=\S)\*\*$")


@dataclass(frozen=True)
class Block:
    kind: str  # heading | code | table | term | para
    start: int
    end: int  # exclusive; excludes the trailing newline
    level: int = 0  # heading level
    title: str = ""  # heading text


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line, end excluding the newline."""
    out, pos = [], 0
    for line in text.split("\n"):
        out.append((pos, pos + len(line)))
        pos += len(line) + 1
    return out


def parse_blocks(text: str) -> list[Block]:
    lines = _lines(text)
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        s, e = lines[i]
        line = text[s:e]
        if not line.strip():
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            j = i + 1
            while j < len(lines) and not text[lines[j][0] : lines[j][1]].lstrip().startswith(fence.group(1)):
                j += 1
            j = min(j, len(lines) - 1)  # unterminated fence: runs to the end of the text
            blocks.append(Block("code", s, lines[j][1]))
            i = j + 1
            continue
        heading = _HEADING.match(line)
        if heading:
            blocks.append(Block("heading", s, e, level=len(heading.group(1)), title=heading.group(2).strip()))
            i += 1
            continue
        if line.lstrip().startswith("|"):
            j = i
            while j + 1 < len(lines) and text[lines[j + 1][0] : lines[j + 1][1]].lstrip().startswith("|"):
                j += 1
            blocks.append(Block("table", s, lines[j][1]))
            i = j + 1
            continue
        j = i
        while j + 1 < len(lines):
            nxt = text[lines[j + 1][0] : lines[j + 1][1]]
            if not nxt.strip() or _FENCE.match(nxt) or _HEADING.match(nxt) or nxt.lstrip().startswith("|"):
                break
            j += 1
        kind = "term" if j == i and _TERM.match(line) else "para"
        blocks.append(Block(kind, s, lines[j][1]))
        i = j + 1
    return blocks


def heading_path_at(blocks: list[Block], offset: int) -> list[str]:
    """Titles of the headings enclosing ``offset`` (outermost first)."""
    path: list[tuple[int, str]] = []
    for b in blocks:
        if b.start > offset:
            break
        if b.kind == "heading":
            while path and path[-1][0] >= b.level:
                path.pop()
            path.append((b.level, b.title))
    return [t for _, t in path]
