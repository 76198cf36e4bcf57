"""A stored run as a system: the ranked lists of a retriever that cannot be called here, read
from a file and answered per query through the same protocol (``retrieval=stored``,
``rag-exp import-run``), so its run pairs with any other in compare, promote and the gate.

Formats:

* ``trec``: ``QID Q0 DOCNO RANK SCORE TAG`` per line (trec_eval's run format). ``QID`` is the
  golden set's case id. ``DOCNO`` is ``DOC:START-END`` (a span of a corpus document, the
  notation of this tool's own ``run.trec``) or a bare document name (the whole document: a
  document-level run). Lines are ordered by RANK, never by score.
* ``jsonl``: one object per line, ``{"case_id": ..., "passages": [...]}`` (or ``"query"`` instead
  of ``case_id``), the passages as a called system returns them (:mod:`.passages`: offsets or
  text, placed in the corpus the same way).

More passages than k are cut at k (a stored run usually holds 100 or 1000 a query, and every
cutoff of trec_eval reads the head). A case the file has no list for answers an empty list, the
TREC convention (it scores 0), and is counted (``alignment.missing_queries``); a file that
answers none of the golden set's cases is an error naming it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from ..errors import UserError
from ..jsonl import json_line
from .passages import Passage, read_passage

DOCNO = re.compile(r"^(?P<doc>.+):(?P<start>\d+)-(?P<end>\d+)$")  # DOC:START-END (also run.trec's)


def read_stored(path: Path, fmt: str) -> dict[str, list[Passage]]:
    """case id or query -> passages in rank order; UserError naming ``path:line``."""
    if not path.is_file():
        raise UserError(f"retrieval.stored.path: {path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 (byte {exc.start})") from None
    return _read_trec(path, text) if fmt == "trec" else _read_jsonl(path, text)


def trec_run_lines(text: str, where: str, shape: str = "QID Q0 DOCNO RANK SCORE TAG"):
    """``(line number, qid, docno, rank, score)`` of each line of a TREC run file (trec_eval's
    six whitespace-separated fields; blank lines skipped); UserError naming ``where:line``. This
    tool's own ``run.trec`` (rag_experiments.evaluation.runfile) is read through it too."""
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise UserError(f"{where}:{n}: expected '{shape}' (6 fields), got {line[:80]!r}")
        qid, _, docno, rank, score, _tag = parts
        try:
            r, s = int(rank), float(score)
        except ValueError:
            raise UserError(f"{where}:{n}: rank {rank!r} / score {score!r} are not numbers") from None
        yield n, qid, docno, r, s


def _read_trec(path: Path, text: str) -> dict[str, list[Passage]]:
    rows: dict[str, list[tuple[int, int, Passage]]] = {}
    for n, qid, docno, r, s in trec_run_lines(text, str(path)):
        if s != s:
            raise UserError(f"{path}:{n}: score is NaN")
        m = DOCNO.match(docno)
        p = (Passage(m["doc"], int(m["start"]), int(m["end"]), None, s, docno) if m
             else Passage(docno, None, None, None, s, docno))
        rows.setdefault(qid, []).append((r, n, p))
    return {q: [p for _, _, p in sorted(v, key=lambda x: (x[0], x[1]))] for q, v in rows.items()}


def _read_jsonl(path: Path, text: str) -> dict[str, list[Passage]]:
    out: dict[str, list[Passage]] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        rec = json_line(where, line, UserError)
        if not isinstance(rec, dict):
            raise UserError(f"{where}: expected an object with case_id (or query) and passages")
        key = rec.get("case_id") or rec.get("query")
        if not isinstance(key, str) or not key:
            raise UserError(f"{where}: no case_id (or query)")
        passages = rec.get("passages")
        if not isinstance(passages, list):
            raise UserError(f"{where}: passages must be a list")
        if key in out:
            raise UserError(f"{where}: a second list for {key!r}")
        out[key] = [read_passage(p, f"{where}, passage {i}") for i, p in enumerate(passages, start=1)]
    return out


class StoredSearch:
    """``search(query, k)`` over a stored run; the golden set maps each case's query to its id."""

    def __init__(self, path: Path, fmt: str, queries_by_case: dict[str, str]) -> None:
        self.path = path
        lists = read_stored(path, fmt)
        by_query: dict[str, list[Passage]] = {}
        for case_id, query in queries_by_case.items():
            found = lists.get(case_id, lists.get(query))
            if found is not None:
                by_query[query] = found
        if lists and not by_query:
            raise UserError(f"{path}: none of its {len(lists)} lists is for a case of the golden set "
                            f"(first key {next(iter(lists))!r})",
                            hint="QID (trec) / case_id (jsonl) is the golden set's case id; jsonl may give the query")
        if not lists:
            raise UserError(f"{path}: holds no ranked list")
        self.by_query = by_query
        self.missing = 0
        self.digest = hashlib.sha256(path.read_bytes()).hexdigest()

    def __call__(self, query: str, k: int) -> list[Passage]:
        if query not in self.by_query:
            self.missing += 1
            return []
        return self.by_query[query][:k]
