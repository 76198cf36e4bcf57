"""Turn a PDF, DOCX, PPTX or HTML file into the text every golden span indexes into.

Which converter, per format, and why (measured: ``tools/measure_converters.py``, which renders
demo-corpus pages with known words into each format, plus a real pdfTeX PDF whose HTML edition
gives the reference words, and scores word F1, reading order, the share of sentences found
verbatim (what exact anchoring of a golden quote needs), headings kept, and seconds per file):

* **PDF: pypdf** (pure Python, page by page). Word F1 1.000 and every sentence verbatim on the
  rendered pages; tied best on the real PDF (word F1 0.947, 81 % of sentences verbatim; the rest
  cross a hyphenated line break or a running head). markitdown 0.1.9 sends a PDF through
  pdfplumber's "form" detection first: on the real PDF that glued the words of every line together
  (word F1 0.28, 0.7 % of sentences found). pdfminer.six gives pypdf's words in a worse order
  (0.918) at 2-3x the time; pypdfium2 is 10-18x faster but dropped the words of table cells
  (word F1 0.978 on the rendered pages). pypdf also gives what the metadata needs: page
  boundaries, the outline (bookmarks), and decryption of PDFs locked only by an owner password
  (AES needs ``cryptography``). Runs of spaces inside a line (justified text) become one space;
  a word hyphenated at a line end stays as printed (``man-`` / ``agement``): undoing it would also
  join real hyphens, so a quote across such a break anchors by the fuzzy rule.
* **DOCX: mammoth's HTML, then the HTML rules below.** markitdown 0.1.9 failed on every DOCX that
  python-docx writes ("Could not find the body element": its pre-processing rewrites the XML);
  mammoth's own Markdown escapes ``work_mem`` as ``work\\_mem`` (a quote no longer matches);
  python-docx paragraphs lose every table (word F1 0.966). mammoth's HTML keeps Word's Heading
  styles, lists and tables, and html_markdown turns it into Markdown that escapes nothing: word F1
  1.000, every sentence and heading kept. It is the slowest converter (about 1 s a file: mammoth
  parses the package's XML with minidom); the cache makes that a one-time cost.
* **PPTX: python-pptx, walked here**: one ``# title`` per slide, text frames and tables top to
  bottom, speaker notes. Word F1 1.000 (markitdown 0.983: it writes ``<!-- Slide number: N -->``
  comments into the text, words a quote or a keyword search then meets); here slide numbers
  are metadata (page offsets).
* **HTML: html_markdown.html_to_markdown**, the rules of ``rag-exp corpus import-html``: word F1
  1.000 and every sentence verbatim, where markitdown's escaping left 88 % findable. A page loaded
  directly and the same page imported first give the same text, so spans carry over.

The result's text is tidied the same way for every format (line ends ``\\n``, control characters
and NUL dropped since PostgreSQL text cannot hold NUL, trailing spaces dropped, at most one blank
line, one final newline), so what is stored is exactly what spans index into.

A DOCX or PPTX is a zip archive, and a small one can expand to gigabytes (a zip bomb: 200 MB of
zeros deflate to 200 KB; mammoth took 81 s and 662 MiB for a 20 MB document.xml). What it
declares is read from the zip's central directory and bounded before anything decompresses a byte
(:func:`_check_archive`): at most ``MAX_MEMBERS`` members, ``MAX_UNZIPPED_BYTES`` in all,
``MAX_XML_BYTES`` of XML (what the converters parse), and no member over ``RATIO_GRACE_BYTES``
expanding more than ``MAX_RATIO`` times (Apache POI's zip-bomb rule: real Office parts deflate
2-40x, a repeated paragraph 200x at most, a run of zeros 1,000x). Every member is then read once in
chunks, never past its declared size (a member that lies about its size ends in its CRC check).

A file that cannot be converted raises :class:`ConversionError` with a short reason for the
report ("encrypted (needs a password)", "no text layer (...)", "corrupt PDF: ...", "zip bomb?
..."); the loader names the file, skips it and counts it. Nothing here raises anything else for
bad input.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from .boundary import MAX_FILE_BYTES  # the one size limit, every format (pypdf reads a whole file into memory)

__all__ = [
    "CONVERTED_SUFFIXES",
    "ConversionError",
    "Converted",
    "conversion_code_digest",
    "convert_bytes",
    "converter_id",
    "markdown_headings",
    "tidy",
]

# what a DOCX / PPTX (a zip archive) may declare it expands to: see the module docstring
MAX_MEMBERS = 10_000
MAX_UNZIPPED_BYTES = 256 * 2**20
MAX_XML_BYTES = 64 * 2**20  # mammoth: ~4 s and ~33 MiB per MB of XML (measured at 5 and 20 MB)
MAX_RATIO = 100
RATIO_GRACE_BYTES = 2**20


class ConversionError(Exception):
    """A file this module cannot turn into text; ``reason`` is one short line for the report."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Converted:
    """One converted file: the text and what the converter knew about its structure."""

    text: str
    title: str | None
    converter: str  # "pypdf 7.1.1": the package that read the file, and its version
    pages: tuple[int, ...] = ()  # start offset in ``text`` of page (PDF) / slide (PPTX) 1, 2, ...
    headings: tuple[tuple[int, int, str], ...] = field(default=())  # (offset, level, title)

    def to_json(self) -> dict:
        return {"text": self.text, "title": self.title, "converter": self.converter,
                "pages": list(self.pages), "headings": [list(h) for h in self.headings]}

    @classmethod
    def from_json(cls, d: dict) -> Converted:
        return cls(text=d["text"], title=d["title"], converter=d["converter"], pages=tuple(d["pages"]),
                   headings=tuple((int(o), int(lv), str(t)) for o, lv, t in d["headings"]))


# --------------------------------------------------------------------------------------------
# text tidying, shared by every format
# --------------------------------------------------------------------------------------------

# C0 controls but tab and newline, DEL, C1 controls: never text a reader sees (a PDF's form feed
# or NUL padding). Removed, not replaced: a replacement would be a character no quote holds.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_BLANK_RUN = re.compile(r"\n{3,}")


def tidy(text: str) -> str:
    """The stored form of converted text: see the module docstring. Empty when no text is left."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x0c", "\n")
    text = _CONTROL.sub("", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = _BLANK_RUN.sub("\n\n", text).strip("\n")
    return text + "\n" if text.strip() else ""


def _join(parts: list[str]) -> tuple[str, tuple[int, ...]]:
    """Pages (already tidied) joined by one blank line, and the start offset of each. An empty
    page starts where the next text starts, so :meth:`SourceFile.page_at` never lands on it."""
    text, starts = "", []
    for part in parts:
        if part and text:
            text += "\n"  # every tidied part ends with one newline: one more makes a blank line
        starts.append(len(text))
        text += part
    return text, tuple(starts)


_FENCE = re.compile(r"^(`{3,}|~{3,})")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")


def markdown_headings(text: str) -> tuple[tuple[int, int, str], ...]:
    """``(offset, level, title)`` of each ATX heading line outside fenced code blocks."""
    out: list[tuple[int, int, str]] = []
    fence: str | None = None
    offset = 0
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)[0]
            elif line.startswith(fence * 3):
                fence = None
        elif fence is None:
            h = _HEADING.match(line)
            if h:
                out.append((offset, len(h.group(1)), h.group(2)))
        offset += len(line) + 1
    return tuple(out)


def _short(exc: BaseException) -> str:
    msg = " ".join(str(exc).split()) or type(exc).__name__
    return msg if len(msg) <= 120 else msg[:117] + "..."


@contextmanager
def _quiet(*loggers: str):
    """pypdf and pdfminer log every repaired xref at WARNING; without logging configured those
    reach stderr one line each. A file the converter repaired is fine; one it cannot read raises."""
    saved = [(logging.getLogger(n), logging.getLogger(n).level) for n in loggers]
    for lg, _ in saved:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in saved:
            lg.setLevel(level)


# --------------------------------------------------------------------------------------------
# PDF: pypdf
# --------------------------------------------------------------------------------------------


# a justified line (word spacing stretched) comes out of pypdf with two or three spaces between
# words; a quote has one. Runs inside a line only: indentation at a line's start is kept.
_SPACE_RUN = re.compile(r"(?<=\S) {2,}(?=\S)")


def _pdf(data: bytes) -> Converted:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    if b"%PDF-" not in data[:1024]:
        raise ConversionError("not a PDF (no %PDF- header)")
    with _quiet("pypdf"):
        try:
            reader = PdfReader(io.BytesIO(data))
            if reader.is_encrypted:
                try:
                    # an owner password alone (no printing, no copying) still opens with ""
                    if not reader.decrypt(""):
                        raise ConversionError("encrypted (needs a password to open); save an unlocked copy")
                except DependencyError:
                    raise ConversionError("encrypted with AES; pip install cryptography to read it") from None
                except FileNotDecryptedError:
                    raise ConversionError("encrypted (needs a password to open); save an unlocked copy") from None
            if not reader.pages:
                raise ConversionError("PDF has no pages")
            pages = [tidy(_SPACE_RUN.sub(" ", page.extract_text() or "")) for page in reader.pages]
            title = _pdf_title(reader)
            text, starts = _join(pages)
            headings = _pdf_outline(reader, pages, starts) if text else ()
        except ConversionError:
            raise
        except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError,
                OSError, AssertionError, ZeroDivisionError) as exc:  # what pypdf raises for a damaged file
            raise ConversionError(f"corrupt PDF ({type(exc).__name__}: {_short(exc)})") from None
    if not text:
        raise ConversionError(f"no text layer in {len(pages)} page(s): a scan or images only? "
                              "run OCR first (e.g. ocrmypdf)")
    return Converted(text=text, title=title, converter=converter_id("pypdf"), pages=starts, headings=headings)


def _pdf_title(reader) -> str | None:
    try:
        meta = reader.metadata
        title = str(meta.title).strip() if meta is not None and meta.title else ""
    except Exception:  # a damaged info dictionary: the title then comes from the file name
        title = ""
    return " ".join(title.split()) or None


def _pdf_outline(reader, pages: list[str], starts: tuple[int, ...]) -> tuple[tuple[int, int, str], ...]:
    """The bookmarks as ``(offset, level, title)``: at the title's first occurrence on its page
    (whitespace-insensitive), else at the page's start. A damaged outline yields no headings."""
    out: list[tuple[int, int, str]] = []

    def walk(items, level: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, level + 1)
                continue
            title = " ".join(str(getattr(item, "title", "") or "").split())
            try:
                n = reader.get_destination_page_number(item)
            except Exception:
                continue
            if not title or n is None or not 0 <= n < len(pages):
                continue
            out.append((starts[n] + _find_loose(pages[n], title), level, title))

    try:
        walk(reader.outline, 1)
    except Exception:
        return ()
    return tuple(sorted(out))


def _find_loose(text: str, needle: str) -> int:
    """Offset of ``needle`` in ``text`` with any run of whitespace matching any other; 0 if absent."""
    pattern = r"\s+".join(re.escape(w) for w in needle.split())
    m = re.search(pattern, text) if pattern else None
    return m.start() if m else 0


# --------------------------------------------------------------------------------------------
# DOCX: mammoth -> HTML -> html_markdown's Markdown
# --------------------------------------------------------------------------------------------

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def _open_ooxml(data: bytes, kind: str) -> zipfile.ZipFile:
    """The file as a zip archive, or a ConversionError saying what it is instead."""
    if data.startswith(_OLE_MAGIC):
        # Office writes a password-protected .docx/.pptx as an OLE container (so do Word 97-2003)
        raise ConversionError(f"encrypted, or an old binary Office file named .{kind}: "
                              f"save it as .{kind} without a password")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))  # reads the central directory only
        _check_archive(zf, kind)
        # every member read once: a truncated archive fails here, not deep in a parser
        _read_members(zf)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, NotImplementedError) as exc:
        raise ConversionError(f"corrupt {kind.upper()} (not a readable zip archive: {_short(exc)})") from None
    return zf


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n < 10**8 else f"{n / 1e6:,.0f} MB"


def _check_archive(zf: zipfile.ZipFile, kind: str) -> None:
    """Refuse an archive whose central directory declares more than the bounds (module docstring)
    before any member is decompressed."""
    infos = zf.infolist()
    what = f"zip bomb? {kind.upper()} refused before decompressing:"
    if len(infos) > MAX_MEMBERS:
        raise ConversionError(f"{what} {len(infos):,} members (the limit is {MAX_MEMBERS:,})")
    for info in infos:
        if info.file_size > RATIO_GRACE_BYTES and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise ConversionError(
                f"{what} {info.filename} expands {info.file_size / max(info.compress_size, 1):,.0f}x "
                f"({_mb(info.compress_size)} to {_mb(info.file_size)}; the limit is {MAX_RATIO}x "
                f"for a member over {RATIO_GRACE_BYTES // 2**20} MiB)")
    total = sum(i.file_size for i in infos)
    if total > MAX_UNZIPPED_BYTES:
        raise ConversionError(f"{what} {len(infos):,} members expand to {_mb(total)} "
                              f"(the limit is {MAX_UNZIPPED_BYTES // 2**20} MiB)")
    xml = sum(i.file_size for i in infos if i.filename.lower().endswith((".xml", ".rels")))
    if xml > MAX_XML_BYTES:
        raise ConversionError(f"{what} its XML parts expand to {_mb(xml)} (the limit is "
                              f"{MAX_XML_BYTES // 2**20} MiB, minutes of conversion); split the document")


def _read_members(zf: zipfile.ZipFile) -> None:
    """Read every member in 1 MiB chunks, refusing one that yields more than it declared (the
    bounds above trust the declared sizes; zipfile itself stops there and checks the CRC)."""
    for info in zf.infolist():
        if info.is_dir():
            continue
        left = info.file_size
        with zf.open(info) as fh:
            while chunk := fh.read(2**20):
                left -= len(chunk)
                if left < 0:
                    raise ConversionError(f"zip bomb? {info.filename} expands past the "
                                          f"{info.file_size:,} bytes it declares")


def _ooxml_title(zf: zipfile.ZipFile) -> str | None:
    """``dc:title`` of docProps/core.xml (what Word and PowerPoint show as the title)."""
    try:
        root = ET.fromstring(zf.read("docProps/core.xml"))
    except Exception:
        return None
    node = root.find("{http://purl.org/dc/elements/1.1/}title")
    title = " ".join((node.text or "").split()) if node is not None else ""
    return title or None


def _docx(data: bytes) -> Converted:
    import mammoth

    from .html_markdown import html_to_markdown

    zf = _open_ooxml(data, "docx")
    if "word/document.xml" not in zf.namelist():
        raise ConversionError("corrupt DOCX (no word/document.xml: not a Word document?)")
    try:
        html = mammoth.convert_to_html(io.BytesIO(data)).value
        head_title, markdown = html_to_markdown(f"<html><body>{html}</body></html>")
    except Exception as exc:
        raise ConversionError(f"corrupt DOCX ({type(exc).__name__}: {_short(exc)})") from None
    text = tidy(markdown)
    if not text:
        raise ConversionError("no text (an empty document, or only images)")
    return Converted(text=text, title=_ooxml_title(zf) or head_title or None,
                     converter=converter_id("mammoth"), headings=markdown_headings(text))


# --------------------------------------------------------------------------------------------
# PPTX: python-pptx, one section per slide
# --------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _shape_blocks(shape) -> list[str]:
    """Text of one shape as Markdown blocks: a text frame's paragraphs (one line each), a table
    as a pipe table, a group's members in reading position."""
    if shape.shape_type is not None and getattr(shape, "shapes", None) is not None:  # a group
        out: list[str] = []
        for member in _reading_order(shape.shapes):
            out += _shape_blocks(member)
        return out
    if getattr(shape, "has_table", False) and shape.has_table:
        rows = [[_cell(c.text) for c in row.cells] for row in shape.table.rows]
        rows = [r for r in rows if any(r)]
        if not rows:
            return []
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + "|".join(" --- " for _ in rows[0]) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        return ["\n".join(lines)]
    if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        lines = [" ".join(p.text.split()) for p in shape.text_frame.paragraphs]
        text = "\n".join(ln for ln in lines if ln)
        return [text] if text else []
    return []


def _reading_order(shapes) -> list:
    """Top to bottom, then left to right (python-pptx lists shapes in z-order)."""
    return sorted(shapes, key=lambda s: (s.top if s.top is not None else 0, s.left if s.left is not None else 0))


def _pptx(data: bytes) -> Converted:
    from pptx import Presentation

    zf = _open_ooxml(data, "pptx")
    if "ppt/presentation.xml" not in zf.namelist():
        raise ConversionError("corrupt PPTX (no ppt/presentation.xml: not a PowerPoint file?)")
    slides: list[str] = []
    try:
        prs = Presentation(io.BytesIO(data))
        for slide in prs.slides:
            title_shape = slide.shapes.title
            blocks: list[str] = []
            if title_shape is not None and title_shape.has_text_frame and title_shape.text_frame.text.strip():
                blocks.append("# " + " ".join(title_shape.text_frame.text.split()))
            for shape in _reading_order(slide.shapes):
                if title_shape is not None and shape.shape_id == title_shape.shape_id:
                    continue
                blocks += _shape_blocks(shape)
            if slide.has_notes_slide:
                frame = slide.notes_slide.notes_text_frame
                notes = tidy(frame.text) if frame is not None else ""
                if notes:
                    blocks.append("Notes: " + notes.strip())
            slides.append(tidy("\n\n".join(blocks)))
    except Exception as exc:
        raise ConversionError(f"corrupt PPTX ({type(exc).__name__}: {_short(exc)})") from None
    text, starts = _join(slides)
    if not text:
        raise ConversionError(f"no text in {len(slides)} slide(s) (only images?)")
    headings = markdown_headings(text)
    title = _ooxml_title(zf) or (headings[0][2] if headings else None)
    return Converted(text=text, title=title, converter=converter_id("python-pptx"), pages=starts, headings=headings)


# --------------------------------------------------------------------------------------------
# HTML: the import-html rules
# --------------------------------------------------------------------------------------------


def _html(data: bytes) -> Converted:
    from .html_import import decode_html
    from .html_markdown import html_to_markdown

    try:
        html = decode_html(data)
    except UnicodeDecodeError as exc:
        raise ConversionError(f"cannot be decoded as {exc.encoding} (byte {exc.start})") from None
    try:
        title, markdown = html_to_markdown(html)
    except Exception as exc:  # bs4's html.parser takes nearly anything; a converter bug, named
        raise ConversionError(f"HTML conversion failed ({type(exc).__name__}: {_short(exc)})") from None
    text = tidy(markdown)
    if not text:
        raise ConversionError("no text besides the title" if title else "no text")
    return Converted(text=text, title=title or None, converter=converter_id("rag-experiments", "html_import"),
                     headings=markdown_headings(text))


# --------------------------------------------------------------------------------------------
# dispatch
# --------------------------------------------------------------------------------------------

_CONVERTERS: dict[str, Callable[[bytes], Converted]] = {
    ".pdf": _pdf, ".docx": _docx, ".pptx": _pptx, ".html": _html, ".htm": _html,
}
CONVERTED_SUFFIXES = frozenset(_CONVERTERS)
# the package whose version goes into each format's converter id (and so into the cache key)
_PACKAGE = {".pdf": "pypdf", ".docx": "mammoth", ".pptx": "python-pptx", ".html": "rag-experiments",
            ".htm": "rag-experiments"}


@lru_cache(maxsize=None)
def converter_id(package: str, label: str | None = None) -> str:
    """``"<label or package> <installed version>"``, e.g. ``"pypdf 7.1.1"``: what the corpus
    manifest records for a converted document."""
    try:
        ver = version(package)
    except PackageNotFoundError:
        ver = "unknown"
    return f"{label or package} {ver}"


def converter_for(suffix: str) -> str:
    package = _PACKAGE[suffix]
    return converter_id(package, "html_import" if package == "rag-experiments" else None)


@lru_cache(maxsize=1)
def conversion_code_digest() -> str:
    """sha256 (16 hex) of this module's, html_import's and html_markdown's source: part of the cache key, so a
    change to the conversion rules re-converts even when no package version moved."""
    h = hashlib.sha256()
    for name in ("convert.py", "html_import.py", "html_markdown.py"):
        h.update((Path(__file__).with_name(name)).read_bytes())
    return h.hexdigest()[:16]


def convert_bytes(data: bytes, suffix: str) -> Converted:
    """Convert one file's bytes by its (lower-case) suffix; :class:`ConversionError` says why not."""
    fn = _CONVERTERS.get(suffix)
    if fn is None:
        raise ConversionError(f"unsupported format {suffix or '(no extension)'}")
    if not data:
        raise ConversionError("empty file (0 bytes)")
    if len(data) > MAX_FILE_BYTES:
        raise ConversionError(f"{len(data) / 1e6:.0f} MB is over the {MAX_FILE_BYTES // 2**20} MiB limit; split it")
    try:
        return fn(data)
    except ConversionError:
        raise
    except RecursionError:
        raise ConversionError("nested too deeply to read (damaged or hostile file)") from None
    except MemoryError:
        raise ConversionError("ran out of memory converting it") from None
    except Exception as exc:  # a converter's own bug on an odd file: still one line, naming the type
        raise ConversionError(f"conversion failed ({type(exc).__name__}: {_short(exc)})") from None
