"""Measure document converters by the quality of the text they give back (issue 28, item 3).

Why a measurement: every golden span indexes into the converted text, and a golden quote is found
again by exact, then normalised, then fuzzy matching. A converter that drops words, glues words
together, hyphenates, escapes ``work_mem`` as ``work\\_mem`` or reorders table cells makes quotes
unfindable. So each candidate is scored against text we *know*:

* **synthetic files**: demo-corpus documents (PostgreSQL manual pages, with code blocks, tables,
  lists) rendered to PDF (fpdf2, DejaVu or core font), DOCX (python-docx), PPTX (python-pptx)
  and HTML, each with exactly the words of the source;
* **a real file pair**: ``/usr/share/doc/shared-mime-info/shared-mime-info-spec.{pdf,html}``
  (both built from one DocBook source by its authors' tools; the HTML's visible text is the
  reference for the PDF), when the machine has them.

Scores (all against the reference's words, lower-cased ``\\w+`` tokens, so Markdown markup such as
``#``, ``|`` and ``**`` costs nothing, but an escaping backslash or a glued word does):

* ``word_f1``: bag-of-words F1 (words dropped or invented);
* ``order``: difflib ratio of the two token sequences (reading order, e.g. table cells);
* ``quotes``: share of the reference's sentences (30+ characters) found *verbatim* (whitespace
  collapsed) in the output: what exact anchoring of a golden quote needs;
* ``heads``: share of the reference headings that come out as a Markdown heading line
  (structure the chunker's breadcrumbs use; ``-`` when a format has none to keep);
* ``s/file``: seconds per file (median of the files, this machine).

Run: ``.venv/bin/python tools/measure_converters.py [--docs N]``. It prints one table per format.
The candidates that lost are not dependencies of the package: ``pip install 'markitdown[pdf,docx,pptx]'
pypdfium2`` first (pdfminer.six comes with markitdown); a candidate that is not installed scores
0 with every file counted under ``fails``.
"""

from __future__ import annotations

import argparse
import difflib
import io
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "rag_experiments" / "data" / "demo_corpus"
REAL_PDF = Path("/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf")
REAL_HTML = REAL_PDF.with_suffix(".html")
DEJAVU = Path("/usr/share/fonts/truetype/dejavu")

# --------------------------------------------------------------------------------------------
# the source documents as blocks of plain text
# --------------------------------------------------------------------------------------------


@dataclass
class Block:
    kind: str  # heading, para, code, table, item
    text: str = ""
    level: int = 0
    rows: list[list[str]] | None = None


_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def plain(s: str) -> str:
    """Inline Markdown to the words a reader sees."""
    s = _LINK.sub(r"\1", s)
    s = s.replace("<br>", " ").replace("**", "")
    s = re.sub(r"(?<!\w)\*([^*]+)\*(?!\w)", r"\1", s)
    s = re.sub(r"`+ ?([^`]*?) ?`+", r"\1", s)
    return re.sub(r"\\([\\`*_{}\[\]()#+\-.!|>])", r"\1", s).strip()


def md_blocks(md: str) -> list[Block]:
    out: list[Block] = []
    lines = md.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append(Block("code", "\n".join(lines[i + 1 : j])))
            i = j + 1
            continue
        if m := re.match(r"^(#{1,6}) (.*)", line):
            out.append(Block("heading", plain(m.group(2)), level=len(m.group(1))))
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = [plain(c.replace("\\|", "\x00").replace("\x00", "|"))
                         for c in re.split(r"(?<!\\)\|", lines[i].strip())[1:-1]]
                if not all(re.fullmatch(r":?-+:?", c) for c in cells if c):
                    rows.append(cells)
                i += 1
            out.append(Block("table", rows=rows))
            continue
        elif m := re.match(r"^\s*(?:[-*+]|\d+\.) (.*)", line):
            out.append(Block("item", plain(m.group(1))))
        elif line.strip():
            para = [line]
            while i + 1 < len(lines) and lines[i + 1].strip() and not re.match(r"^(#|```|\||\s*[-*+] |\s*\d+\. )", lines[i + 1]):
                i += 1
                para.append(lines[i])
            out.append(Block("para", plain(" ".join(p.strip().lstrip(">").strip() for p in para))))
        i += 1
    return [b for b in out if b.text.strip() or b.rows]


def block_text(blocks: list[Block]) -> str:
    parts = []
    for b in blocks:
        parts.append("\n".join(" ".join(r) for r in b.rows) if b.kind == "table" else b.text)
    return "\n\n".join(parts)


# --------------------------------------------------------------------------------------------
# renderers: the same words into each format
# --------------------------------------------------------------------------------------------


def _latin1(s: str) -> str:
    return s.encode("latin-1", "replace").decode("latin-1")


def to_pdf(blocks: list[Block], title: str) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_auto_page_break(True, margin=15)
    unicode_font = (DEJAVU / "DejaVuSans.ttf").exists()
    if unicode_font:
        pdf.add_font("body", "", str(DEJAVU / "DejaVuSans.ttf"))
        pdf.add_font("body", "B", str(DEJAVU / "DejaVuSans-Bold.ttf"))
        pdf.add_font("mono", "", str(DEJAVU / "DejaVuSansMono.ttf"))
        body, mono, fix = "body", "mono", (lambda s: s)
    else:
        body, mono, fix = "helvetica", "courier", _latin1
    pdf.set_title(title)
    pdf.add_page()
    w = pdf.epw
    for b in blocks:
        if b.kind == "heading":
            pdf.set_font(body, "B", 18 - 2 * min(b.level, 4))
            pdf.start_section(fix(b.text), level=max(0, b.level - 1))
            pdf.multi_cell(w, 8, fix(b.text))
            pdf.ln(2)
        elif b.kind == "code":
            pdf.set_font(mono, "", 8)
            for ln in b.text.split("\n"):
                pdf.multi_cell(w, 4, fix(ln) or " ")
            pdf.ln(2)
        elif b.kind == "table":
            pdf.set_font(body, "", 7)
            ncol = max(len(r) for r in b.rows)
            with pdf.table(width=int(w), first_row_as_headings=False) as t:
                for r in b.rows:
                    row = t.row()
                    for c in r + [""] * (ncol - len(r)):
                        row.cell(fix(c))
            pdf.ln(2)
        else:
            pdf.set_font(body, "", 10)
            pdf.multi_cell(w, 5, fix(("- " if b.kind == "item" else "") + b.text))
            pdf.ln(2)
    return bytes(pdf.output())


def to_docx(blocks: list[Block], title: str) -> bytes:
    import docx
    from docx.shared import Pt

    d = docx.Document()
    d.core_properties.title = title
    for b in blocks:
        if b.kind == "heading":
            d.add_heading(b.text, level=min(b.level, 9))
        elif b.kind == "code":
            for ln in b.text.split("\n"):
                run = d.add_paragraph(style="No Spacing").add_run(ln)
                run.font.name, run.font.size = "Courier New", Pt(9)
        elif b.kind == "table":
            ncol = max(len(r) for r in b.rows)
            t = d.add_table(rows=len(b.rows), cols=ncol)
            t.style = "Table Grid"
            for r, cells in zip(t.rows, b.rows):
                for cell, text in zip(r.cells, cells):
                    cell.text = text
        elif b.kind == "item":
            d.add_paragraph(b.text, style="List Bullet")
        else:
            d.add_paragraph(b.text)
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def to_pptx(blocks: list[Block], title: str) -> bytes:
    """One slide per heading (its title), the blocks below it in one text box, tables as tables."""
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    slide = None
    frame = None

    def new_slide(heading: str):
        nonlocal slide, frame
        slide = prs.slides.add_slide(prs.slide_layouts[5])  # title only
        slide.shapes.title.text = heading
        frame = None

    for b in blocks:
        if b.kind == "heading" or slide is None:
            new_slide(b.text if b.kind == "heading" else title)
            if b.kind == "heading":
                continue
        if b.kind == "table":
            ncol = max(len(r) for r in b.rows)
            shape = slide.shapes.add_table(len(b.rows), ncol, Inches(0.5), Inches(4), Inches(9), Inches(2))
            for r, cells in zip(shape.table.rows, b.rows):
                for cell, text in zip(r.cells, cells):
                    cell.text = text
            frame = None
            continue
        if frame is None:
            frame = slide.shapes.add_textbox(Inches(0.5), Inches(1.5), Inches(9), Inches(5)).text_frame
            frame.word_wrap = True
            frame.text = ""
            p = frame.paragraphs[0]
        else:
            p = frame.add_paragraph()
        p.text = b.text
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


def to_html(blocks: list[Block], title: str) -> bytes:
    from html import escape

    out = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title></head><body>"]
    in_list = False
    for b in blocks:
        if b.kind != "item" and in_list:
            out.append("</ul>")
            in_list = False
        if b.kind == "heading":
            out.append(f"<h{b.level}>{escape(b.text)}</h{b.level}>")
        elif b.kind == "code":
            out.append(f"<pre>{escape(b.text)}</pre>")
        elif b.kind == "table":
            rows = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in b.rows)
            out.append(f"<table>{rows}</table>")
        elif b.kind == "item":
            if not in_list:
                out.append("<ul>")
                in_list = True
            out.append(f"<li>{escape(b.text)}</li>")
        else:
            out.append(f"<p>{escape(b.text)}</p>")
    out.append("</ul></body></html>" if in_list else "</body></html>")
    return "\n".join(out).encode("utf-8")


RENDER = {"pdf": to_pdf, "docx": to_docx, "pptx": to_pptx, "html": to_html}

# --------------------------------------------------------------------------------------------
# candidates: path -> text
# --------------------------------------------------------------------------------------------

_MD = None


def markitdown(path: Path) -> str:
    global _MD
    from markitdown import MarkItDown

    _MD = _MD or MarkItDown(enable_plugins=False)
    return _MD.convert(str(path)).markdown


def pypdf_plain(path: Path) -> str:
    from pypdf import PdfReader

    return "\n\n".join(p.extract_text() or "" for p in PdfReader(path).pages)


def pypdf_layout(path: Path) -> str:
    from pypdf import PdfReader

    return "\n\n".join(p.extract_text(extraction_mode="layout") or "" for p in PdfReader(path).pages)


def pdfminer_text(path: Path) -> str:
    from pdfminer.high_level import extract_text

    return extract_text(str(path))


def pdfium_text(path: Path) -> str:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(path))
    try:
        return "\n\n".join(page.get_textpage().get_text_bounded() for page in doc)
    finally:
        doc.close()


def mammoth_raw(path: Path) -> str:
    import mammoth

    with open(path, "rb") as f:
        return mammoth.extract_raw_text(f).value


def python_docx_paragraphs(path: Path) -> str:
    """The naive python-docx read: paragraph texts only (tables are not paragraphs)."""
    import docx

    return "\n\n".join(p.text for p in docx.Document(str(path)).paragraphs)


def python_pptx_frames(path: Path) -> str:
    """The naive python-pptx read: every shape's text frame, slide by slide (no tables)."""
    from pptx import Presentation

    out = []
    for slide in Presentation(str(path)).slides:
        for shape in slide.shapes:
            if shape.has_text_frame:
                out.append(shape.text_frame.text)
    return "\n\n".join(out)


def html_import_md(path: Path) -> str:
    from rag_experiments.corpus.html_import import html_to_markdown

    title, md = html_to_markdown(path.read_bytes().decode("utf-8"))
    return md


def bs4_text(path: Path) -> str:
    from bs4 import BeautifulSoup

    return BeautifulSoup(path.read_bytes(), "html.parser").get_text("\n")


def real_reference() -> str:
    """The words of the real PDF's HTML edition: its chunked pages in reading order (index, then
    the DocBook chunks by number), navigation dropped by html_import's DocBook rules."""
    from rag_experiments.corpus.html_import import html_to_markdown

    pages = [REAL_HTML] if REAL_HTML.is_file() else sorted(
        REAL_HTML.glob("*.html"), key=lambda p: (p.stem != "index", int(re.sub(r"\D", "", p.stem) or 0)))
    return "\n\n".join(html_to_markdown(p.read_bytes().decode("utf-8", "replace"))[1] for p in pages)


def shipped(path: Path) -> str:
    """What rag-exp itself loads (rag_experiments.corpus.convert), if that module exists."""
    from rag_experiments.corpus.convert import convert_bytes

    return convert_bytes(path.read_bytes(), path.suffix.lower()).text


CANDIDATES = {
    "pdf": {"markitdown": markitdown, "pypdf": pypdf_plain, "pypdf layout": pypdf_layout,
            "pdfminer.six": pdfminer_text, "pypdfium2": pdfium_text},
    "docx": {"markitdown": markitdown, "mammoth raw": mammoth_raw, "python-docx paras": python_docx_paragraphs},
    "pptx": {"markitdown": markitdown, "python-pptx frames": python_pptx_frames},
    "html": {"markitdown": markitdown, "html_import": html_import_md, "bs4 get_text": bs4_text},
}

# --------------------------------------------------------------------------------------------
# scores
# --------------------------------------------------------------------------------------------

_TOK = re.compile(r"\w+")
_SENT = re.compile(r"(?<=[.!?:;])\s+")


def tokens(s: str) -> list[str]:
    return _TOK.findall(s.lower())


def ws(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def word_f1(ref: list[str], out: list[str]) -> float:
    a, b = Counter(ref), Counter(out)
    common = sum((a & b).values())
    if not common:
        return 0.0
    p, r = common / sum(b.values()), common / sum(a.values())
    return 2 * p * r / (p + r)


def order(ref: list[str], out: list[str]) -> float:
    return difflib.SequenceMatcher(None, ref, out, autojunk=False).ratio()


def sentences(blocks: list[Block]) -> list[str]:
    out = []
    for b in blocks:
        if b.kind in ("para", "item"):
            out += [s for s in _SENT.split(b.text) if len(s) >= 30]
    return out


def quote_recall(sents: list[str], out: str) -> float:
    if not sents:
        return float("nan")
    flat = ws(out)
    return sum(ws(s) in flat for s in sents) / len(sents)


def heads_kept(blocks: list[Block], out: str) -> float:
    heads = [b.text for b in blocks if b.kind == "heading"]
    if not heads:
        return float("nan")
    lines = {ws(plain(m.group(1))) for m in re.finditer(r"^#{1,6} +(.+)$", out, re.M)}
    return sum(ws(h) in lines for h in heads) / len(heads)


# --------------------------------------------------------------------------------------------


@dataclass
class Sample:
    name: str
    blocks: list[Block] | None  # None: reference words only (real file pair)
    ref: str
    path: Path


def demo_samples(n: int) -> list[tuple[str, list[Block]]]:
    files = sorted(DEMO.glob("*.md"))
    step = max(1, len(files) // n)
    picked = files[::step][:n]
    out = []
    for f in picked:
        raw = f.read_text(encoding="utf-8")
        body = raw.split("\n---\n", 1)[1] if raw.startswith("---\n") else raw
        out.append((f.stem, md_blocks(body)))
    return out


def measure(fmt: str, samples: list[Sample], candidates: dict) -> list[dict]:
    rows = []
    for name, fn in candidates.items():
        f1s, ords, quotes, heads, secs, fails = [], [], [], [], [], 0
        for s in samples:
            t = time.perf_counter()
            try:
                out = fn(s.path)
            except Exception as exc:  # a candidate that fails on a file scores 0 on it
                print(f"  {name} failed on {s.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
                fails += 1
                out = ""
            secs.append(time.perf_counter() - t)
            rt, ot = tokens(s.ref), tokens(out)
            f1s.append(word_f1(rt, ot))
            ords.append(order(rt, ot))
            if s.blocks is not None:
                quotes.append(quote_recall(sentences(s.blocks), out))
                if fmt != "pdf":
                    heads.append(heads_kept(s.blocks, out))
        rows.append({"candidate": name, "files": len(samples), "word_f1": _mean(f1s), "order": _mean(ords),
                     "quotes": _mean(quotes), "heads": _mean(heads), "s/file": statistics.median(secs),
                     "fails": fails})
    return rows


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    return sum(xs) / len(xs) if xs else float("nan")


def print_table(title: str, rows: list[dict]) -> None:
    cols = ["candidate", "files", "word_f1", "order", "quotes", "heads", "s/file", "fails"]
    print(f"\n### {title}\n")
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" for _ in cols) + "|")
    for r in rows:
        cells = []
        for c in cols:
            v = r[c]
            if isinstance(v, float):
                cells.append("-" if v != v else (f"{v:.3f}" if c == "s/file" else f"{v:.3f}"))
            else:
                cells.append(str(v))
        print("| " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=12, help="demo documents per format (default 12)")
    ap.add_argument("--formats", default="pdf,docx,pptx,html")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    try:
        import rag_experiments.corpus.convert  # noqa: F401
        has_shipped = True
    except ImportError:
        has_shipped = False
    demo = demo_samples(args.docs)
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        for fmt in args.formats.split(","):
            samples = []
            for stem, blocks in demo:
                p = tmpd / f"{stem}.{fmt}"
                p.write_bytes(RENDER[fmt](blocks, stem))
                samples.append(Sample(stem, blocks, block_text(blocks), p))
            cands = dict(CANDIDATES[fmt])
            if has_shipped:
                cands["rag-exp (shipped)"] = shipped
            print_table(f"{fmt.upper()}: {len(samples)} demo documents rendered to .{fmt}", measure(fmt, samples, cands))
            if fmt == "pdf" and REAL_PDF.exists() and REAL_HTML.exists():
                blocks = md_blocks(real_reference())
                real = [Sample(REAL_PDF.name, blocks, block_text(blocks), REAL_PDF)]
                print_table(f"PDF, real file: {REAL_PDF} (reference: its HTML edition, {REAL_HTML.name}/, "
                            "through html_import)", measure(fmt, real, cands))
    print("\nword_f1: bag-of-words F1; order: difflib ratio of token sequences; quotes: sentences found "
          "verbatim; heads: headings kept as Markdown heading lines; s/file: median seconds per file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
