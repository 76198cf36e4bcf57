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

A DOCX or PPTX (a zip archive) is bounded before anything decompresses it: :mod:`.convert_ooxml`.

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
from collections.abc import Callable
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from .boundary import MAX_FILE_BYTES  # the one size limit, every format (pypdf reads a whole file into memory)
from .convert_ooxml import convert_docx, convert_pptx
from .converted import ConversionError, Converted, converter_id, join_parts, markdown_headings, short_reason, tidy

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
            text, starts = join_parts(pages)
            headings = _pdf_outline(reader, pages, starts) if text else ()
        except ConversionError:
            raise
        except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError,
                OSError, AssertionError, ZeroDivisionError) as exc:  # what pypdf raises for a damaged file
            raise ConversionError(f"corrupt PDF ({type(exc).__name__}: {short_reason(exc)})") from None
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
        raise ConversionError(f"HTML conversion failed ({type(exc).__name__}: {short_reason(exc)})") from None
    text = tidy(markdown)
    if not text:
        raise ConversionError("no text besides the title" if title else "no text")
    return Converted(text=text, title=title or None, converter=converter_id("rag-experiments", "html_import"),
                     headings=markdown_headings(text))


# --------------------------------------------------------------------------------------------
# dispatch
# --------------------------------------------------------------------------------------------

_CONVERTERS: dict[str, Callable[[bytes], Converted]] = {
    ".pdf": _pdf, ".docx": convert_docx, ".pptx": convert_pptx, ".html": _html, ".htm": _html,
}
CONVERTED_SUFFIXES = frozenset(_CONVERTERS)
# the package whose version goes into each format's converter id (and so into the cache key)
_PACKAGE = {".pdf": "pypdf", ".docx": "mammoth", ".pptx": "python-pptx", ".html": "rag-experiments",
            ".htm": "rag-experiments"}


def converter_for(suffix: str) -> str:
    package = _PACKAGE[suffix]
    return converter_id(package, "html_import" if package == "rag-experiments" else None)


@lru_cache(maxsize=1)
def conversion_code_digest() -> str:
    """sha256 (16 hex) of the conversion modules' source (this one, converted, convert_ooxml, html_import,
    html_markdown): part of the cache key, so a
    change to the conversion rules re-converts even when no package version moved."""
    h = hashlib.sha256()
    for name in ("convert.py", "converted.py", "convert_ooxml.py", "html_import.py", "html_markdown.py"):
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
        raise ConversionError(f"conversion failed ({type(exc).__name__}: {short_reason(exc)})") from None
