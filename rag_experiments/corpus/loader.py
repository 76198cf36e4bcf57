"""Load a corpus folder of Markdown files into :class:`~rag_experiments.types.Document` values.

Each ``*.md`` file may start with a front-matter block::

    ---
    source_uri: postgresql-15/sql-createindex.html
    title: CREATE INDEX
    doc_type: reference
    ---

The document text (what every char span indexes into) is everything after the closing
``---`` line. Without front matter: ``source_uri`` is the path relative to the folder, the
title is the first ``#`` heading (or the file name), ``doc_type`` is ``doc``.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path

from ..cache_key import file_identity
from ..errors import CorpusError
from ..limits import check_text
from ..types import Document

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
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise CorpusError(f"{file}: cannot read: {exc.strerror}") from None
    try:
        raw = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(
            f"{file}: not valid UTF-8 (byte {exc.start})",
            hint="convert it, e.g. iconv -f latin1 -t utf-8",
        ) from None
    check_text(raw, str(file))
    meta, text = _parse_front_matter(raw.replace("\r\n", "\n"), file)
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
    )


# (root, corpus name) -> (every file's identity, the documents): a sweep loads the same corpus
# once per point; a file added, removed or touched changes the identity and the folder is read again
_LOADED: dict[tuple[Path, str], tuple[tuple, list[Document]]] = {}


def load_corpus(path: str | Path, corpus: str | None = None) -> list[Document]:
    """All ``*.md`` documents under ``path`` (``demo`` = the shipped corpus), sorted by doc id."""
    root = resolve_corpus_dir(str(path))
    if not root.is_dir():
        raise CorpusError(f"corpus folder {root} does not exist", hint="pass a folder of .md files, or 'demo'")
    files = sorted(root.rglob("*.md"))
    if not files:
        raise CorpusError(f"corpus folder {root} holds no .md files",
                          hint="convert HTML first: rag-exp corpus import-html HTML_DIR OUT_DIR")
    name = corpus or (DEMO if root == demo_corpus_dir() else root.name)
    identity = tuple(_file_identity(f) for f in files)
    known = _LOADED.get((root, name))
    if known is not None and known[0] == identity:
        return list(known[1])
    docs = _read_documents(files, root, name)
    _LOADED[(root, name)] = (identity, docs)
    return list(docs)


def _file_identity(f: Path) -> tuple:
    try:
        return (str(f), file_identity(f))
    except OSError:
        return (str(f), None)  # unreadable: reading it says so, naming the file


def _read_documents(files: list[Path], root: Path, name: str) -> list[Document]:
    docs: dict[str, Document] = {}
    origin: dict[str, Path] = {}
    for f in files:
        doc = load_document(f, root, name)
        if doc.doc_id in docs:
            raise CorpusError(
                f"duplicate document id {doc.doc_id!r} in {origin[doc.doc_id]} and {f}",
                hint="give each file a distinct source_uri (or doc_id) in its front matter",
            )
        docs[doc.doc_id] = doc
        origin[doc.doc_id] = f
    return [docs[k] for k in sorted(docs)]


def corpus_manifest(docs: list[Document]) -> dict:
    """The corpus version: document ids with content hashes, and one digest over them."""
    entries = {d.doc_id: d.content_hash for d in sorted(docs, key=lambda d: d.doc_id)}
    digest = hashlib.sha256("\n".join(f"{k}\t{v}" for k, v in entries.items()).encode()).hexdigest()
    return {"digest": digest, "n_documents": len(entries), "documents": entries}
