"""Corpus drift: find labelled passages again after the corpus was edited (``anchor`` records).

Every labelled span (a case's evidence, a judgement's span) stores its quote and the content
hash of its document at labelling time. :func:`reanchor` compares each span's *effective* span
(the original, or the span of its latest ``moved``/``fuzzy`` anchor) with the current corpus:

1. document hash unchanged -> nothing to do (no record);
2. document changed, the quote still at its offsets -> unchanged (no record);
3. the quote found verbatim elsewhere in the same document -> ``moved`` (similarity 1.0); found
   more than once -> the occurrence nearest the old offset (earlier wins a tie), said in ``note``;
4. found only approximately -> ``fuzzy`` with its similarity (:mod:`.fuzzy`, threshold
   :data:`FUZZY_THRESHOLD`);
5. not found, or the document was removed -> ``stale`` (no span; excluded from metrics).

The new span's ``quote`` is the *current* document text at the new offsets and its
``doc_hash`` the current content hash, so the next run finds the hash unchanged: running
twice appends nothing the second time. Records are only ever appended
(:meth:`GoldenFile.append`). A span that is already ``stale`` is searched again when its
document changed since the stale record; when found it gets a ``moved``/``fuzzy`` record.

Similarity is measured against the **labelled** quote (the text the judge saw), never against
an earlier fuzzy re-anchoring, so successive small edits cannot drift a label further than the
threshold from what was judged. A verbatim match of an earlier fuzzy text is therefore still
``fuzzy``. A human re-anchoring (``rag-exp golden reanchor --ref ... --source-uri ... --quote
...``, :func:`manual_anchor`: a ``moved`` record with ``by: {kind: human}``) vouches for its
passage, which becomes the reference text from then on.

Evaluation never calls :func:`reanchor` (it must not write the golden set); it calls
:func:`drift_status` and warns (:func:`drift_warning`).
"""

from __future__ import annotations

import getpass
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..types import Document
from .add import locate_unique
from .build import doc_span
from .fuzzy import FUZZY_THRESHOLD, DocIndex, locate, similarity
from .golden_file import GoldenFile
from .records import Case, Span, new_id
from .resolve import GoldenSet, SpanRef, current

ALGORITHM = "anchor-v1"
OUTCOMES = ("unchanged", "moved", "fuzzy", "stale", "still_stale")


# == re-anchoring ==============================================================================
@dataclass(frozen=True)
class AnchorOutcome:
    """What happened to one span whose document changed (or disappeared)."""

    ref: str
    case_id: str
    source: str
    grade: int
    outcome: str  # unchanged | moved | fuzzy | stale | still_stale
    old: Span
    new: Span | None = None
    similarity: float | None = None
    note: str = ""
    candidate: Span | None = None  # for stale: the best window below the threshold, if any
    record: dict | None = None


@dataclass(frozen=True)
class AnchorReport:
    golden_path: Path
    dry_run: bool
    fuzzy_threshold: float
    spans: int
    counts: dict[str, int]  # OUTCOMES, plus doc_unchanged / in_place (the two kinds of unchanged)
    outcomes: tuple[AnchorOutcome, ...]  # every span whose document changed or vanished
    records: tuple[dict, ...]  # appended (dry run: would be appended)
    seconds: float
    cases: dict[str, str] = field(default_factory=dict, repr=False)  # case id -> query

    @property
    def moved(self) -> int:
        return self.counts["moved"]

    @property
    def fuzzy(self) -> int:
        return self.counts["fuzzy"]

    @property
    def stale(self) -> int:
        return self.counts["stale"]

    def summary(self) -> str:
        c = self.counts
        verb = "would append" if self.dry_run else "appended"
        return (f"{self.spans} spans: unchanged {c['unchanged']} (document unchanged {c['doc_unchanged']}, "
                f"document changed but passage in place {c['in_place']}), moved {c['moved']}, fuzzy {c['fuzzy']}, "
                f"stale {c['stale']}, still stale {c['still_stale']}; {verb} {len(self.records)} anchor records "
                f"in {self.seconds:.2f} s")


def _anchor_record(sr: SpanRef, status: str, *, span: Span | None, similarity: float | None, note: str,
                   checked_hash: str, extra: dict | None = None) -> dict:
    key = span.key if span else ("", "", "")
    rec = {
        "type": "anchor",
        "id": new_id("a", sr.ref, sr.anchor_id or "", status, checked_hash, *key),
        "case_id": sr.case_id,
        "ref": sr.ref,
        "status": status,
        "similarity": None if similarity is None else round(similarity, 4),
        "previous": {"doc_id": sr.effective.doc_id, "start": sr.effective.start, "end": sr.effective.end,
                     "doc_hash": sr.effective.doc_hash},
    }
    if note:
        rec["note"] = note
    if span is not None:
        rec["span"] = span.to_json()
    else:
        rec["checked_doc_hash"] = checked_hash  # "" when the document was removed
    if extra:
        rec.update(extra)
    return rec


def reanchor(golden: GoldenFile | str | Path, docs: list[Document], *, fuzzy_threshold: float = FUZZY_THRESHOLD,
             dry_run: bool = False) -> AnchorReport:
    """Re-anchor every labelled span against ``docs``; append ``anchor`` records (unless ``dry_run``)."""
    if not 0 < fuzzy_threshold <= 1:
        raise UserError(f"fuzzy threshold must be in (0, 1], got {fuzzy_threshold}")
    t0 = time.perf_counter()
    gf = golden if isinstance(golden, GoldenFile) else GoldenFile(golden)
    records = gf.read_records()
    by_id = {d.doc_id: d for d in docs}
    indexes: dict[str, DocIndex] = {}
    method = {"algorithm": ALGORITHM, "fuzzy_threshold": fuzzy_threshold}
    counts = Counter({k: 0 for k in (*OUTCOMES, "doc_unchanged", "in_place")})
    outcomes: list[AnchorOutcome] = []
    new_records: list[dict] = []

    def emit(outcome: str, rec: dict | None = None, **kw) -> None:
        counts[outcome] += 1
        new_records.extend([rec] if rec else [])
        outcomes.append(AnchorOutcome(**base, outcome=outcome, record=rec, **kw))

    refs = current(records).spans
    for sr in refs:
        eff = sr.effective
        doc = by_id.get(eff.doc_id)
        now_hash = doc.content_hash if doc else ""
        if sr.status == "stale" and sr.stale_checked_hash == now_hash:
            counts["still_stale"] += 1  # nothing changed since it was found stale
            continue
        if sr.status != "stale" and now_hash == eff.doc_hash:
            counts["unchanged"] += 1
            counts["doc_unchanged"] += 1
            continue
        base = dict(ref=sr.ref, case_id=sr.case_id, source=sr.source, grade=sr.grade, old=eff)
        if doc is None:
            if sr.status == "stale":
                counts["still_stale"] += 1
                continue
            rec = _anchor_record(sr, "stale", span=None, similarity=None, checked_hash="",
                                 note=f"document {eff.doc_id} was removed from the corpus", extra={"method": method})
            emit("stale", rec, note=rec["note"])
            continue
        index = indexes.get(doc.doc_id) or indexes.setdefault(doc.doc_id, DocIndex(doc.text))
        m = locate(index, eff.quote, eff.start, sr.reference.quote, fuzzy_threshold)
        if m.status == "in_place" and sr.status != "stale":
            counts["in_place"] += 1
            emit("unchanged", new=eff, similarity=m.similarity, note="document changed; passage still at its offsets")
            continue
        if m.status == "none":
            candidate = doc_span(doc, m.start, m.end) if m.start >= 0 else None
            if sr.status == "stale":
                emit("still_stale", similarity=m.similarity if candidate is not None else None,
                     note=m.note or "passage not found", candidate=candidate)
                continue
            note = "passage not found in the changed document" + (f"; {m.note}" if m.note else "")
            sim = m.similarity if candidate is not None else None
            rec = _anchor_record(sr, "stale", span=None, similarity=sim, note=note, checked_hash=now_hash,
                                 extra={"method": method})
            emit("stale", rec, similarity=sim, note=note, candidate=candidate)
            continue
        status = "fuzzy" if m.status == "fuzzy" or m.similarity < 1.0 else "moved"
        note = m.note
        if sr.status == "stale":
            note = "found again after being stale" + (f"; {note}" if note else "")
        span = doc_span(doc, m.start, m.end)
        rec = _anchor_record(sr, status, span=span, similarity=m.similarity, note=note, checked_hash=now_hash,
                             extra={"method": method})
        emit(status, rec, new=span, similarity=m.similarity, note=note)
    written = new_records if dry_run or not new_records else gf.append(new_records)
    queries = {r.id: r.query for r in records if isinstance(r, Case)}
    return AnchorReport(gf.path, dry_run, fuzzy_threshold, len(refs), dict(counts), tuple(outcomes),
                        tuple(written), time.perf_counter() - t0, queries)


def manual_anchor(golden: GoldenFile | str | Path, docs: list[Document], ref: str, source_uri: str, quote: str, *,
                  author: str | None = None, reason: str | None = None) -> dict | None:
    """A human points ``ref`` at a passage (``--source-uri`` + ``--quote``, as ``golden add`` takes
    them): appends a ``moved`` anchor with ``by: {kind: human}``. Returns the record, or None when
    the ref already points exactly there. The passage may be in another document (a renamed page)."""
    gf = golden if isinstance(golden, GoldenFile) else GoldenFile(golden)
    sr = next((s for s in current(gf.read_records()).spans if s.ref == ref), None)
    if sr is None:
        raise UserError(f"{gf.path}: no labelled span {ref!r}",
                        hint="refs are '<case id>#<evidence index>' or a judgement id (see rag-exp golden check)")
    doc = next((d for d in docs if source_uri in (d.source_uri, d.doc_id)), None)
    if doc is None:
        raise UserError(f"document {source_uri!r} is not in the corpus", hint="check --corpus and the source uri")
    start, end, _ = locate_unique(doc.text, quote, source_uri)
    span = doc_span(doc, start, end)
    if sr.status != "stale" and sr.effective == span:
        return None
    sim = similarity(span.quote, sr.original.quote)
    who = author or os.environ.get("USER") or getpass.getuser()
    rec = _anchor_record(sr, "moved", span=span, similarity=sim, checked_hash=span.doc_hash,
                         note=reason or "re-anchored by hand", extra={"by": {"kind": "human", "name": who}})
    written, = gf.append([rec])
    return written


# == check: what a human must fix ==============================================================


@dataclass(frozen=True)
class StaleItem:
    """A relevant labelled span that is stale (recorded, or found so by this check)."""

    ref: str
    case_id: str
    query: str
    source: str  # evidence | judgement
    grade: int
    old: Span  # the last span that was found
    reason: str
    recorded: bool  # True: a stale anchor is in the golden set; False: `reanchor` would write it
    candidate: Span | None = None  # the best window below the threshold, if any
    similarity: float | None = None
    case_all_stale: bool = False  # every relevant span of the case is stale: excluded from metrics
    doc_removed: bool = False


@dataclass(frozen=True)
class CheckReport:
    pending: AnchorReport  # the dry run of `reanchor`
    stale: tuple[StaleItem, ...]
    review: tuple[dict, ...]  # fuzzy anchors (recorded or pending): ref, case_id, similarity, span, recorded
    stale_not_relevant: int  # stale spans judged not relevant (NO): nothing to fix

    @property
    def clean(self) -> bool:
        return not self.stale and not self.pending.records


def check(golden: GoldenFile | str | Path, docs: list[Document], *,
          fuzzy_threshold: float = FUZZY_THRESHOLD) -> CheckReport:
    """Read-only: what ``reanchor`` would record, every stale relevant span (with the best
    candidate passage for the fix command) and the fuzzy anchors worth a look. Retired cases and
    superseded judgements are left out."""
    gf = golden if isinstance(golden, GoldenFile) else GoldenFile(golden)
    report = reanchor(gf, docs, fuzzy_threshold=fuzzy_threshold, dry_run=True)
    by_id = {d.doc_id: d for d in docs}
    pending = {o.ref: o for o in report.outcomes}
    live = current(gf.read_records()).live
    stale: dict[str, tuple[SpanRef, str, bool, Span | None, float | None]] = {}  # sr, why, recorded, candidate, sim
    review: list[dict] = []
    for sr in live:
        o = pending.get(sr.ref)
        outcome = o.outcome if o else None
        if outcome == "stale":
            stale[sr.ref] = (sr, o.note, False, o.candidate, o.similarity)
        elif sr.status == "stale" and outcome in (None, "still_stale"):
            doc, cand, sim = by_id.get(sr.effective.doc_id), None, None
            why = f"document {sr.effective.doc_id} was removed from the corpus"
            if doc is not None:
                m = locate(DocIndex(doc.text), sr.effective.quote, sr.effective.start, sr.reference.quote,
                           fuzzy_threshold)
                why = m.note or "passage not found"
                if m.start >= 0:
                    cand, sim = doc_span(doc, m.start, m.end), m.similarity
            stale[sr.ref] = (sr, why, True, cand, sim)
        elif outcome == "fuzzy" or (o is None and sr.status == "fuzzy"):
            sim = o.similarity if o else similarity(sr.effective.quote, sr.reference.quote)
            review.append({"ref": sr.ref, "case_id": sr.case_id, "similarity": sim,
                           "span": o.new if o else sr.effective, "labelled": sr.reference, "recorded": o is None})
    items, not_relevant = [], 0
    for ref, (sr, why, recorded, cand, sim) in stale.items():
        if sr.grade == 0:
            not_relevant += 1
            continue
        all_stale = all(r.ref in stale for r in live if r.case_id == sr.case_id and r.grade > 0)
        items.append(StaleItem(ref, sr.case_id, report.cases.get(sr.case_id, ""), sr.source, sr.grade, sr.effective,
                               why, recorded, cand, sim, all_stale, sr.effective.doc_id not in by_id))
    review.sort(key=lambda r: r["similarity"])
    return CheckReport(report, tuple(items), tuple(review), not_relevant)


# == drift status for evaluation (read-only) ===================================================
def drift_status(golden_path: str | Path | GoldenSet, docs: list[Document]) -> dict[str, int]:
    """Read-only drift counts for a run to log (``golden.drift.<key>``) and warn about.

    ``golden_path``: a golden-set path (or a loaded ``GoldenSet``, whose records are reused).
    Keys: ``spans``; ``unchanged`` (document hash as labelled/anchored); ``in_place`` (document
    changed, passage still at its offsets: harmless); ``pending`` (document changed or removed,
    passage no longer at its offsets, no anchor for it yet: run ``rag-exp golden reanchor``);
    ``pending_removed`` (of those, the document is gone); ``pending_cases`` (cases with a pending
    span); ``anchored`` (moved/fuzzy anchors in effect); ``stale`` (already anchored stale).
    """
    records = golden_path.records if isinstance(golden_path, GoldenSet) else GoldenFile(golden_path).read_records()
    by_id = {d.doc_id: d for d in docs}
    out = dict.fromkeys(("spans", "unchanged", "in_place", "pending", "pending_removed", "pending_cases",
                         "anchored", "stale"), 0)
    pending_cases: set[str] = set()
    for sr in current(records).spans:
        out["spans"] += 1
        if sr.status == "stale":
            out["stale"] += 1
            continue
        if sr.status in ("moved", "fuzzy"):
            out["anchored"] += 1
        eff = sr.effective
        doc = by_id.get(eff.doc_id)
        if doc is not None and doc.content_hash == eff.doc_hash:
            out["unchanged"] += 1
        elif doc is not None and doc.text[eff.start:eff.end] == eff.quote:
            out["in_place"] += 1
        else:
            out["pending"] += 1
            out["pending_removed"] += int(doc is None)
            pending_cases.add(sr.case_id)
    out["pending_cases"] = len(pending_cases)
    return out


def drift_warning(status: dict[str, int], golden_path: str | Path | None = None,
                  corpus: str | Path | None = None) -> str | None:
    """A warning sentence when :func:`drift_status` found pending spans; None otherwise."""
    if not status.get("pending"):
        return None
    cmd = "rag-exp golden check" + (f" --golden {golden_path}" if golden_path else "") + (
        f" --corpus {corpus}" if corpus else "")
    removed = f", {status['pending_removed']} in removed documents" if status.get("pending_removed") else ""
    return (f"corpus drift: {status['pending']} labelled spans in {status['pending_cases']} golden cases point "
            f"into documents edited since labelling{removed}, and were not re-anchored; their relevance is "
            f"scored against the old offsets. Run `{cmd}`, then `rag-exp golden reanchor` (a new golden-set "
            f"version).")

