"""Import a classic SMART/TREC test collection (Cranfield 1400, and the like) as a Markdown
corpus and a benchmark golden set.

Files (found in DIR by name, or given with ``--docs/--queries/--qrels``):

* documents, SMART format (``cran.all.1400``, ``*.ALL``): ``.I <id>`` starts a record; field
  markers ``.T`` title, ``.A`` authors, ``.B`` source, ``.W`` text (any other single capital
  letter is a field too, and ignored). Document text = title (one line) + blank line + ``.W``.
* queries, SMART format (``cran.qry``, ``*.QRY``): the ``.W`` text (``.T`` when there is none).
* qrels (``cranqrel``, ``*.REL``): ``query doc grade`` (3 columns) or TREC ``query iter doc
  grade`` (4 columns), whitespace separated.

**Query numbering.** Cranfield's qrels number queries 1..225 *by position* in ``cran.qry``,
whose ``.I`` numbers run 001, 002, 004, ... 365: matching by ``.I`` gives near-zero scores.
``query_numbering="position"`` (the default) matches the n-th query record to qrels query n;
``"id"`` matches the ``.I`` number. Numeric ids are compared as numbers (``001`` = ``1``); the
case records keep the qrels' query number as ``benchmark.query_id``, so exported runs use the
collection's own numbering.

**Encoding.** SMART files are decoded per line as UTF-8 when valid, else Latin-1 (every byte
decodes): never an error, never a guess that loses bytes. Output files are UTF-8.

**Grades.** Default ``cleverdon``: Cranfield grades 1 (complete answer) .. 4 (minimum interest)
become gain ``5 - grade`` (4..1), ``-1`` (no interest) is dropped; gain >= 3 (grades 1, 2) is
golden grade 2, gains 2 and 1 (grades 3, 4) are golden grade 1. See :mod:`.benchmark`.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CorpusError, GoldenSetError
from .benchmark import (Collection, ImportReport, Qrel, RawDoc, grade_map, import_collection, normalize_numeric_id,
                        read_lines)

_MARKER = re.compile(r"^\.([A-Z])(?:[ \t]+(.*))?$")
NUMBERINGS = ("position", "id")


@dataclass
class SmartRecord:
    id: str
    where: str
    fields: dict[str, list[str]] = field(default_factory=dict)

    def text(self, letter: str) -> str:
        return "\n".join(self.fields.get(letter, []))


def read_smart(path: Path, error: type = CorpusError, encoding: str = "auto") -> list[SmartRecord]:
    """The records of a SMART file, in file order; malformed lines raise ``error`` with file:line."""
    records: list[SmartRecord] = []
    cur: SmartRecord | None = None
    letter: str | None = None
    for n, line in read_lines(path, error, encoding):
        m = _MARKER.match(line.rstrip())
        if m:
            marker, rest = m.group(1), (m.group(2) or "").strip()
            if marker == "I":
                if not rest:
                    raise error(f"{path}:{n}: '.I' without a record id")
                if len(rest.split()) != 1:
                    raise error(f"{path}:{n}: record id {rest!r} contains whitespace")
                cur, letter = SmartRecord(rest, f"{path}:{n}"), None
                records.append(cur)
                continue
            if cur is None:
                raise error(f"{path}:{n}: field marker '.{marker}' before the first '.I' record")
            letter = marker
            cur.fields.setdefault(letter, [])
            if rest:
                cur.fields[letter].append(rest)
            continue
        if not line.strip() and letter is None:
            continue
        if cur is None:
            raise error(f"{path}:{n}: text before the first '.I' record: {line[:60]!r}")
        if letter is None:
            raise error(f"{path}:{n}: text outside any field of record {cur.id} (expected a marker "
                        f"such as .T or .W first): {line[:60]!r}")
        cur.fields[letter].append(line)
    if not records:
        raise error(f"{path}: no '.I' records (not a SMART file?)")
    return records


def read_docs(path: Path, encoding: str = "auto") -> list[RawDoc]:
    return [RawDoc(normalize_numeric_id(r.id), r.text("T"), r.text("W"), r.where)
            for r in read_smart(path, CorpusError, encoding)]


def read_queries(path: Path, numbering: str = "position", encoding: str = "auto") -> tuple[dict[str, str], dict[str, str]]:
    """Query key -> text (file order), and key -> file:line. Keys: position (1-based) or ``.I``."""
    if numbering not in NUMBERINGS:
        raise GoldenSetError(f"query numbering must be one of {', '.join(NUMBERINGS)}, got {numbering!r}")
    queries: dict[str, str] = {}
    where: dict[str, str] = {}
    first: dict[str, str] = {}
    for pos, r in enumerate(read_smart(path, GoldenSetError, encoding), start=1):
        rid = normalize_numeric_id(r.id)
        if rid in first:
            raise GoldenSetError(f"{r.where}: duplicate query id {r.id!r} (first at {first[rid]})")
        first[rid] = r.where
        key = str(pos) if numbering == "position" else rid
        text = " ".join((r.text("W") or r.text("T")).split())
        if not text:
            raise GoldenSetError(f"{r.where}: query {r.id!r} has no text (.W)")
        queries[key] = text
        where[key] = r.where
    return queries, where


def read_qrels(path: Path, encoding: str = "auto") -> list[Qrel]:
    """``query doc grade`` or ``query iter doc grade`` lines; numeric ids compared as numbers."""
    qrels = []
    for n, line in read_lines(path, GoldenSetError, encoding):
        cols = line.split()
        if not cols:
            continue
        where = f"{path}:{n}"
        if len(cols) == 3:
            q, d, g = cols
        elif len(cols) == 4:
            q, _, d, g = cols
        else:
            raise GoldenSetError(f"{where}: expected 'query doc grade' (or TREC 'query iter doc grade'), "
                                 f"got {len(cols)} columns: {line.strip()!r}")
        try:
            grade = int(g)
        except ValueError:
            raise GoldenSetError(f"{where}: grade {g!r} is not an integer") from None
        qrels.append(Qrel(normalize_numeric_id(q), normalize_numeric_id(d), grade, where))
    return qrels


def _pick(folder: Path, role: str, patterns: tuple[str, ...], given: str | Path | None) -> Path:
    if given is not None:
        p = Path(given).expanduser()
        p = p if p.is_absolute() else folder / p
        if not p.is_file():
            raise CorpusError(f"{role} file {p} does not exist")
        return p
    found = sorted({p for pat in patterns for p in folder.glob(pat)
                    if p.is_file() and not p.name.lower().endswith((".readme", ".txt.readme", ".md"))})
    if len(found) != 1:
        names = ", ".join(p.name for p in found) or "none"
        raise CorpusError(f"{folder}: cannot tell which file holds the {role} (found: {names})",
                          hint=f"pass --{role} FILE")
    return found[0]


def find_files(folder: Path, docs: str | Path | None = None, queries: str | Path | None = None,
               qrels: str | Path | None = None) -> tuple[Path, Path, Path]:
    return (
        _pick(folder, "docs", ("*.all.*", "*.ALL", "*.all"), docs),
        _pick(folder, "queries", ("*.qry", "*.QRY"), queries),
        _pick(folder, "qrels", ("*qrel", "*qrels", "*.REL", "*.rel"), qrels),
    )


def load_smart(folder: str | Path, *, docs: str | Path | None = None, queries: str | Path | None = None,
               qrels: str | Path | None = None, name: str | None = None, query_numbering: str = "position",
               encoding: str = "auto") -> Collection:
    folder = Path(folder).expanduser().resolve()
    if not folder.is_dir():
        raise CorpusError(f"collection folder {folder} does not exist")
    docs_path, queries_path, qrels_path = find_files(folder, docs, queries, qrels)
    qs, where = read_queries(queries_path, query_numbering, encoding)
    qr = read_qrels(qrels_path, encoding)
    for q in qr:
        if q.query_id not in qs:
            how = (f"{queries_path.name} has {len(qs)} queries, numbered 1..{len(qs)} by position"
                   if query_numbering == "position" else f"no query in {queries_path.name} has .I {q.query_id}")
            raise GoldenSetError(f"{q.where}: query {q.query_id}: {how}",
                                 hint="--query-numbering id matches qrels to the .I numbers instead"
                                 if query_numbering == "position" else "--query-numbering position")
    return Collection(
        name=name or folder.name, docs=tuple(read_docs(docs_path, encoding)), queries=qs, qrels=tuple(qr),
        files={"corpus": str(docs_path), "queries": str(queries_path), "qrels": str(qrels_path),
               "query_numbering": query_numbering},
        source="smart", split="test", query_where=where,
    )


def import_trec(folder: str | Path, corpus_dir: Path, golden_path: Path, *, name: str | None = None,
                docs: str | Path | None = None, queries: str | Path | None = None, qrels: str | Path | None = None,
                grades: str = "cleverdon", query_numbering: str = "position", encoding: str = "auto",
                doc_type: str | None = None, skip_missing: bool = False, progress: bool = False) -> ImportReport:
    t0 = time.perf_counter()
    gm = grade_map(grades)
    coll = load_smart(folder, docs=docs, queries=queries, qrels=qrels, name=name,
                      query_numbering=query_numbering, encoding=encoding)
    return import_collection(coll, Path(corpus_dir), Path(golden_path), gm=gm, doc_type=doc_type,
                             skip_missing=skip_missing, progress=progress, started=t0)
