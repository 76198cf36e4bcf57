"""Import a BEIR dataset folder as a Markdown corpus and a benchmark golden set.

The BEIR layout (https://github.com/beir-cellar/beir)::

    DIR/corpus.jsonl        {"_id": "...", "title": "...", "text": "...", ...}   (.jsonl.gz too)
    DIR/queries.jsonl       {"_id": "...", "text": "...", ...}
    DIR/qrels/test.tsv      query-id <TAB> corpus-id <TAB> score   (header line; dev.tsv, train.tsv)

Ids are kept as strings (an integer ``_id`` is written as its decimal string); document text is
title + blank line + text. Only queries named in the chosen split's qrels become cases; qrels
scores map to golden grades with a :class:`~.benchmark.GradeMap` (default ``raw``: 2 -> 2,
1 -> 1, 0 dropped; the score is kept as ``qrel_grade``/``qrel_gain``). Unlike BEIR's loader we
never drop an id silently: a qrels line naming an unknown query or document is an error with
its file and line (``--skip-missing`` drops unknown documents and counts them).
"""

from __future__ import annotations

import time
from pathlib import Path

from ..errors import CorpusError, GoldenSetError
from ..jsonl import json_line
from .benchmark import Collection, ImportReport, Qrel, RawDoc, grade_map, import_collection, read_lines

HEADER = ("query-id", "corpus-id", "score")


def _find(folder: Path, stem: str, error: type) -> Path:
    for name in (f"{stem}.jsonl", f"{stem}.jsonl.gz"):
        if (folder / name).is_file():
            return folder / name
    raise error(f"{folder}: no {stem}.jsonl", hint="expected the BEIR layout: corpus.jsonl, queries.jsonl, "
                "qrels/<split>.tsv")


def _records(path: Path, error: type):
    for n, line in read_lines(path, error):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        obj = json_line(where, line, error)
        if not isinstance(obj, dict):
            raise error(f"{where}: a line must be a JSON object")
        _id = obj.get("_id")
        if isinstance(_id, int) and not isinstance(_id, bool):
            _id = str(_id)
        if not isinstance(_id, str) or not _id.strip():
            raise error(f"{where}: missing or empty '_id'")
        text = obj.get("text")
        if not isinstance(text, str):
            raise error(f"{where}: field 'text' is missing or not a string (id {_id!r})")
        yield where, _id, obj, text


def read_corpus(path: Path) -> list[RawDoc]:
    docs = []
    for where, _id, obj, text in _records(path, CorpusError):
        title = obj.get("title") or ""
        if not isinstance(title, str):
            raise CorpusError(f"{where}: field 'title' is not a string (id {_id!r})")
        docs.append(RawDoc(_id, title, text, where))
    return docs


def read_queries(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    queries: dict[str, str] = {}
    where_of: dict[str, str] = {}
    for where, _id, _obj, text in _records(path, GoldenSetError):
        if _id in queries:
            raise GoldenSetError(f"{where}: duplicate query id {_id!r} (first at {where_of[_id]})")
        queries[_id] = text
        where_of[_id] = where
    return queries, where_of


def read_qrels(path: Path) -> list[Qrel]:
    qrels = []
    for n, line in read_lines(path, GoldenSetError):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 3:
            cols = line.split()
        cols = [c.strip() for c in cols]
        if n == 1 and tuple(c.lower() for c in cols) == HEADER:
            continue
        where = f"{path}:{n}"
        if len(cols) != 3:
            raise GoldenSetError(f"{where}: expected 3 columns 'query-id corpus-id score', got {len(cols)}: {line!r}")
        try:
            score = int(cols[2])
        except ValueError:
            raise GoldenSetError(f"{where}: score {cols[2]!r} is not an integer") from None
        if not cols[0] or not cols[1]:
            raise GoldenSetError(f"{where}: empty query id or corpus id")
        qrels.append(Qrel(cols[0], cols[1], score, where))
    return qrels


def load_beir(folder: str | Path, split: str = "test", name: str | None = None) -> Collection:
    folder = Path(folder).expanduser().resolve()
    if not folder.is_dir():
        raise CorpusError(f"BEIR folder {folder} does not exist")
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        have = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
        raise GoldenSetError(f"{folder}: no qrels/{split}.tsv",
                             hint=f"available splits: {', '.join(have)}" if have else "expected qrels/<split>.tsv")
    corpus_path = _find(folder, "corpus", CorpusError)
    queries_path = _find(folder, "queries", GoldenSetError)
    queries, where_of = read_queries(queries_path)
    return Collection(
        name=name or folder.name, docs=tuple(read_corpus(corpus_path)), queries=queries,
        qrels=tuple(read_qrels(qrels_path)),
        files={"corpus": str(corpus_path), "queries": str(queries_path), "qrels": str(qrels_path)},
        source="beir", split=split, query_where=where_of,
    )


def import_beir(folder: str | Path, corpus_dir: Path, golden_path: Path, *, split: str = "test",
                name: str | None = None, grades: str = "raw", doc_type: str | None = None,
                skip_missing: bool = False, progress: bool = False) -> ImportReport:
    t0 = time.perf_counter()
    gm = grade_map(grades)
    coll = load_beir(folder, split, name)
    return import_collection(coll, Path(corpus_dir), Path(golden_path), gm=gm, doc_type=doc_type,
                             skip_missing=skip_missing, progress=progress, started=t0)
