"""DocBook-generated HTML (the PostgreSQL manual's pages; any HTML page) as Markdown: the rules of
``rag-exp corpus import-html`` (:mod:`.html_import`) and of loading an ``.html`` file (:mod:`.convert`).

Conversion rules (:func:`html_to_markdown`):

* ``div.navheader``, ``div.navfooter``, tables of contents (``div.toc``), index anchors
  (``a.indexterm``), images and rules are dropped.
* The page title is the single ``#`` heading at the top. Other headings get their level from how
  deeply their section ``div`` (``sect1``..``sect5``, ``refsect1``..``refsect3``,
  ``refsynopsisdiv``, ``chapter``, ...) is nested below the title's, clamped to ``##``..``######``.
* ``pre`` blocks and ``div.literallayout`` become fenced code blocks holding the text as shown.
* Tables become GitHub pipe tables, one row per line. Cell text is whitespace-collapsed, ``|`` is
  escaped, several paragraphs in a cell are joined with ``<br>``. A cell with ``colspan`` is
  followed by empty cells (so a row spanning all columns has its text in the first cell); a
  cell with ``rowspan`` is repeated in the rows it spans. Callout lists (a layout table) become
  paragraphs.
* Definition lists: each term is a bold line of its own, followed by the description blocks.
* Admonitions (note, tip, warning, caution, important) become block quotes led by the bold label.
* ``code``-like elements become backtick spans; ``em`` becomes ``*...*``, ``strong`` ``**...**``;
  links keep their text (external links become ``[text](url)``).
* Non-breaking spaces become spaces; no line has trailing whitespace; blocks are separated by one
  blank line and the text ends with exactly one newline.
"""

from __future__ import annotations

import re

from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.element import Comment, Declaration, Doctype, ProcessingInstruction

__all__ = ["collapse", "html_to_markdown"]

_SECTION_CLASSES = frozenset(
    {
        "book", "part", "partintro", "reference", "preface", "chapter", "appendix", "article",
        "sect1", "sect2", "sect3", "sect4", "sect5", "section", "simplesect",
        "refentry", "refsynopsisdiv", "refsect1", "refsect2", "refsect3",
        "bibliography", "bibliodiv", "glossary", "glossdiv", "index", "indexdiv", "colophon",
    }
)
_ADMONITIONS = ("note", "tip", "warning", "caution", "important")
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_CODE_TAGS = frozenset({"code", "tt", "kbd", "samp", "var"})
_EM_TAGS = frozenset({"em", "i", "cite", "dfn"})
_STRONG_TAGS = frozenset({"strong", "b"})
_DROP_TAGS = frozenset(
    {"script", "style", "head", "title", "meta", "link", "object", "img", "svg", "map",
     "colgroup", "col", "hr"}
)
_BLOCK_TAGS = frozenset(
    {"p", "div", "pre", "ul", "ol", "dl", "dt", "dd", "li", "table", "blockquote", "hr",
     "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "figure", "address",
     "thead", "tbody", "tfoot", "tr", "td", "th", "center", "form", "fieldset", "body", "html"}
)
_DROP_DIVS = frozenset({"navheader", "navfooter", "toc", "mediaobject", "indexdiv"})
_WS = re.compile(r"\s+")
_NBSP = "\u00a0\u2007\u202f"
_NBSP_TABLE = str.maketrans(
    {c: " " for c in _NBSP} | {"\u00ad": None, "\u200b": None, "\x02": None, "\x03": None}
)
_MD_LINE_START = re.compile(r"^(#{1,6}(?:\s|$)|[-+*](?:\s|$)|\d{1,9}[.)](?:\s|$)|>|=+\s*$)")


def _classes(tag: Tag) -> list[str]:
    cls = tag.get("class")
    if cls is None:
        return []
    if isinstance(cls, str):
        return cls.split()
    return list(cls)


def _has_class(tag: Tag, *names: str) -> bool:
    cls = _classes(tag)
    return any(n in cls for n in names)


def _is_ignorable(node: object) -> bool:
    return isinstance(node, (Comment, Declaration, Doctype, ProcessingInstruction))


def collapse(text: str) -> str:
    """Every whitespace run as one space, the ends stripped (a title line, a table cell)."""
    return _WS.sub(" ", text).strip()


# While a paragraph is assembled, code text is held between these two markers, so that
# adjacent code elements (``<code>\\</code><code>digits</code>``) merge into one span instead
# of producing backtick runs that Markdown reads differently.
_CODE_OPEN, _CODE_CLOSE = "\x02", "\x03"
_CODE_MARKED = re.compile(_CODE_OPEN + "(.*?)" + _CODE_CLOSE, re.S)


def _finish_inline(text: str) -> str:
    """Collapse whitespace and turn marked code text into backtick spans."""
    text = collapse(text).replace(_CODE_CLOSE + _CODE_OPEN, "")
    return _CODE_MARKED.sub(lambda m: _code_span(collapse(m.group(1))), text)


def _code_span(text: str) -> str:
    """A backtick code span for ``text`` (whitespace already collapsed)."""
    if not text:
        return ""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    if longest or text.startswith(" ") or text.endswith(" "):
        return f"{fence} {text} {fence}"
    return f"{fence}{text}{fence}"


def _wrap(inner: str, marker: str) -> str:
    """Wrap ``inner`` in an emphasis marker, keeping outer whitespace outside the markers."""
    if not inner.strip():
        return inner
    lead = " " if inner[:1].isspace() else ""
    trail = " " if inner[-1:].isspace() else ""
    return f"{lead}{marker}{inner.strip()}{marker}{trail}"


def _pre_text(tag: Tag) -> str:
    """Text of a ``pre`` element as displayed: tags dropped, lines right-stripped."""
    parts: list[str] = []
    for node in tag.descendants:
        if isinstance(node, NavigableString) and not _is_ignorable(node):
            parts.append(str(node))
        elif isinstance(node, Tag) and node.name == "br":
            parts.append("\n")
    text = "".join(parts).translate(_NBSP_TABLE).replace("\r\n", "\n").replace("\r", "\n")
    if text.startswith("\n"):  # HTML drops one newline right after <pre>
        text = text[1:]
    return _trim_lines(text)


def _trim_lines(text: str) -> str:
    """Each line without trailing spaces, blank lines at both ends dropped."""
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def _literallayout_text(tag: Tag) -> str:
    """Text of a ``div.literallayout``: lines end at ``<br>``; source newlines are noise."""
    parts: list[str] = []
    for node in tag.descendants:
        if isinstance(node, NavigableString) and not _is_ignorable(node):
            parts.append(str(node).replace("\n", ""))
        elif isinstance(node, Tag) and node.name in ("br", "p") and node is not tag:
            parts.append("\n")
    text = "".join(parts).translate(_NBSP_TABLE)
    return _trim_lines(text)


def _fence(code: str, info: str = "") -> str:
    longest = max((len(m) for m in re.findall(r"^\s*(`{3,})", code, re.M)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{code}\n{fence}" if code else f"{fence}{info}\n{fence}"


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else "" for line in text.split("\n"))


def _escape_paragraph(text: str) -> str:
    """Keep a paragraph from being read as a heading, list item or quote."""
    if _MD_LINE_START.match(text):
        return "\\" + text
    return text


class _Converter:
    def __init__(self, title_node: Tag | None, base_depth: int) -> None:
        self.title_node = title_node
        self.base_depth = base_depth
        self.in_cell = False  # table cells drop bold: a cell is a label, not emphasis

    # ---- inline ------------------------------------------------------------------------

    def inline(self, node: object) -> str:
        if isinstance(node, NavigableString):
            if _is_ignorable(node):
                return ""
            return _WS.sub(" ", str(node).translate(_NBSP_TABLE))
        if not isinstance(node, Tag):
            return ""
        name = node.name
        if name in _DROP_TAGS or (name == "a" and _has_class(node, "indexterm")):
            return ""
        if name == "br":
            return " "
        if name in _CODE_TAGS:
            code = collapse(node.get_text().translate(_NBSP_TABLE))
            return _CODE_OPEN + code + _CODE_CLOSE if code else ""
        if name == "pre":  # a pre in an inline context (e.g. a table cell)
            return " " + _CODE_OPEN + collapse(_pre_text(node)) + _CODE_CLOSE + " "
        inner = "".join(self.inline(child) for child in node.children)
        if name in _EM_TAGS:
            if _has_class(node, "replaceable", "parameter") or node.find(_CODE_TAGS):
                return inner  # already a code span, or a placeholder name
            return _wrap(inner, "*")
        if name in _STRONG_TAGS:
            if self.in_cell or "**" in inner or node.find_parent("dt") is not None:
                return inner
            return _wrap(inner, "**")
        if name == "a":
            href = str(node.get("href") or "")
            text = inner.strip()
            if text and re.match(r"^(https?|ftp)://", href) and text != href:
                lead = " " if inner[:1].isspace() else ""
                trail = " " if inner[-1:].isspace() else ""
                return f"{lead}[{text}]({href}){trail}"
            return inner
        if name == "sup" and not _has_class(node, "footnote", "para"):  # 2<sup>32</sup>
            return "^" + inner.strip() if inner.strip() else ""
        if name in _BLOCK_TAGS:
            return " " + inner + " "
        return inner

    def inline_text(self, node: Tag) -> str:
        return _finish_inline("".join(self.inline(child) for child in node.children))

    # ---- blocks ------------------------------------------------------------------------

    def blocks(self, node: Tag) -> list[str]:
        """Render the children of a container element as a list of Markdown blocks."""
        out: list[str] = []
        buf: list[str] = []

        def flush() -> None:
            if buf:
                text = _finish_inline("".join(buf))
                buf.clear()
                if text:
                    out.append(_escape_paragraph(text))

        for child in node.children:
            if isinstance(child, Tag) and self._is_block(child):
                flush()
                out.extend(self.block(child))
            else:
                buf.append(self.inline(child))
        flush()
        return out

    @staticmethod
    def _is_block(tag: Tag) -> bool:
        return tag.name in _BLOCK_TAGS

    def block(self, tag: Tag) -> list[str]:
        name = tag.name
        if name in _DROP_TAGS:
            return []
        if name in _HEADINGS:
            return self.heading(tag)
        if name == "pre":
            return [_fence(_pre_text(tag))]
        if name in ("ul", "ol"):
            return self.list_block(tag)
        if name == "dl":
            return self.dl_block(tag)
        if name == "table":
            return self.table_block(tag)
        if name == "blockquote":
            return self.quote(self.blocks(tag))
        if name == "div":
            classes = _classes(tag)
            if any(c in _DROP_DIVS for c in classes):
                return []
            if "literallayout" in classes:
                text = _literallayout_text(tag)
                return [_fence(text)] if text else []
            if "calloutlist" in classes:
                return self.calloutlist(tag)
            for kind in _ADMONITIONS:
                if kind in classes:
                    return self.admonition(tag, kind)
        # Other containers (div, p, stray li/dd/td outside their list or table): their content.
        return self.blocks(tag)

    def heading(self, tag: Tag) -> list[str]:
        text = self.inline_text(tag)
        if not text:
            return []
        if tag is self.title_node:
            return ["# " + text]
        depth = sum(1 for p in tag.parents if isinstance(p, Tag) and _is_section(p))
        level = min(6, max(2, 1 + depth - self.base_depth))
        return ["#" * level + " " + text]

    def quote(self, blocks: list[str]) -> list[str]:
        if not blocks:
            return []
        body = "\n\n".join(blocks)
        return ["\n".join("> " + line if line else ">" for line in body.split("\n"))]

    def admonition(self, tag: Tag, kind: str) -> list[str]:
        label = kind.capitalize()
        title = tag.find(_HEADINGS, recursive=False)
        if title is not None:
            label = self.inline_text(title) or label
            title.extract()
        return self.quote([f"**{label}**", *self.blocks(tag)])

    def calloutlist(self, tag: Tag) -> list[str]:
        out: list[str] = []
        for tr in tag.find_all("tr"):
            cells = [self.inline_text(td) for td in tr.find_all(["td", "th"], recursive=False)]
            text = " ".join(c for c in cells if c)
            if text:
                out.append(_escape_paragraph(text))
        return out

    def list_block(self, tag: Tag) -> list[str]:
        ordered = tag.name == "ol"
        try:
            number = int(str(tag.get("start", "1")))
        except ValueError:
            number = 1
        items: list[str] = []
        loose = False
        for li in tag.find_all("li", recursive=False):
            marker = f"{number}. " if ordered else "- "
            number += 1
            pad = " " * len(marker)
            blocks = self.blocks(li)
            if len(blocks) > 1:
                loose = True
            if not blocks:
                items.append(marker.rstrip())
                continue
            body = "\n\n".join(blocks)
            lines = body.split("\n")
            first = marker + lines[0]
            rest = _indent("\n".join(lines[1:]), pad) if len(lines) > 1 else ""
            items.append(first + ("\n" + rest if rest or len(lines) > 1 else ""))
        if not items:
            return []
        return ["\n\n".join(items) if loose else "\n".join(items)]

    def dl_block(self, tag: Tag) -> list[str]:
        out: list[str] = []
        for child in tag.children:
            if not isinstance(child, Tag):
                continue
            if child.name == "dt":
                term = self.inline_text(child).replace("**", "")
                if term:
                    out.append(_wrap(term, "**"))
            elif child.name == "dd":
                out.extend(self.blocks(child))
            else:
                out.extend(self.block(child) if self._is_block(child) else [])
        return out

    # ---- tables ------------------------------------------------------------------------

    def cell_text(self, cell: Tag) -> str:
        outer, self.in_cell = self.in_cell, True
        try:
            parts = self.blocks(cell)
        finally:
            self.in_cell = outer
        text = " <br> ".join(collapse(p.replace("\n", " ")) for p in parts if p.strip())
        text = text.replace("<br> <br>", "<br>")
        return text.replace("|", "\\|")

    def table_block(self, table: Tag) -> list[str]:
        rows = [tr for tr in table.find_all("tr") if tr.find_parent("table") is table]
        if not rows:
            return []
        grid: list[list[str]] = []
        pending: dict[int, tuple[str, int]] = {}  # column -> (text, rows left) from rowspan
        for tr in rows:
            row: list[str] = []
            col = 0
            cells = tr.find_all(["td", "th"], recursive=False)
            queue = list(cells)
            while queue or col in pending:
                if col in pending:
                    text, left = pending[col]
                    row.append(text)
                    if left <= 1:
                        del pending[col]
                    else:
                        pending[col] = (text, left - 1)
                    col += 1
                    continue
                cell = queue.pop(0)
                text = self.cell_text(cell)
                colspan = _int_attr(cell, "colspan")
                rowspan = _int_attr(cell, "rowspan")
                row.append(text)
                if rowspan > 1:
                    pending[col] = (text, rowspan - 1)
                col += 1
                for _ in range(colspan - 1):
                    row.append("")
                    col += 1
            grid.append(row)
        width = max(len(r) for r in grid)
        if width == 0:
            return []
        grid = [r + [""] * (width - len(r)) for r in grid]
        grid = [r for r in grid if any(c for c in r)] or grid[:1]
        # GitHub tables need a header row: the first <thead> row, else the first row.
        header, body = grid[0], grid[1:]
        lines = [_row(header), "| " + " | ".join("---" for _ in range(width)) + " |"]
        lines.extend(_row(r) for r in body)
        return ["\n".join(lines)]


def _row(cells: list[str]) -> str:
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"


def _int_attr(tag: Tag, name: str) -> int:
    try:
        return max(1, int(str(tag.get(name, "1")).strip()))
    except ValueError:
        return 1


def _is_section(tag: Tag) -> bool:
    return tag.name in ("div", "section") and any(c in _SECTION_CLASSES for c in _classes(tag))


def _find_title_heading(root: Tag) -> Tag | None:
    for h in root.find_all(_HEADINGS):
        if any(
            isinstance(p, Tag) and p.name == "div" and any(k in _classes(p) for k in _ADMONITIONS)
            for p in h.parents
        ):
            continue
        if collapse(h.get_text()):
            return h
    return None


def html_to_markdown(html: str) -> tuple[str, str]:
    """Convert one DocBook HTML page to ``(title, markdown_text)``.

    ``title`` is the plain text of the page's first heading (falling back to ``<title>``);
    ``markdown_text`` starts with ``# <title>`` and ends with a single newline. The result is
    deterministic. Returns ``(title, "")`` when the page has no text besides its title.
    """
    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.select("div.navheader, div.navfooter, div.toc, a.indexterm, script, style"):
        tag.decompose()
    root: Tag = soup.body or soup
    head_title = soup.title.get_text() if soup.title else ""
    title_node = _find_title_heading(root)
    if title_node is not None:
        title = collapse(title_node.get_text().translate(_NBSP_TABLE))
        base_depth = sum(1 for p in title_node.parents if isinstance(p, Tag) and _is_section(p))
    else:
        title = collapse(head_title.translate(_NBSP_TABLE))
        base_depth = 0
    conv = _Converter(title_node, base_depth)
    blocks = [b for b in conv.blocks(root) if b.strip()]
    if title_node is None or not blocks or not blocks[0].startswith("# "):
        top = "# " + (conv.inline_text(title_node) if title_node is not None else title)
        blocks = [b for b in blocks if b != top]
        if title:
            blocks.insert(0, top)
    body_blocks = blocks[1:] if blocks and blocks[0].startswith("# ") else blocks
    if not body_blocks:
        return title, ""
    text = "\n\n".join(blocks)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"
    return title, text
