"""Load a corpus folder into :class:`~rag_experiments.types.Document` values.

Markdown (``*.md``, ``*.markdown``) is read as it is. Each file may start with a front-matter
block::

    ---
    source_uri: postgresql-15/sql-createindex.html
    title: CREATE INDEX
    doc_type: reference
    ---

The document text (what every char span indexes into) is everything after the closing
``---`` line. Without front matter: ``source_uri`` is the path relative to the folder, the
title is the first ``#`` heading (or the file name), ``doc_type`` is ``doc``.

Plain text (``*.txt``, UTF-8) is the text as it is, titled by its file name. PDF, DOCX, PPTX and
HTML files are converted (:mod:`rag_experiments.corpus.convert` says which converter and why);
the converted text is the document text, the converter's name and version, the page (or slide)
offsets and the headings go into :attr:`Document.source`, and :func:`corpus_manifest` records
the converter per document. So a converter upgrade that changes the text changes the document's
content hash: the golden set's drift check and re-anchoring see it, evidence never moves silently.
Their ``doc_id`` and ``source_uri`` are the relative path (``reports/q3.pdf``), ``doc_type`` is
``doc``. Conversions are cached on disk by file content (:mod:`.convert_cache`): a re-run
converts nothing.

A Markdown file that cannot be read stops the load with a :class:`CorpusError` naming it (as
always: it is the format a team writes by hand). A file that cannot be converted (encrypted, no
text layer, corrupt, not UTF-8, an unsupported Office format such as ``.doc``) is named with
its reason, skipped and counted: :func:`load_corpus` warns with one summary line, and
:func:`read_corpus` returns the full :class:`LoadReport`. When nothing is left, CorpusError.
Other files (no extension, images, ``.json``, Office lock files ``~$x.docx``) are ignored.

Nothing outside the corpus folder is read (:mod:`.boundary`): a symbolic link leading out of it,
a file over the size limit (any format, checked before reading) or a file name that is not UTF-8
is named with its reason and skipped, for Markdown too; links to folders are never followed.
Converters run in a child process with a time and a memory limit (:mod:`.convert_worker`).
"""

from __future__ import annotations

import hashlib
import time
import warnings
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ..cache_key import file_identity
from ..errors import CorpusError
from ..limits import check_text
from ..types import Document, SourceFile
from .boundary import (MAX_FILE_BYTES, Refused, folder_link_problem, link_problem, name_problem, printable, read_inside,
                       walk)
from .convert import CONVERTED_SUFFIXES, Converted, converter_for
from .convert_cache import ConversionCache, entry_key
from .convert_worker import ConversionWorker

DEMO = "demo"


def demo_corpus_dir() -> Path:
    return Path(str(resources.files("rag_experiments").joinpath("data/demo_corpus")))


def resolve_corpus_dir(path: str) -> Path:
    """``demo`` names the shipped corpus; anything else is a folder path."""
    return demo_corpus_dir() if path == DEMO else Path(path).expanduser().resolve()


def _parse_front_matter(raw: str, file: Path) -> tuple[dict[str, str], str]:
    if not raw.startswith("---\n"):
        return {}, raw
    end = raw.find("\n---\n", 4)
    if end < 0:
        raise CorpusError(f"{file}: front matter starts with '---' but has no closing '---' line")
    meta: dict[str, str] = {}
    for n, line in enumerate(raw[4:end].split("\n"), start=2):
        if not line.strip():
            continue
        if ":" not in line:
            raise CorpusError(f"{file}:{n}: front-matter line is not 'key: value': {line!r}")
        key, value = line.split(":", 1)
        meta[key.strip()] = value.strip()
    return meta, raw[end + 5 :]


def load_document(file: Path, root: Path, corpus: str) -> Document:
    """The Markdown file ``file`` under ``root`` as a document; CorpusError naming the file when it
    cannot be read (a link out of the folder, over the size limit: :mod:`.boundary`) or parsed."""
    try:
        raw = _markdown_text(file, root)
    except Refused as exc:
        raise CorpusError(f"{file}: {exc.reason}") from None
    except OSError as exc:
        raise CorpusError(f"{file}: cannot read: {exc.strerror}") from None
    return _markdown_document(raw, file, root, corpus)


def _markdown_text(file: Path, root: Path) -> str:
    """The file's text; its bytes are dropped as soon as they are decoded (nobody else holds them:
    a large file is never in memory as bytes and text and a copy at once)."""
    data = read_inside(file, root, MAX_FILE_BYTES)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(
            f"{file}: not valid UTF-8 (byte {exc.start})",
            hint="convert it, e.g. iconv -f latin1 -t utf-8",
        ) from None


def _markdown_document(raw: str, file: Path, root: Path, corpus: str) -> Document:
    check_text(raw, str(file))
    lf = raw.replace("\r\n", "\n") if "\r" in raw else raw
    # a UTF-8 byte order mark (Windows editors write one) is no text and must not hide the front
    # matter; it stays in the raw frame (text_offset), as Python's open() reads it as U+FEFF
    bom = 1 if lf.startswith("\ufeff") else 0
    meta, text = _parse_front_matter(lf[bom:] if bom else lf, file)
    if not text.strip():
        raise CorpusError(f"{file}: document is empty", hint="remove the file or give it content")
    rel = file.relative_to(root).as_posix()
    title = meta.get("title")
    if not title:
        first = next((ln for ln in text.split("\n") if ln.startswith("# ")), None)
        title = first[2:].strip() if first else file.stem
    source_uri = meta.get("source_uri") or rel
    return Document(
        doc_id=meta.get("doc_id") or source_uri,
        source_uri=source_uri,
        title=title,
        doc_type=meta.get("doc_type") or "doc",
        text=text,
        corpus=corpus,
        text_offset=len(lf) - len(text),
    )


MARKDOWN_SUFFIXES = (".md", ".markdown")
TEXT_SUFFIXES = (".txt",)
SUPPORTED_SUFFIXES = (*MARKDOWN_SUFFIXES, *TEXT_SUFFIXES, *sorted(CONVERTED_SUFFIXES))
# document formats a team may well drop into the folder that no converter here reads: reported
# (so a missing document is visible), never silently ignored like an image or a .json
_UNSUPPORTED = {
    ".doc": "save it as .docx", ".ppt": "save it as .pptx", ".rtf": "save it as .docx",
    ".odt": "save it as .docx", ".odp": "save it as .pptx", ".xls": "not a text document",
    ".xlsx": "not a text document", ".epub": "convert it to HTML or PDF", ".pages": "export it as .docx",
    ".key": "export it as .pptx",
}


def _format(f: Path) -> str | None:
    """The format a file is loaded as ('md', 'txt', 'pdf', ...), 'unsupported', or None (ignored).
    Markdown is matched exactly as before (``*.md``, case-sensitive, hidden folders included);
    other formats by lower-case suffix, skipping hidden files and Office lock files."""
    if f.suffix in MARKDOWN_SUFFIXES:
        return "md"
    name = f.name
    if name.startswith((".", "~$")):
        return None
    suffix = f.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        return "txt"
    if suffix in CONVERTED_SUFFIXES:
        return "html" if suffix == ".htm" else suffix[1:]
    if suffix in _UNSUPPORTED:
        return "unsupported"
    return None


def corpus_files(root: Path) -> list[tuple[Path, str]]:
    """Every file under ``root`` that is loaded or reported, with its format, sorted by path; a
    symbolic link to a folder is listed as format ``link`` (never entered: :mod:`.boundary`)."""
    out = []
    for f, folder_link in walk(root):
        if folder_link:
            out.append((f, "link"))
            continue
        fmt = _format(f)
        if fmt is None:
            continue
        if fmt != "md" and any(p.startswith(".") for p in f.relative_to(root).parts[:-1]):
            continue  # a dangling link is kept: reading it reports "cannot read", naming it
        out.append((f, fmt))
    return out


def _refusal(f: Path, root: Path, rel: str, fmt: str) -> str | None:
    """Why the file is not read at all (the corpus boundary, a name no document can have), or None."""
    if fmt == "link":
        return folder_link_problem(f, root)
    return name_problem(rel) or link_problem(f, root)


@dataclass(frozen=True)
class FileResult:
    """What loading one file gave: a document, or the reason it was skipped."""

    path: str  # relative to the corpus folder
    format: str  # md, txt, pdf, docx, pptx, html, unsupported, link (a folder link)
    converter: str | None = None  # "pypdf 7.1.1" for converted files
    chars: int = 0
    seconds: float = 0.0  # converting it (0 when the cache had it)
    cached: bool = False  # the conversion (or its failure) came from the cache
    failure: str | None = None


@dataclass(frozen=True)
class LoadReport:
    """Per-file results of one corpus load, and the formats table built from them."""

    root: Path
    files: tuple[FileResult, ...] = field(default=())

    @property
    def failures(self) -> tuple[FileResult, ...]:
        return tuple(r for r in self.files if r.failure)

    @property
    def converted(self) -> int:
        """Files actually run through a converter in this load (a cache hit is not one)."""
        return sum(1 for r in self.files if r.converter and not r.cached)

    def failure_summary(self) -> str | None:
        """One line: ``2 of 40 files could not be loaded: a.pdf (encrypted ...), b.docx (...)``."""
        bad = self.failures
        if not bad:
            return None
        listed = ", ".join(f"{r.path} ({r.failure})" for r in bad)
        return f"{len(bad)} of {len(self.files)} files in {self.root} could not be loaded and were skipped: {listed}"

    def formats_table(self) -> str:
        """Markdown table: files, documents, characters, seconds, failures and converter per format."""
        rows = []
        formats = sorted({r.format for r in self.files}, key=lambda f: (SUPPORTED_ORDER.get(f, 99), f))
        for fmt in formats:
            rs = [r for r in self.files if r.format == fmt]
            ok = [r for r in rs if not r.failure]
            converters = sorted({r.converter for r in rs if r.converter})
            rows.append((fmt, len(rs), len(ok), sum(r.chars for r in ok), sum(r.seconds for r in rs),
                         sum(1 for r in rs if r.cached), len(rs) - len(ok), ", ".join(converters) or "-"))
        ok_all = [r for r in self.files if not r.failure]
        rows.append(("total", len(self.files), len(ok_all), sum(r.chars for r in ok_all),
                     sum(r.seconds for r in self.files), sum(1 for r in self.files if r.cached),
                     len(self.failures), ""))
        head = "| format | files | documents | characters | seconds | from cache | failures | converter |"
        lines = [head, "|---|--:|--:|--:|--:|--:|--:|---|"]
        lines += [f"| {f} | {n} | {k} | {c:,} | {s:.2f} | {h} | {bad} | {conv} |" for f, n, k, c, s, h, bad, conv in rows]
        return "\n".join(lines)


SUPPORTED_ORDER = {f: i for i, f in enumerate(("md", "txt", "html", "pdf", "docx", "pptx", "unsupported", "link"))}


@dataclass(frozen=True)
class CorpusLoad:
    docs: list[Document]
    report: LoadReport


# (root, corpus name) -> (every file's identity, the documents): a sweep loads the same corpus
# once per point; a file added, removed or touched changes the identity and the folder is read again
_LOADED: dict[tuple[Path, str], tuple[tuple, list[Document]]] = {}


def _root_and_name(path: str | Path, corpus: str | None) -> tuple[Path, str]:
    root = resolve_corpus_dir(str(path))
    if not root.is_dir():
        raise CorpusError(f"corpus folder {root} does not exist",
                          hint="pass a folder of documents (.md, .txt, .html, .pdf, .docx, .pptx), or 'demo'")
    return root, corpus or (DEMO if root == demo_corpus_dir() else root.name)


def load_corpus(path: str | Path, corpus: str | None = None) -> list[Document]:
    """All documents under ``path`` (``demo`` = the shipped corpus), sorted by doc id. Files that
    could not be converted are skipped with one warning naming each (see :func:`read_corpus`)."""
    root, name = _root_and_name(path, corpus)
    files = corpus_files(root)
    identity = tuple(_file_identity(f) for f, _ in files)
    known = _LOADED.get((root, name))
    if known is not None and known[0] == identity:
        return list(known[1])
    loaded = _read(root, name, files, progress=True)  # a bar only on a terminal, and only for conversions
    summary = loaded.report.failure_summary()
    if summary:
        warnings.warn(summary, stacklevel=2)
    _LOADED[(root, name)] = (identity, loaded.docs)
    return list(loaded.docs)


def load_some(path: str | Path, keep, corpus: str | None = None) -> list[Document]:
    """The documents of the files under ``path`` whose relative path and format ``keep(rel, fmt)``
    accepts, read as :func:`load_corpus` reads them (a converted file from the conversion cache),
    the others not even opened: ``golden add`` reads the one document a quote names. A kept file
    that cannot be loaded is absent (:func:`load_corpus` names it)."""
    root, name = _root_and_name(path, corpus)
    files = [(f, fmt) for f, fmt in corpus_files(root) if keep(f.relative_to(root).as_posix(), fmt)]
    try:
        return _read(root, name, files).docs if files else []
    except CorpusError:
        return []


def read_corpus(path: str | Path, corpus: str | None = None, *, cache: ConversionCache | None = None,
                progress: bool = False) -> CorpusLoad:
    """Read the folder now (no in-process memo) and report on every file: ``rag-exp corpus
    convert`` prints the report's formats table."""
    root, name = _root_and_name(path, corpus)
    return _read(root, name, corpus_files(root), cache=cache, progress=progress)


def _file_identity(f: Path) -> tuple:
    try:
        return (str(f), file_identity(f))
    except OSError:
        return (str(f), None)  # unreadable: reading it says so, naming the file


def _read(root: Path, name: str, files: list[tuple[Path, str]], *, cache: ConversionCache | None = None,
          progress: bool = False) -> CorpusLoad:
    if not files:
        raise CorpusError(f"corpus folder {root} holds no .md files (nor .txt, .html, .pdf, .docx or .pptx)",
                          hint="put documents there, or convert HTML first: rag-exp corpus import-html HTML_DIR OUT_DIR")
    docs: dict[str, Document] = {}
    origin: dict[str, Path] = {}
    results: list[FileResult] = []
    cache = cache or ConversionCache()
    todo = [(f, fmt) for f, fmt in files if fmt not in ("md", "unsupported", "link")]
    bar = _progress(len(todo), progress)
    with ConversionWorker() as worker:  # a child process, started on the first file the cache lacks
        _read_files(root, name, files, cache, worker, bar, docs, origin, results)
    if bar is not None:
        bar.close()
    report = LoadReport(root, tuple(results))
    if not docs:
        raise CorpusError(f"no document in {root} could be loaded: {report.failure_summary()}",
                          hint="see rag-exp corpus convert FOLDER for each file's reason")
    return CorpusLoad([docs[k] for k in sorted(docs)], report)


def _read_files(root: Path, name: str, files: list[tuple[Path, str]], cache: ConversionCache,
                worker: ConversionWorker, bar, docs: dict[str, Document], origin: dict[str, Path],
                results: list[FileResult]) -> None:
    for f, fmt in files:
        rel = f.relative_to(root).as_posix()
        refused = _refusal(f, root, rel, fmt)
        if refused:
            results.append(FileResult(printable(rel), fmt, failure=refused))
            continue
        if fmt == "md":
            try:
                raw = _markdown_text(f, root)
            except Refused as exc:  # over the size limit, not a regular file: skipped like any format
                results.append(FileResult(rel, fmt, failure=exc.reason))
                continue
            except OSError as exc:
                raise CorpusError(f"{f}: cannot read: {exc.strerror}") from None
            doc = _markdown_document(raw, f, root, name)  # raises CorpusError, naming the file, as it always has
            del raw
            results.append(FileResult(rel, fmt, chars=len(doc.text)))
        elif fmt == "unsupported":
            hint = _UNSUPPORTED[f.suffix.lower()]
            results.append(FileResult(rel, fmt, failure=f"unsupported format {f.suffix.lower()}: {hint}"))
            continue
        else:
            doc, result = _load_other(f, root, rel, fmt, name, cache, worker)
            results.append(result)
            if bar is not None:
                bar.update(1)
            if doc is None:
                continue
        if doc.doc_id in docs:
            raise CorpusError(
                f"duplicate document id {doc.doc_id!r} in {origin[doc.doc_id]} and {f}",
                hint="give each file a distinct source_uri (or doc_id) in its front matter",
            )
        docs[doc.doc_id] = doc
        origin[doc.doc_id] = f


def _progress(total: int, progress: bool):
    if not progress or total == 0:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="Converting documents", unit="file", disable=None)


def _load_other(f: Path, root: Path, rel: str, fmt: str, corpus: str, cache: ConversionCache,
                worker: ConversionWorker) -> tuple[Document | None, FileResult]:
    """A .txt read or a converted file, or None and the reason it was skipped. Never raises for
    the file's content: every failure is one line in the report."""
    try:
        data = read_inside(f, root, MAX_FILE_BYTES)  # the size limit is checked before reading
    except Refused as exc:
        return None, FileResult(rel, fmt, failure=exc.reason)
    except OSError as exc:
        return None, FileResult(rel, fmt, failure=f"cannot read: {exc.strerror or exc}")
    if fmt == "txt":
        return _text_document(data, rel, f, corpus)
    suffix = f.suffix.lower()
    converter = converter_for(suffix)
    file_sha = hashlib.sha256(data).hexdigest()
    key = entry_key(file_sha, suffix, converter)
    hit = cache.get(key, worker.limits)
    cached, seconds = hit is not None, 0.0
    if hit is None:
        t = time.perf_counter()
        hit, at_limit = worker.convert(data, suffix)  # a child process with a time and memory limit
        seconds = time.perf_counter() - t
        cache.put(key, hit, worker.limits if at_limit else None)
    if isinstance(hit, str):
        return None, FileResult(rel, fmt, converter, seconds=seconds, cached=cached, failure=hit)
    conv: Converted = hit
    doc = Document(doc_id=rel, source_uri=rel, title=conv.title or f.stem, doc_type="doc", text=conv.text,
                   corpus=corpus, source=SourceFile(path=rel, file_sha256=file_sha, converter=conv.converter,
                                                    pages=conv.pages, headings=conv.headings))
    return doc, FileResult(rel, fmt, conv.converter, chars=len(conv.text), seconds=seconds, cached=cached)


def _text_document(data: bytes, rel: str, f: Path, corpus: str) -> tuple[Document | None, FileResult]:
    if not data.strip():
        return None, FileResult(rel, "txt", failure="empty file")
    try:
        raw = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return None, FileResult(rel, "txt", failure=f"not valid UTF-8 (byte {exc.start}); "
                                "convert it, e.g. iconv -f latin1 -t utf-8")
    if "\x00" in raw:
        return None, FileResult(rel, "txt", failure="contains NUL bytes (a binary file named .txt?)")
    text = raw.replace("\r\n", "\n")
    if not text.strip():
        return None, FileResult(rel, "txt", failure="empty file")
    return (Document(doc_id=rel, source_uri=rel, title=f.stem, doc_type="doc", text=text, corpus=corpus,
                     text_offset=1 if data.startswith(b"\xef\xbb\xbf") else 0),
            FileResult(rel, "txt", chars=len(text)))


def corpus_manifest(docs: list[Document]) -> dict:
    """The corpus version: document ids with content hashes, and one digest over them.

    The digest covers the texts only (as it always has: a Markdown-only corpus keeps its digest),
    so a converter upgrade that leaves the text alone changes nothing downstream, and one that
    changes it changes the content hash. When some documents were converted, ``converters`` maps
    each of them to its converter, the file's sha256 and its page count: which tool made the text
    a run was scored on."""
    ordered = sorted(docs, key=lambda d: d.doc_id)
    entries = {d.doc_id: d.content_hash for d in ordered}
    digest = hashlib.sha256("\n".join(f"{k}\t{v}" for k, v in entries.items()).encode()).hexdigest()
    manifest: dict = {"digest": digest, "n_documents": len(entries), "documents": entries}
    converted = {d.doc_id: {"converter": d.source.converter, "file_sha256": d.source.file_sha256,
                            "pages": len(d.source.pages)} for d in ordered if d.source is not None}
    if converted:
        manifest["converters"] = converted
    return manifest
