"""Convert DocBook-generated HTML pages (the PostgreSQL manual) to Markdown documents.

The output of :func:`import_html_dir` is one ``<stem>.md`` file per page, each starting with a
front-matter block::

    ---
    source_uri: postgresql-15/sql-createindex.html
    title: CREATE INDEX
    doc_type: reference
    ---
    # CREATE INDEX
    ...

The document text is everything after the closing ``---`` line.

The page text is :func:`~rag_experiments.corpus.html_markdown.html_to_markdown`'s Markdown (its module
states the conversion rules).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rag_experiments.errors import CorpusError

from .html_markdown import collapse, html_to_markdown

__all__ = [
    "DOC_TYPES",
    "ImportReport",
    "SkippedFile",
    "classify_doc_type",
    "convert_file",
    "html_to_markdown",
    "import_html_dir",
    "render_document",
]

DOC_TYPES = ("reference", "config", "errcodes", "functions", "fulltext", "indexes", "tutorial")

# --------------------------------------------------------------------------------------------
# Document types
# --------------------------------------------------------------------------------------------

_NUMBERED_TITLE = re.compile(
    r"^\s*(?:(?:Chapter|Appendix|Part)\s+\S+\.|[0-9A-Z]+(?:\.[0-9]+)*\.)\s"
)
_CONFIG_PAGES = frozenset({"config-setting", "auth-pg-hba-conf", "auth-username-maps"})
_INDEX_AMS = ("btree", "gin", "gist", "spgist", "brin", "hash")


def classify_doc_type(filename: str, title: str) -> str:
    """Map a manual page to one of :data:`DOC_TYPES`. First matching rule wins.

    By file name (``stem`` = name without directory and ``.html``):

    1. ``errcodes*``                                   -> ``errcodes``
    2. ``sql-*``, ``app-*``, ``reference*``            -> ``reference``, unless the title is
       numbered like a manual section ("4.1. Lexical Structure", "Appendix C. SQL Key
       Words"): command reference pages have bare titles ("CREATE INDEX", "psql")
    3. ``runtime-config*``, ``config-setting``, ``auth-pg-hba-conf``,
       ``auth-username-maps``                          -> ``config``
    4. ``functions*``                                  -> ``functions``
    5. ``textsearch*``                                 -> ``fulltext``
    6. ``indexes*``, ``indexam``, ``index-*``, and the index access-method pages
       ``<am>`` / ``<am>-*`` for am in btree, gin, gist, spgist, brin, hash -> ``indexes``
    7. ``tutorial*``                                   -> ``tutorial``

    Then, for any other file, by title: contains "Error Codes" -> ``errcodes``;
    "Configuration" -> ``config``; "Functions" or "Operators" -> ``functions``;
    "Full Text Search" or "Text Search" -> ``fulltext``.

    Everything else (introductions, overviews, other chapters) -> ``tutorial``.
    """
    stem = Path(filename).name.lower()
    if stem.endswith(".html"):
        stem = stem[: -len(".html")]
    elif stem.endswith(".htm"):
        stem = stem[: -len(".htm")]
    if stem.startswith("errcodes"):
        return "errcodes"
    if stem.startswith(("sql-", "app-", "reference")) and not _NUMBERED_TITLE.match(title):
        return "reference"
    if stem.startswith("runtime-config") or stem in _CONFIG_PAGES:
        return "config"
    if stem.startswith("functions"):
        return "functions"
    if stem.startswith("textsearch"):
        return "fulltext"
    if (
        stem.startswith(("indexes", "index-"))
        or stem == "indexam"
        or stem in _INDEX_AMS
        or stem.startswith(tuple(am + "-" for am in _INDEX_AMS))
    ):
        return "indexes"
    if stem.startswith("tutorial"):
        return "tutorial"
    t = title.lower()
    if "error codes" in t:
        return "errcodes"
    if "configuration" in t:
        return "config"
    if "functions" in t or "operators" in t:
        return "functions"
    if "text search" in t:
        return "fulltext"
    return "tutorial"


# --------------------------------------------------------------------------------------------
# Directory import
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SkippedFile:
    """A page that was not converted, and why."""

    filename: str
    reason: str


@dataclass(frozen=True)
class ImportReport:
    """What :func:`import_html_dir` wrote. Do not mutate ``doc_type_counts``."""

    src: Path
    dest: Path
    doc_type_counts: dict[str, int] = field(default_factory=dict)  # doc_type -> documents
    total_bytes: int = 0  # bytes of all .md files written (front matter included)
    skipped: tuple[SkippedFile, ...] = ()

    @property
    def documents(self) -> int:
        return sum(self.doc_type_counts.values())

    def summary(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in sorted(self.doc_type_counts.items()))
        lines = [
            f"wrote {self.documents} documents ({self.total_bytes / 1e6:.2f} MB) to {self.dest}: "
            f"{counts or 'none'}"
        ]
        lines += [f"skipped {s.filename}: {s.reason}" for s in self.skipped]
        return "\n".join(lines)


_CHARSET = re.compile(rb"""(?:charset|encoding)\s*=\s*["']?([A-Za-z0-9._:-]+)""", re.I)


def decode_html(raw: bytes) -> str:
    """Decode a page using its declared charset (default UTF-8), a UTF-8 BOM dropped; raise
    UnicodeDecodeError. Corpus loading (corpus.convert) decodes a page the same way, so a page
    read directly and the same page imported first give the same text."""
    encoding = "utf-8"
    m = _CHARSET.search(raw[:2048])
    if m:
        try:
            encoding = codecs.lookup(m.group(1).decode("ascii")).name
        except LookupError:
            encoding = "utf-8"
    if raw.startswith(codecs.BOM_UTF8):
        raw, encoding = raw[len(codecs.BOM_UTF8) :], "utf-8"
    return raw.decode(encoding)


def render_document(source_uri: str, title: str, doc_type: str, markdown: str) -> str:
    """Front matter plus Markdown text: the exact content of one corpus ``.md`` file."""
    title_line = collapse(title.replace("\n", " "))
    return (
        f"---\nsource_uri: {source_uri}\ntitle: {title_line}\ndoc_type: {doc_type}\n---\n{markdown}"
    )


def convert_file(path: Path, prefix: str) -> tuple[str, str, str] | SkippedFile:
    """Convert one HTML file to ``(title, doc_type, file_content)``, or say why it was skipped."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return SkippedFile(path.name, f"cannot be read: {exc.strerror or exc}")
    try:
        html = decode_html(raw)
    except UnicodeDecodeError as exc:
        return SkippedFile(
            path.name, f"cannot be decoded as {exc.encoding} (byte {exc.start}: {exc.reason})"
        )
    try:
        title, markdown = html_to_markdown(html)
    except Exception as exc:  # a converter bug: say which file triggered it
        exc.add_note(f"while converting {path}")
        raise
    if not markdown.strip():
        return SkippedFile(path.name, "no text besides the title" if title else "no text")
    doc_type = classify_doc_type(path.name, title)
    uri = f"{prefix}/{path.name}" if prefix else path.name
    return title, doc_type, render_document(uri, title or path.stem, doc_type, markdown)


def _html_files(src: Path) -> list[Path]:
    return sorted(
        (p for p in src.iterdir() if p.suffix.lower() == ".html" and p.is_file()),
        key=lambda p: p.name,
    )


def import_html_dir(
    src: Path,
    dest: Path,
    select: Callable[[str], bool] | None = None,
    progress: bool = True,
    prefix: str | None = None,
) -> ImportReport:
    """Convert every selected ``*.html`` file in ``src`` to ``dest/<stem>.md``.

    ``select`` gets the file name (e.g. ``"sql-createindex.html"``) and returns whether to
    convert it; ``None`` converts all. ``source_uri`` in the front matter is
    ``<prefix>/<filename>``; ``prefix`` defaults to ``src``'s folder name. Files that cannot be
    read or decoded, or that hold no text, are listed in ``ImportReport.skipped``.

    Raises :class:`CorpusError` when ``src`` is not a folder holding ``.html`` files, or when
    ``select`` keeps none of them.
    """
    src = Path(src)
    dest = Path(dest)
    hint = (
        "pass the folder holding the manual's *.html pages, e.g. "
        "/usr/share/doc/postgresql-doc-15/html (Debian/Ubuntu package postgresql-doc-15)"
    )
    if not src.exists():
        raise CorpusError(f"HTML folder {src} does not exist", hint=hint)
    if not src.is_dir():
        raise CorpusError(f"{src} is not a folder", hint=hint)
    files = _html_files(src)
    if not files:
        raise CorpusError(f"HTML folder {src} holds no *.html files", hint=hint)
    if select is not None:
        selected = [p for p in files if select(p.name)]
        if not selected:
            raise CorpusError(
                f"none of the {len(files)} *.html files in {src} matched the page selection",
                hint="pass a select function that accepts some of its file names, or select=None",
            )
        files = selected
    if prefix is None:
        prefix = src.resolve().name
    prefix = prefix.strip("/")

    dest.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    skipped: list[SkippedFile] = []
    total = 0
    for path in _iter_progress(files, progress):
        result = convert_file(path, prefix)
        if isinstance(result, SkippedFile):
            skipped.append(result)
            continue
        _title, doc_type, content = result
        data = content.encode("utf-8")
        (dest / f"{path.stem}.md").write_bytes(data)
        counts[doc_type] = counts.get(doc_type, 0) + 1
        total += len(data)
    return ImportReport(
        src=src,
        dest=dest,
        doc_type_counts=dict(sorted(counts.items())),
        total_bytes=total,
        skipped=tuple(skipped),
    )


def _iter_progress(files: list[Path], progress: bool) -> Iterable[Path]:
    if not progress:
        return files
    from tqdm import tqdm

    return tqdm(files, desc="Converting HTML", unit="page", disable=not progress)
