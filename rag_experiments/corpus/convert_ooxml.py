"""DOCX and PPTX (Office Open XML: zip archives) as text, for :mod:`.convert`.

A DOCX or PPTX is a zip archive, and a small one can expand to gigabytes (a zip bomb: 200 MB of
zeros deflate to 200 KB; mammoth took 81 s and 662 MiB for a 20 MB document.xml). What it
declares is read from the zip's central directory and bounded before anything decompresses a byte
(:func:`_check_archive`): at most ``MAX_MEMBERS`` members, ``MAX_UNZIPPED_BYTES`` in all,
``MAX_XML_BYTES`` of XML (what the converters parse), and no member over ``RATIO_GRACE_BYTES``
expanding more than ``MAX_RATIO`` times (Apache POI's zip-bomb rule: real Office parts deflate
2-40x, a repeated paragraph 200x at most, a run of zeros 1,000x). Every member is then read once in
chunks, never past its declared size (a member that lies about its size ends in its CRC check).
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
import zipfile

from .converted import ConversionError, Converted, converter_id, join_parts, markdown_headings, short_reason, tidy

# what a DOCX / PPTX (a zip archive) may declare it expands to: see the module docstring
MAX_MEMBERS = 10_000
MAX_UNZIPPED_BYTES = 256 * 2**20
MAX_XML_BYTES = 64 * 2**20  # mammoth: ~4 s and ~33 MiB per MB of XML (measured at 5 and 20 MB)
MAX_RATIO = 100
RATIO_GRACE_BYTES = 2**20


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
        raise ConversionError(f"corrupt {kind.upper()} (not a readable zip archive: {short_reason(exc)})") from None
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


def convert_docx(data: bytes) -> Converted:
    """A DOCX through mammoth's HTML and the HTML rules (:mod:`.convert` says why)."""
    import mammoth

    from .html_markdown import html_to_markdown

    zf = _open_ooxml(data, "docx")
    if "word/document.xml" not in zf.namelist():
        raise ConversionError("corrupt DOCX (no word/document.xml: not a Word document?)")
    try:
        html = mammoth.convert_to_html(io.BytesIO(data)).value
        head_title, markdown = html_to_markdown(f"<html><body>{html}</body></html>")
    except Exception as exc:
        raise ConversionError(f"corrupt DOCX ({type(exc).__name__}: {short_reason(exc)})") from None
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


def convert_pptx(data: bytes) -> Converted:
    """A PPTX through python-pptx, one section per slide (a page per slide)."""
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
        raise ConversionError(f"corrupt PPTX ({type(exc).__name__}: {short_reason(exc)})") from None
    text, starts = join_parts(slides)
    if not text:
        raise ConversionError(f"no text in {len(slides)} slide(s) (only images?)")
    headings = markdown_headings(text)
    title = _ooxml_title(zf) or (headings[0][2] if headings else None)
    return Converted(text=text, title=title, converter=converter_id("python-pptx"), pages=starts, headings=headings)
