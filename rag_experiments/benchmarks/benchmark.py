"""What the benchmark importers (:mod:`.beir`, :mod:`.trec`) share: grade mapping, the corpus
folder writer and the golden-set builder.

An imported benchmark is two things, by default under ``benchmarks/<name>/``:

* ``corpus/``: one Markdown file per document, front matter ``doc_id`` (the collection's own
  document id), ``source_uri`` (``<name>/<doc id>``), ``title`` and ``doc_type`` (``<name>``); the
  document text is the title, a blank line, and the body.
* ``golden.jsonl`` (``golden-<split>.jsonl`` for a split other than ``test``): one ``case`` of
  kind ``benchmark`` per query with at least one relevant document, written through
  :meth:`~rag_experiments.golden.golden_file.GoldenFile.append`. Its evidence is every relevant
  document, **whole** (``start`` 0, ``end`` len(text), ``quote`` the text), so with
  ``eval.level=document`` a document's best chunk matches it.

**Grades.** The golden schema has two grades (2 = YES / highly relevant, 1 = PART / partially
relevant). A :class:`GradeMap` turns a qrels grade into a trec_eval *gain* (or drops the
line), and the gain into a golden grade: ``2`` when ``gain >= high``, else ``1``. Each
evidence entry keeps ``qrel_grade`` (the grade as written in the qrels file) and ``qrel_gain``
(the trec_eval gain), so ``rag-exp export-run`` can write qrels that reproduce the graded
trec_eval numbers of the original collection.

=============  ===========================================  ======================================
map            gain                                         golden grade
=============  ===========================================  ======================================
``cleverdon``  ``5 - grade`` for grades 1..4; -1 and 5       2 for gain >= 3 (grades 1, 2: complete
               ("no interest") dropped                      answer / high relevance), else 1
``raw``        the grade itself; grades <= 0 dropped        2 for gain >= 2, else 1 (BEIR: 2 -> 2,
                                                            1 -> 1, 0 dropped)
``binary``     1 for any grade > 0; grades <= 0 dropped     2
=============  ===========================================  ======================================

Queries whose every qrels line is dropped have no relevant document: they are not cases
(a case with no relevant evidence is an error), and the import report lists them.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from ..corpus.loader import load_corpus, load_document
from ..errors import CorpusError, GoldenSetError
from ..golden.build import span_json
from ..golden.golden_file import GoldenFile
from ..golden.records import new_id
from ..limits import check_query
from ..types import Document
from .grade_maps import GRADE_MAPS, GradeMap, grade_map  # noqa: F401 - re-exported (beir, trec)

KIND = "benchmark"


# -- grades: rag_experiments/corpus/grade_maps.py ---------------------------------------------------


# -- parsed collection --------------------------------------------------------------------------
@dataclass(frozen=True)
class RawDoc:
    doc_id: str
    title: str
    body: str
    where: str  # file:line of the record, for messages


@dataclass(frozen=True)
class Qrel:
    query_id: str
    doc_id: str
    grade: int
    where: str


@dataclass(frozen=True)
class Collection:
    """A parsed benchmark: documents, queries (id -> text, in file order) and qrels lines."""

    name: str
    docs: tuple[RawDoc, ...]
    queries: dict[str, str]
    qrels: tuple[Qrel, ...]
    files: dict[str, str]  # role -> path, recorded in provenance
    source: str  # beir | smart
    split: str = "test"
    query_where: dict[str, str] = field(default_factory=dict)


@dataclass
class ImportReport:
    name: str
    corpus_dir: Path
    golden_path: Path
    documents: int = 0
    empty_documents: list[str] = field(default_factory=list)
    corpus_reused: bool = False
    queries: int = 0
    cases: int = 0
    qrels: int = 0
    relevant: int = 0
    dropped_grades: Counter = field(default_factory=Counter)
    missing_docs: list[str] = field(default_factory=list)
    empty_doc_qrels: list[str] = field(default_factory=list)  # "query:doc" judged on an empty document
    no_relevant: list[str] = field(default_factory=list)
    raw_grades: Counter = field(default_factory=Counter)
    golden_grades: Counter = field(default_factory=Counter)
    grade_map: str = ""
    seconds: float = 0.0
    golden_sha256: str = ""

    def summary(self) -> str:
        def short(ids: Sequence[str]) -> str:
            return ", ".join(ids[:8]) + (" ..." if len(ids) > 8 else "")

        lines = [
            f"{self.name}: {self.documents} documents -> {self.corpus_dir}"
            + (" (unchanged, reused)" if self.corpus_reused else ""),
            f"  {self.cases} benchmark cases from {self.queries} queries, {self.relevant} relevant documents "
            f"-> {self.golden_path}",
            f"  golden sha256 {self.golden_sha256[:16]}",
            f"  qrels lines: {self.qrels}; grades {dict(sorted(self.raw_grades.items()))}; grade map "
            f"{self.grade_map}: golden grades {dict(sorted(self.golden_grades.items()))}",
        ]
        if self.dropped_grades:
            lines.append(f"  dropped by the grade map: {sum(self.dropped_grades.values())} lines "
                         f"(grades {dict(sorted(self.dropped_grades.items()))})")
        if self.no_relevant:
            lines.append(f"  {len(self.no_relevant)} queries have no relevant document and are not cases: "
                         f"{short(self.no_relevant)}")
        if self.empty_documents:
            lines.append(f"  {len(self.empty_documents)} empty documents skipped: {short(self.empty_documents)}")
        if self.empty_doc_qrels:
            lines.append(f"  {len(self.empty_doc_qrels)} relevance judgements name an empty document and are "
                         f"dropped (query:doc): {short(self.empty_doc_qrels)}")
        if self.missing_docs:
            lines.append(f"  {len(self.missing_docs)} qrels lines name a document not in the corpus (skipped): "
                         f"{short(self.missing_docs)}")
        lines.append(f"  {self.seconds:.1f} s")
        return "\n".join(lines)


# -- document text and files ------------------------------------------------------------------------
_NUMERIC = re.compile(r"^[0-9]+$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def normalize_numeric_id(value: str) -> str:
    """``"001"`` -> ``"1"``: SMART files number queries and documents with or without zeros."""
    return str(int(value)) if _NUMERIC.match(value) else value


def clean_text(text: str) -> str:
    """Newlines as ``\\n``, no NUL (PostgreSQL text cannot hold it), no trailing spaces, no
    leading or trailing blank lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    lines = [ln.rstrip() for ln in text.split("\n")]
    return "\n".join(lines).strip("\n")


def one_line(text: str) -> str:
    return " ".join(text.split())


def document_text(title: str, body: str) -> str:
    """The indexed text: title, a blank line, body; ends with one newline ('' if both empty)."""
    parts = [p for p in (clean_text(one_line(title)), clean_text(body)) if p.strip()]
    return "\n\n".join(parts) + "\n" if parts else ""


def file_name(doc_id: str) -> str:
    """A safe, distinct file name for a document id (unsafe characters replaced, plus a hash)."""
    safe = _UNSAFE.sub("_", doc_id)
    if safe != doc_id or safe.startswith(".") or len(safe) > 120:
        digest = hashlib.sha1(doc_id.encode("utf-8")).hexdigest()[:10]
        safe = f"{safe.lstrip('.')[:100]}-{digest}"
    return safe + ".md"


def render(doc: Document) -> str:
    meta = {"doc_id": doc.doc_id, "source_uri": doc.source_uri, "title": doc.title, "doc_type": doc.doc_type}
    return "---\n" + "".join(f"{k}: {v}\n" for k, v in meta.items()) + "---\n" + doc.text


def check_id(value: str, what: str, where: str, error: type = CorpusError) -> str:
    if not value or value != value.strip() or any(c.isspace() for c in value):
        raise error(f"{where}: {what} {value!r} is empty or contains whitespace (TREC ids cannot)")
    return value


def build_documents(coll: Collection, doc_type: str, report: ImportReport) -> dict[str, Document]:
    docs: dict[str, Document] = {}
    first: dict[str, str] = {}
    for raw in coll.docs:
        check_id(raw.doc_id, "document id", raw.where)
        if raw.doc_id in first:
            raise CorpusError(f"{raw.where}: duplicate document id {raw.doc_id!r} (first at {first[raw.doc_id]})")
        first[raw.doc_id] = raw.where
        text = document_text(raw.title, raw.body)
        if not text:
            report.empty_documents.append(raw.doc_id)
            continue
        docs[raw.doc_id] = Document(
            doc_id=raw.doc_id, source_uri=f"{coll.name}/{raw.doc_id}", title=one_line(raw.title) or raw.doc_id,
            doc_type=doc_type, text=text, corpus=coll.name,
        )
    return docs


def _existing_markdown(folder: Path) -> bool:
    return folder.is_dir() and any(folder.rglob("*.md"))


def write_corpus(docs: dict[str, Document], out: Path, name: str, progress: bool = False) -> bool:
    """Write the corpus folder; return True when an identical corpus already existed there.

    Files are written to a temporary sibling folder, read back with the corpus loader (the
    evidence spans index into exactly what it returns) and renamed into place at the end, so an
    interrupted import leaves no half-written corpus.
    """
    if _existing_markdown(out):
        existing = {d.doc_id: d.text for d in load_corpus(out, name)}
        if existing == {k: d.text for k, d in docs.items()}:
            return True
        raise CorpusError(f"corpus folder {out} already holds a different corpus",
                          hint="import into an empty folder (or delete this one first)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CorpusError(f"corpus folder {out} exists and is not empty",
                          hint="import into an empty folder (or delete this one first)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        shard = len(docs) > 20_000
        used: set[str] = set()
        items = list(docs.values())
        bar = None
        if progress and len(items) > 2000:
            from tqdm import tqdm

            bar = tqdm(total=len(items), desc="writing documents", unit="doc")
        for doc in items:
            fname = file_name(doc.doc_id)
            if fname.lower() in used:  # case-insensitive file systems
                fname = file_name(doc.doc_id + "\x00")
            used.add(fname.lower())
            folder = tmp / hashlib.sha1(doc.doc_id.encode()).hexdigest()[:2] if shard else tmp
            folder.mkdir(exist_ok=True)
            path = folder / fname
            path.write_text(render(doc), encoding="utf-8")
            back = load_document(path, tmp, name)
            if (back.doc_id, back.text, back.source_uri) != (doc.doc_id, doc.text, doc.source_uri):
                raise CorpusError(f"{path}: the written document does not read back identically "
                                  f"(doc id {doc.doc_id!r})")
            if bar is not None:
                bar.update()
        if bar is not None:
            bar.close()
        if out.exists():
            out.rmdir()  # empty (checked above)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return False


# -- golden set ---------------------------------------------------------------------------------
def build_cases(coll: Collection, docs: dict[str, Document], gm: GradeMap, report: ImportReport,
                skip_missing: bool, empty: set[str]) -> list[dict]:
    by_query: dict[str, list[tuple[Qrel, int]]] = {}
    seen: dict[tuple[str, str], Qrel] = {}
    for q in coll.qrels:
        report.qrels += 1
        report.raw_grades[q.grade] += 1
        if q.query_id not in coll.queries:
            raise GoldenSetError(f"{q.where}: query {q.query_id!r} is not in the queries file "
                                 f"{coll.files.get('queries', '')}")
        key = (q.query_id, q.doc_id)
        if key in seen:
            if seen[key].grade == q.grade:
                continue  # an exact repeat says nothing new
            raise GoldenSetError(f"{q.where}: query {q.query_id!r} and document {q.doc_id!r} judged again with "
                                 f"grade {q.grade} (grade {seen[key].grade} at {seen[key].where})")
        seen[key] = q
        gain = gm.gain(q.grade, q.where)
        if gain is None:
            report.dropped_grades[q.grade] += 1
            continue
        if q.doc_id in empty:
            # the collection itself holds the document with no text (Cranfield 471, 995): it cannot
            # be indexed or retrieved, so its judgements are dropped and reported
            report.empty_doc_qrels.append(f"{q.query_id}:{q.doc_id}")
            continue
        if q.doc_id not in docs:
            if skip_missing:
                report.missing_docs.append(q.doc_id)
                continue
            raise GoldenSetError(f"{q.where}: document {q.doc_id!r} is not in the corpus",
                                 hint="pass --skip-missing to drop such qrels lines (they are counted)")
        by_query.setdefault(q.query_id, []).append((q, gain))

    judged = {q.query_id for q in coll.qrels}
    cases: list[dict] = []
    provenance = {
        "method": "import", "source": coll.source, "collection": coll.name, "split": coll.split,
        "files": coll.files, "grade_map": gm.name, "grade_rule": gm.rule,
    }
    for qid, text in coll.queries.items():
        if qid not in judged:
            continue  # another split's query
        report.queries += 1
        rel = by_query.get(qid)
        if not rel:
            report.no_relevant.append(qid)
            continue
        where = coll.query_where.get(qid, coll.files.get('queries', ''))
        if not text.strip():
            raise GoldenSetError(f"{where}: query {qid!r} is empty")
        check_query(one_line(text), f"{where}: query {qid!r}")
        evidence = []
        for q, gain in rel:
            doc = docs[q.doc_id]
            golden = gm.golden_grade(gain)
            report.golden_grades[golden] += 1
            evidence.append({**span_json(doc, 0, len(doc.text)), "grade": golden,
                             "qrel_grade": q.grade, "qrel_gain": gain})
        report.relevant += len(evidence)
        doc_type = docs[rel[0][0].doc_id].doc_type
        cases.append({
            "type": "case", "id": new_id("c", KIND, coll.name, coll.split, qid), "query": one_line(text),
            "kind": KIND, "doc_type": doc_type, "evidence": evidence, "provenance": provenance,
            "benchmark": {"collection": coll.name, "split": coll.split, "query_id": qid},
        })
    report.cases = len(cases)
    return cases


def import_collection(coll: Collection, corpus_dir: Path, golden_path: Path, *, gm: GradeMap,
                      doc_type: str | None = None, skip_missing: bool = False, progress: bool = False,
                      started: float | None = None) -> ImportReport:
    """Write ``coll`` as a corpus folder and a new golden-set file; the report says what happened."""
    t0 = started if started is not None else time.perf_counter()
    golden = GoldenFile(golden_path)
    if golden.exists() and golden.path.stat().st_size > 0:
        raise GoldenSetError(f"golden set {golden.path} already exists; a golden set is append-only and an "
                             "import is not re-run into it",
                             hint="import into a new file (--golden PATH), or delete it if it was a mistake")
    report = ImportReport(coll.name, corpus_dir, golden.path, grade_map=gm.name)
    docs = build_documents(coll, doc_type or coll.name, report)
    report.documents = len(docs)
    if not docs:
        raise CorpusError(f"{coll.files.get('corpus', coll.name)}: no documents")
    # build (and validate) the cases before writing anything
    cases = build_cases(coll, docs, gm, report, skip_missing, set(report.empty_documents))
    if not cases:
        raise GoldenSetError(f"{coll.files.get('qrels', coll.name)}: no query has a relevant document "
                             f"under grade map {gm.name!r}")
    report.corpus_reused = write_corpus(docs, corpus_dir, coll.name, progress)
    golden.append(cases)
    report.golden_sha256 = golden.digest()
    report.seconds = time.perf_counter() - t0
    return report


# -- line readers shared by the parsers ----------------------------------------------------------------
def read_lines(path: Path, error: type, encoding: str = "utf-8") -> Iterator[tuple[int, str]]:
    """(line number, line without its line ending) of a text file, streamed (``.gz`` too).

    ``encoding="auto"`` (SMART files): each line as UTF-8 if it is valid UTF-8, else as Latin-1
    (every byte decodes). Otherwise a line that does not decode is an error naming the line.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        fh = opener(path, "rb")
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror}") from None
    with fh:
        for n, raw in enumerate(fh, start=1):
            raw = raw.rstrip(b"\n").rstrip(b"\r")
            try:
                line = raw.decode("utf-8" if encoding == "auto" else encoding)
            except UnicodeDecodeError as exc:
                if encoding != "auto":
                    raise error(f"{path}:{n}: not valid {encoding} (byte {exc.start} of the line)",
                                hint="re-encode the file as UTF-8") from None
                line = raw.decode("latin-1")
            yield n, line
