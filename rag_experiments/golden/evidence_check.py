"""Can every labelled span be scored against the corpus? Checked when a golden set is loaded for
a run, and by ``golden verify`` / ``golden check``, before any work.

A span whose document has the hash recorded with it must lie inside that document
(``0 <= start < end <= len(text)``) and its quote must be the text at its offsets. Otherwise no
chunk can ever cover it and the case scores 0 with exit 0 (``start=9000000`` did exactly that):
such a span is an error naming file:line, the case and the span. A span whose document changed
or was removed is *drift*, reported and counted as before (``golden check`` / ``reanchor``), not
an error. Retired cases, superseded judgements and spans anchored ``stale`` are left out: they
are not scored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ..errors import GoldenSetError
from ..types import Document
from .records import Case, Judgement, Record
from .resolve import current


@dataclass(frozen=True)
class Unscorable:
    line: int  # of the record that holds the span (the anchor record, when one moved it)
    case_id: str
    ref: str
    reason: str

    def describe(self, path: str | Path) -> str:
        return f"{path}:{self.line}: case {self.case_id} ({self.ref}): {self.reason}"


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def unscorable_spans(records: Sequence[Record], docs: Iterable[Document]) -> list[Unscorable]:
    """Labelled spans that point at nothing in a document whose hash says it is unchanged."""
    line_of = {r.id: n for n, r in enumerate(records, start=1)}
    now = current(records)
    by_id = {d.doc_id: d for d in docs}
    out = []
    for sr in (s for s in now.live if s.status != "stale"):
        span = sr.effective
        doc = by_id.get(span.doc_id)
        if doc is None or doc.content_hash != span.doc_hash:
            continue  # drift: counted and reported by drift_status / golden check
        holder = sr.anchor_id if sr.status in ("moved", "fuzzy") else sr.ref.split("#")[0]
        where = line_of.get(holder, 0)
        if not 0 <= span.start < span.end <= len(doc.text):
            out.append(Unscorable(where, sr.case_id, sr.ref, f"span {span.start}..{span.end} lies outside document "
                                  f"{span.doc_id} ({len(doc.text)} chars), whose hash is the one labelled"))
        elif doc.text[span.start:span.end] != span.quote:
            out.append(Unscorable(where, sr.case_id, sr.ref, f"quote {_short(span.quote)} is not the text at "
                                  f"{span.start}..{span.end} of {span.doc_id} ({_short(doc.text[span.start:span.end])}), "
                                  "whose hash is the one labelled"))
    known_cases = {r.id for r in now.cases}
    for n, r in enumerate(records, start=1):
        if isinstance(r, Judgement) and r.case_id not in known_cases and r.id not in now.superseded:
            out.append(Unscorable(n, r.case_id, r.id, "judgement of a case that does not exist"))
    return out


def require_scorable(path: str | Path, records: Sequence[Record], docs: Iterable[Document]) -> None:
    """GoldenSetError naming the first unscorable span (file:line, case id) and how many there are."""
    problems = unscorable_spans(records, docs)
    if problems:
        more = f" (and {len(problems) - 1} more: rag-exp golden verify --golden {path} lists them)" if len(problems) > 1 else ""
        raise GoldenSetError(
            problems[0].describe(path) + more,
            hint="the golden set is append-only: retire the case, or re-anchor the span "
                 "(rag-exp golden reanchor --ref REF --source-uri URI --quote TEXT)",
        )


def require_cases(golden) -> None:
    """A golden set with nothing to score stops the run before any tracking happens."""
    if not golden.scorable:
        n = sum(1 for r in golden.records if isinstance(r, Case))
        why = ("it has no case records" if n == 0 else
               f"none of its {n} cases has relevant, non-stale evidence (retired, judged not relevant or stale)")
        raise GoldenSetError(f"{golden.path}: nothing to evaluate: {why}",
                             hint="point golden.path at a golden set with cases (rag-exp golden stats shows counts)")


def require_same_corpus(path: str | Path, records: Sequence[Record], docs: Sequence[Document], corpus: str) -> None:
    """A golden set none of whose labelled documents is in the corpus was made for another corpus:
    every case would score 0 behind a drift warning. (Some documents missing is drift, reported.)"""
    wanted = {sr.effective.doc_id for sr in current(records).spans if sr.status != "stale"}
    have = {d.doc_id for d in docs}
    if wanted and not wanted & have:
        raise GoldenSetError(
            f"{path}: none of the {len(wanted)} documents its evidence points into is in corpus {corpus} "
            f"({len(have)} documents): the golden set was made for another corpus",
            hint="set corpus.path (and corpus.name) to the corpus the golden set was labelled on",
        )
