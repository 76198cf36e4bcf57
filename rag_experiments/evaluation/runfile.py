"""Ranked lists as a TREC-style run file, so a run can be rescored without re-retrieving.

Every run logs its full ranked list per case (artifact ``run.trec``), one line per hit::

    <case id> Q0 <doc id>:<start>-<end> <rank> <score> <tag>

The ``docno`` is the hit's char span (``DOC_ID:START-END``, the notation ``rag-exp triage
--expected`` takes), not a chunk id: relevance is span overlap (:mod:`.relevance`), so the span
is all a later golden version needs to judge the hit, whatever the chunking was. For a
document-level run (``eval.level=document``) the span is the whole document. Ranks are written
as retrieval gave them; the reader orders by rank, never by score, so ties cannot reorder.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

from ..errors import UserError
from ..retrieval.stored_run import DOCNO, trec_run_lines
from ..types import Hit, RankedList

ARTIFACT = "run.trec"
_SPACE = re.compile(r"\s")  # what str.isspace() and str.split() treat as a separator


def docno(hit: Hit) -> str:
    return f"{hit.doc_id}:{hit.start}-{hit.end}"


def run_file_lines(results: Mapping[str, RankedList], tag: str = "rag-exp") -> Iterable[str]:
    tag = re.sub(r"\s+", "_", tag) or "rag-exp"
    for case_id, ranked in results.items():
        for i, h in enumerate(ranked.hits, start=1):
            name = docno(h)
            if _SPACE.search(case_id) or _SPACE.search(name):
                raise UserError(f"case {case_id!r} / hit {name!r}: whitespace cannot be written to a TREC run file")
            yield f"{case_id} Q0 {name} {i} {float(h.score):.9g} {tag}"


def run_file_text(results: Mapping[str, RankedList], tag: str = "rag-exp") -> str:
    return "".join(line + "\n" for line in run_file_lines(results, tag))


def parse_run_file(text: str, where: str = ARTIFACT) -> dict[str, RankedList]:
    """case id -> ranked list (hits in rank order) from :func:`run_file_text`'s output."""
    rows: dict[str, list[tuple[int, Hit]]] = {}
    for n, case_id, name, r, s in trec_run_lines(text, where, "case_id Q0 DOC:START-END rank score tag"):
        m = DOCNO.match(name)
        if m is None:
            raise UserError(f"{where}:{n}: docno {name!r} is not DOC_ID:START-END")
        hit = Hit(chunk_id=name, doc_id=m["doc"], source_uri=m["doc"], doc_type="", start=int(m["start"]),
                  end=int(m["end"]), score=s, rank=r)
        rows.setdefault(case_id, []).append((r, hit))
    return {cid: RankedList(query="", hits=tuple(h for _, h in sorted(hits, key=lambda x: x[0])))
            for cid, hits in rows.items()}
