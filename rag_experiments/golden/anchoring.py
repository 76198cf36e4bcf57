"""Corpus drift: find labelled passages again after the corpus was edited (``anchor`` records).

Every labelled span (a case's evidence, a judgement's span) stores its quote and the content
hash of its document at labelling time. :func:`reanchor` compares each span's *effective* span
(the original, or the span of its latest ``moved``/``fuzzy`` anchor) with the current corpus:

1. document hash unchanged -> nothing to do (no record);
2. document changed, the quote still at its offsets -> unchanged (no record);
3. the quote found verbatim elsewhere in the same document -> ``moved`` (similarity 1.0); found
   more than once -> the occurrence nearest the old offset (earlier wins a tie), said in ``note``;
4. found only approximately -> ``fuzzy`` with its similarity (algorithm below);
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

Approximate matching (``fuzzy``), standard library only (``difflib``), on tokens: ``\\w+`` words
and single punctuation characters, whitespace ignored (re-flowed text is not a change):

* seeds: the quote's lower-cased token 3-grams looked up in an index of the document's 3-grams
  (built once per document); each hit votes for an alignment (document token index - quote
  token index); 3-grams occurring more than 50 times in the document are ignored; a short quote
  whose every 3-gram was edited falls back to single tokens. Votes within 20% of the quote's
  length are clustered; the 3 best-voted clusters, plus the old offset, are candidate regions;
* each region (alignment -20% .. alignment + length +20%) is aligned to the quote with
  ``difflib.SequenceMatcher(autojunk=False)``; its matching blocks (>= 3 tokens), extrapolated to
  the quote's first and last token, give a window, refined by trying starts and then ends within
  +-5% of the quote's length (window length always within the quote's length +-20%);
* a window must contain every identifier of the labelled quote (inline `code` and snake_case
  words, :func:`guard_tokens`), so a near-duplicate passage about another identifier (the ``IN``
  paragraph next to the ``NOT IN`` one) is never taken for it;
* similarity = ``SequenceMatcher.ratio()`` over tokens = 2 * matched / (window + quote tokens),
  about 1 - (changed tokens / quote tokens); the best window wins (ties: nearest the old
  offset); when a second, non-overlapping window scores within 0.02 of it (and above the
  threshold) the match is ambiguous: ``stale``, not a guess.

Threshold 0.85 (:data:`FUZZY_THRESHOLD`): about 15% of the passage's tokens may change (a
reworded clause in a typical 60-token passage, a fixed typo, a changed default value); more
than that and the passage may now say something else, so a human must judge it again (``stale``;
``rag-exp golden check`` prints the fix). Measured on the demo golden set (550 spans): with one
word replaced in each of the 472 non-overlapping labelled passages (and a paragraph inserted at
the top of every page), 421 were re-anchored to exactly the edited passage, none to a wrong
window, and 51 went ``stale`` by design (49: the replaced word was part of an identifier; 2:
ambiguous or a 5-token quote below 0.85); with every labelled passage deleted, 467 of 472 went
``stale`` and 5 (1%) were taken for a near-duplicate sibling (similarity 0.86-0.98, e.g.
"timing of database I/O" for "timing of WAL I/O"): ``rag-exp golden check`` lists fuzzy anchors
for review for that reason.

Evaluation never calls :func:`reanchor` (it must not write the golden set); it calls
:func:`drift_status` and warns (:func:`drift_warning`).
"""

from __future__ import annotations

import bisect
import getpass
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path
from typing import Iterable

from ..errors import UserError
from ..types import Document
from .records import Span, new_id, parse_span
from .store import GoldenFile

FUZZY_THRESHOLD = 0.85
LENGTH_SLACK = 0.2  # candidate windows: the quote's length +-20%
ALGORITHM = "anchor-v1"
GRAM = 3
MAX_GRAM_HITS = 50
MAX_CLUSTERS = 3
MIN_BLOCK = 3
OUTCOMES = ("unchanged", "moved", "fuzzy", "stale", "still_stale")
AMBIGUITY_MARGIN = 0.02  # two fuzzy windows closer than this: do not guess, mark stale
_TOKEN = re.compile(r"\w+|[^\w\s]")
_CODE = re.compile(r"`([^`\n]+)`")
_IDENT = re.compile(r"[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+")


# == which span each ref points at now ========================================================
@dataclass(frozen=True)
class SpanRef:
    """One labelled span and its anchoring state, from the records."""

    ref: str  # "<case id>#<evidence index>" or a judgement id
    case_id: str
    source: str  # evidence | judgement
    grade: int  # evidence grade, or the judgement's verdict as a grade (YES 2, PART 1, NO 0)
    original: Span  # as labelled
    effective: Span  # the span of the latest moved/fuzzy anchor, else the original
    status: str = "ok"  # ok | moved | fuzzy | stale (the latest anchor's)
    anchor_id: str | None = None  # the latest anchor record's id
    stale_checked_hash: str | None = None  # the document hash a stale record was checked against
    judged: Span | None = None  # the span of the latest human anchor (its text was vouched for)

    @property
    def reference(self) -> Span:
        """The text whose relevance was judged: the labelled span, or a human re-anchoring of it."""
        return self.judged or self.original


def span_refs(records: Iterable[dict]) -> list[SpanRef]:
    """Every labelled span (all case evidence, all judgements) with its latest anchor applied."""
    from .records import VERDICTS

    records = list(records)
    latest: dict[str, dict] = {}
    last_good: dict[str, dict] = {}
    human: dict[str, dict] = {}
    for r in records:
        if r["type"] == "anchor":
            latest[r["ref"]] = r
            if r["status"] != "stale":
                last_good[r["ref"]] = r
                if (r.get("by") or {}).get("kind") == "human":
                    human[r["ref"]] = r

    def make(ref: str, case_id: str, source: str, grade: int, raw: dict) -> SpanRef:
        original = parse_span(raw, ref)
        good = last_good.get(ref)
        effective = parse_span(good["span"], f"anchor {good['id']}") if good else original
        a = latest.get(ref)
        if a is None:
            return SpanRef(ref, case_id, source, grade, original, effective)
        checked = a.get("checked_doc_hash") if a["status"] == "stale" else None
        judged = parse_span(human[ref]["span"], f"anchor {human[ref]['id']}") if ref in human else None
        return SpanRef(ref, case_id, source, grade, original, effective, a["status"], a["id"], checked, judged)

    out: list[SpanRef] = []
    for r in records:
        if r["type"] == "case":
            for i, ev in enumerate(r["evidence"]):
                out.append(make(f"{r['id']}#{i}", r["id"], "evidence", int(ev["grade"]), ev))
        elif r["type"] == "judgement":
            out.append(make(r["id"], r["case_id"], "judgement", VERDICTS[r["verdict"]], r["span"]))
    return out


# == locating a quote in a changed document ===================================================
@dataclass(frozen=True)
class Match:
    status: str  # in_place | moved | fuzzy | none
    start: int = -1
    end: int = -1
    similarity: float = 0.0
    note: str = ""


def tokenize(text: str) -> tuple[list[str], list[int], list[int]]:
    """Tokens (``\\w+`` words and single punctuation characters; whitespace dropped) with their
    char starts and ends."""
    toks, starts, ends = [], [], []
    for m in _TOKEN.finditer(text):
        toks.append(m.group())
        starts.append(m.start())
        ends.append(m.end())
    return toks, starts, ends


def similarity(a: str, b: str) -> float:
    """Token-level ``SequenceMatcher.ratio()``: 2 * matched tokens / (tokens of a + tokens of b).
    Whitespace is ignored (re-flowed text scores 1.0); 1.0 also for identical strings."""
    if a == b:
        return 1.0
    ta, tb = tokenize(a)[0], tokenize(b)[0]
    if not ta and not tb:
        return 1.0
    return SequenceMatcher(None, ta, tb, autojunk=False).ratio()


class DocIndex:
    """A document's tokens with a lazily built token-3-gram index (for fuzzy seeds)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens, self.starts, self.ends = tokenize(text)
        self._grams: dict[tuple[str, ...], list[int]] | None = None

    def grams(self) -> dict[tuple[str, ...], list[int]]:
        """Lower-cased token 3-gram -> token indexes where it starts."""
        if self._grams is None:
            low = [t.lower() for t in self.tokens]
            grams: dict[tuple[str, ...], list[int]] = {}
            for i in range(len(low) - GRAM + 1):
                grams.setdefault(tuple(low[i:i + GRAM]), []).append(i)
            self._grams = grams
        return self._grams


def _find_all(text: str, quote: str) -> list[int]:
    out, i = [], text.find(quote)
    while i >= 0:
        out.append(i)
        i = text.find(quote, i + 1)
    return out


def _seeds(index: DocIndex, qtoks: list[str], old_tok: int) -> list[int]:
    """Candidate alignments (token index of the quote's first token), best-voted first."""
    low = [t.lower() for t in qtoks]
    grams = index.grams()
    votes: list[int] = []
    for n in (GRAM, 1):  # 3-grams; for a short quote whose every 3-gram was edited, single tokens
        if n == 1:
            uni: dict[str, list[int]] = {}
            for g, ps in grams.items():
                uni.setdefault(g[0], []).extend(ps)
        for i in range(len(low) - n + 1):
            hits = grams.get(tuple(low[i:i + n]), []) if n == GRAM else uni.get(low[i], [])
            if 0 < len(hits) <= MAX_GRAM_HITS:
                votes.extend(p - i for p in hits)
        if votes:
            break
    if not votes:
        return [old_tok]
    votes.sort()
    tol = max(2, int(len(qtoks) * LENGTH_SLACK))
    clusters: list[list[int]] = [[votes[0]]]
    for v in votes[1:]:
        if v - clusters[-1][-1] <= tol:
            clusters[-1].append(v)
        else:
            clusters.append([v])
    centres = sorted(((len(c), c[len(c) // 2]) for c in clusters), key=lambda nc: (-nc[0], abs(nc[1] - old_tok), nc[1]))
    chosen = [c for _, c in centres[:MAX_CLUSTERS]]
    if all(abs(c - old_tok) > tol for c in chosen):
        chosen.append(old_tok)  # a passage reworded in place: always try the old offset too
    return chosen


def guard_tokens(quote: str) -> frozenset[str]:
    """The labelled quote's identifiers: inline code (`...`) and snake_case words. A fuzzy window
    must contain every one of them, so a near-duplicate passage about another identifier (an
    ``IN`` paragraph next to the ``NOT IN`` one, the neighbouring row of an error-code table) is
    never taken for the labelled one."""
    return frozenset(_CODE.findall(quote)) | frozenset(_IDENT.findall(quote))


def fuzzy_find(index: DocIndex, quote: str, old_start: int) -> list[Match]:
    """The most similar window per candidate region, best first (see the module docstring).

    Windows start and end on token boundaries; only windows holding every
    :func:`guard_tokens` identifier of ``quote`` are eligible."""
    qtoks = tokenize(quote)[0]
    n, ntok = len(qtoks), len(index.tokens)
    if not n or not ntok:
        return []
    slack = max(1, int(n * LENGTH_SLACK))
    min_len, max_len = max(1, n - slack), n + slack
    guard = guard_tokens(quote)
    old_tok = min(bisect.bisect_left(index.starts, old_start), ntok - 1)
    text, toks = index.text, index.tokens
    sm = SequenceMatcher(None, autojunk=False)
    sm.set_seq2(qtoks)
    found: list[Match] = []
    tried: set[tuple[int, int]] = set()
    for align in _seeds(index, qtoks, old_tok):
        r_lo, r_hi = max(0, align - slack), min(ntok, align + n + slack)
        sm.set_seq1(toks[r_lo:r_hi])
        blocks = [b for b in sm.get_matching_blocks() if b.size >= MIN_BLOCK] or \
            [b for b in sm.get_matching_blocks() if b.size]
        if not blocks:
            continue
        first, last = blocks[0], blocks[-1]
        lo = max(0, r_lo + first.a - first.b)  # extrapolated to the quote's first and last token
        hi = min(ntok, r_lo + last.a + last.size + (n - last.b - last.size))
        radius = max(1, n // 20)

        best, best_i = Match("none"), lo

        def score(i: int, j: int) -> None:
            nonlocal best, best_i
            if not (0 <= i < j <= ntok and min_len <= j - i <= max_len) or (i, j) in tried:
                return
            tried.add((i, j))
            s, e = index.starts[i], index.ends[j - 1]
            if guard and any(tok not in text[s:e] for tok in guard):
                return
            sm.set_seq1(toks[i:j])
            if sm.real_quick_ratio() < best.similarity or sm.quick_ratio() < best.similarity:
                return
            sim = sm.ratio()
            if sim > best.similarity or (sim == best.similarity and best.status != "none"
                                         and abs(s - old_start) < abs(best.start - old_start)):
                best, best_i = Match("fuzzy", s, e, sim), i

        # coordinate search: the best start with the end fixed, then the best end for that start
        for i in sorted(range(lo - radius, lo + radius + 1), key=lambda x: abs(x - lo)):
            score(i, hi)
        for j in sorted(range(hi - radius, hi + radius + 1), key=lambda x: abs(x - hi)):
            score(best_i, j)
        if best.status != "none":
            found.append(_pad(best, text, quote))
    found.sort(key=lambda m: (-m.similarity, abs(m.start - old_start), m.start))
    return found


def _pad(m: Match, text: str, quote: str) -> Match:
    """Token windows have no outer whitespace: give back the whitespace the labelled quote had."""
    lead = len(quote) - len(quote.lstrip())
    trail = len(quote) - len(quote.rstrip())
    s, e = m.start, m.end
    while lead and s > 0 and text[s - 1] == quote[lead - 1]:
        s, lead = s - 1, lead - 1
    k = len(quote) - trail
    while trail and e < len(text) and text[e] == quote[k]:
        e, k, trail = e + 1, k + 1, trail - 1
    return Match(m.status, s, e, m.similarity, m.note)


def locate(index: DocIndex, quote: str, old_start: int, labelled: str, threshold: float) -> Match:
    """Where ``quote`` (the effective span's text) is in the document now.

    ``labelled`` is the quote as labelled: the similarity of any new window is measured
    against it, and a window whose text differs from it is ``fuzzy``.
    """
    text = index.text
    if text[old_start:old_start + len(quote)] == quote:
        return _graded(Match("in_place", old_start, old_start + len(quote), 1.0), text, labelled)
    for q in dict.fromkeys((quote, labelled)):  # the current text first, then the labelled one
        hits = _find_all(text, q)
        if hits:
            pos = min(hits, key=lambda p: (abs(p - old_start), p))
            note = "" if len(hits) == 1 else (
                f"quote found {len(hits)} times (at {', '.join(map(str, hits[:8]))}); "
                f"chose the occurrence nearest the old offset {old_start}")
            m = _graded(Match("moved", pos, pos + len(q), 1.0, note), text, labelled)
            if m.similarity < threshold:  # an earlier fuzzy text, further from the label than allowed now
                return Match("none", m.start, m.end, m.similarity, f"{m.note}; similarity {m.similarity:.3f} "
                             f"< threshold {threshold}")
            return m
    found = fuzzy_find(index, labelled, old_start)
    if not found:
        return Match("none")
    m = found[0]
    if m.similarity < threshold:
        return Match("none", m.start, m.end, m.similarity,
                     f"best approximate match {m.similarity:.3f} < threshold {threshold} at {m.start}..{m.end}")
    rival = next((r for r in found[1:] if r.end <= m.start or r.start >= m.end), None)
    if rival is not None and rival.similarity >= threshold and m.similarity - rival.similarity < AMBIGUITY_MARGIN:
        return Match("none", m.start, m.end, m.similarity,
                     f"ambiguous: two passages match almost equally ({m.similarity:.3f} at {m.start}..{m.end}, "
                     f"{rival.similarity:.3f} at {rival.start}..{rival.end})")
    return Match("fuzzy", m.start, m.end, m.similarity, f"approximate match, similarity {m.similarity:.3f}")


def _graded(m: Match, text: str, labelled: str) -> Match:
    """An exact hit of an earlier fuzzy text is still fuzzy with respect to the labelled quote."""
    window = text[m.start:m.end]
    if window == labelled:
        return m
    return Match(m.status if m.status == "in_place" else "fuzzy", m.start, m.end, similarity(window, labelled),
                 (m.note + "; " if m.note else "") + "text differs from the labelled quote")


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
    def unchanged(self) -> int:
        return self.counts["unchanged"]

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


def _span_json(doc: Document, doc_hash: str, start: int, end: int) -> dict:
    return {"doc_id": doc.doc_id, "source_uri": doc.source_uri, "start": start, "end": end,
            "quote": doc.text[start:end], "doc_hash": doc_hash}


def _anchor_record(sr: SpanRef, status: str, *, span: dict | None, similarity: float | None, note: str,
                   checked_hash: str, extra: dict | None = None) -> dict:
    key = (span["doc_id"], span["start"], span["end"]) if span else ("", "", "")
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
        rec["span"] = span
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
    records = gf.read()
    by_id = {d.doc_id: d for d in docs}
    hashes = {d.doc_id: d.content_hash for d in docs}
    indexes: dict[str, DocIndex] = {}
    method = {"algorithm": ALGORITHM, "fuzzy_threshold": fuzzy_threshold}
    counts = Counter({k: 0 for k in (*OUTCOMES, "doc_unchanged", "in_place")})
    outcomes: list[AnchorOutcome] = []
    new_records: list[dict] = []
    refs = span_refs(records)
    for sr in refs:
        eff = sr.effective
        doc = by_id.get(eff.doc_id)
        now_hash = hashes.get(eff.doc_id, "")
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
            counts["stale"] += 1
            new_records.append(rec)
            outcomes.append(AnchorOutcome(**base, outcome="stale", note=rec["note"], record=rec))
            continue
        if doc.doc_id not in indexes:
            indexes[doc.doc_id] = DocIndex(doc.text)
        index = indexes[doc.doc_id]
        m = locate(index, eff.quote, eff.start, sr.reference.quote, fuzzy_threshold)
        if m.status == "in_place" and sr.status != "stale":
            counts["unchanged"] += 1
            counts["in_place"] += 1
            outcomes.append(AnchorOutcome(**base, outcome="unchanged", new=eff, similarity=m.similarity,
                                          note="document changed; passage still at its offsets"))
            continue
        if m.status == "none":
            candidate = (parse_span(_span_json(doc, now_hash, m.start, m.end), "candidate")
                         if m.start >= 0 else None)
            if sr.status == "stale":
                counts["still_stale"] += 1
                outcomes.append(AnchorOutcome(**base, outcome="still_stale",
                                              similarity=m.similarity if candidate is not None else None,
                                              note=m.note or "passage not found", candidate=candidate))
                continue
            note = "passage not found in the changed document" + (f"; {m.note}" if m.note else "")
            sim = m.similarity if candidate is not None else None
            rec = _anchor_record(sr, "stale", span=None, similarity=sim, note=note, checked_hash=now_hash,
                                 extra={"method": method})
            counts["stale"] += 1
            new_records.append(rec)
            outcomes.append(AnchorOutcome(**base, outcome="stale", similarity=sim, note=note,
                                          candidate=candidate, record=rec))
            continue
        status = "fuzzy" if m.status == "fuzzy" or m.similarity < 1.0 else "moved"
        note = m.note
        if sr.status == "stale":
            note = "found again after being stale" + (f"; {note}" if note else "")
        span = _span_json(doc, now_hash, m.start, m.end)
        rec = _anchor_record(sr, status, span=span, similarity=m.similarity, note=note, checked_hash=now_hash,
                             extra={"method": method})
        counts[status] += 1
        new_records.append(rec)
        outcomes.append(AnchorOutcome(**base, outcome=status, new=parse_span(span, sr.ref), similarity=m.similarity,
                                      note=note, record=rec))
    written = new_records if dry_run or not new_records else gf.append(new_records)
    queries = {r["id"]: r["query"] for r in records if r["type"] == "case"}
    return AnchorReport(gf.path, dry_run, fuzzy_threshold, len(refs), dict(counts), tuple(outcomes),
                        tuple(written), time.perf_counter() - t0, queries)


def manual_anchor(golden: GoldenFile | str | Path, docs: list[Document], ref: str, source_uri: str, quote: str, *,
                  author: str | None = None, reason: str | None = None) -> dict | None:
    """A human points ``ref`` at a passage (``--source-uri`` + ``--quote``, as ``golden add`` takes
    them): appends a ``moved`` anchor with ``by: {kind: human}``. Returns the record, or None when
    the ref already points exactly there. The passage may be in another document (a renamed page)."""
    from .add import locate_unique

    gf = golden if isinstance(golden, GoldenFile) else GoldenFile(golden)
    refs = {sr.ref: sr for sr in span_refs(gf.read())}
    sr = refs.get(ref)
    if sr is None:
        raise UserError(f"{gf.path}: no labelled span {ref!r}",
                        hint="refs are '<case id>#<evidence index>' or a judgement id (see rag-exp golden check)")
    doc = next((d for d in docs if source_uri in (d.source_uri, d.doc_id)), None)
    if doc is None:
        raise UserError(f"document {source_uri!r} is not in the corpus", hint="check --corpus and the source uri")
    start, end, _ = locate_unique(doc.text, quote, source_uri)
    span = _span_json(doc, doc.content_hash, start, end)
    if sr.status != "stale" and sr.effective == parse_span(span, ref):
        return None
    sim = similarity(span["quote"], sr.original.quote)
    who = author or os.environ.get("USER") or getpass.getuser()
    rec = _anchor_record(sr, "moved", span=span, similarity=sim, checked_hash=span["doc_hash"],
                         note=reason or "re-anchored by hand", extra={"by": {"kind": "human", "name": who}})
    written, = gf.append([rec])
    return written


# == check: what a human must fix ==============================================================
QUOTE_PLACEHOLDER = "PASTE THE PASSAGE THAT NOW ANSWERS THE QUESTION"


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
    records = gf.read()
    report = reanchor(gf, docs, fuzzy_threshold=fuzzy_threshold, dry_run=True)
    retired = {r["target"] for r in records if r["type"] == "retire"}
    superseded = {r["supersedes"] for r in records if r["type"] == "judgement" and r.get("supersedes")}
    queries = report.cases
    by_id = {d.doc_id: d for d in docs}
    pending = {o.ref: o for o in report.outcomes}
    live = [sr for sr in span_refs(records) if sr.case_id not in retired and sr.ref not in superseded]
    stale_refs: dict[str, tuple[SpanRef, str, bool, Span | None, float | None]] = {}
    review: list[dict] = []
    for sr in live:
        o = pending.get(sr.ref)
        if o is not None and o.outcome == "stale":
            stale_refs[sr.ref] = (sr, o.note, False, o.candidate, o.similarity)
        elif sr.status == "stale" and (o is None or o.outcome == "still_stale"):
            doc = by_id.get(sr.effective.doc_id)
            cand, sim, why = None, None, f"document {sr.effective.doc_id} was removed from the corpus"
            if doc is not None:
                m = locate(DocIndex(doc.text), sr.effective.quote, sr.effective.start, sr.reference.quote,
                           fuzzy_threshold)
                why = m.note or "passage not found"
                if m.start >= 0:
                    cand = parse_span(_span_json(doc, doc.content_hash, m.start, m.end), sr.ref)
                    sim = m.similarity
            stale_refs[sr.ref] = (sr, why, True, cand, sim)
        elif o is not None and o.outcome == "fuzzy":
            review.append({"ref": sr.ref, "case_id": sr.case_id, "similarity": o.similarity, "span": o.new,
                           "labelled": sr.reference, "recorded": False})
        elif o is None and sr.status == "fuzzy":
            review.append({"ref": sr.ref, "case_id": sr.case_id, "similarity": similarity(sr.effective.quote,
                           sr.reference.quote), "span": sr.effective, "labelled": sr.reference, "recorded": True})
    relevant_by_case: dict[str, list[str]] = {}
    for sr in live:
        if sr.grade > 0:
            relevant_by_case.setdefault(sr.case_id, []).append(sr.ref)
    items = []
    not_relevant = 0
    for ref, (sr, why, recorded, cand, sim) in stale_refs.items():
        if sr.grade == 0:
            not_relevant += 1
            continue
        all_stale = all(r in stale_refs for r in relevant_by_case.get(sr.case_id, []))
        items.append(StaleItem(ref, sr.case_id, queries.get(sr.case_id, ""), sr.source, sr.grade, sr.effective,
                               why, recorded, cand, sim, all_stale, sr.effective.doc_id not in by_id))
    review.sort(key=lambda r: r["similarity"])
    return CheckReport(report, tuple(items), tuple(review), not_relevant)


def fix_command(item: StaleItem, golden_path: str | Path, corpus: str | Path) -> str:
    """A ready-to-run command that points ``item`` at a passage (the best candidate when there is
    one; otherwise a placeholder to replace), with the same ``--source-uri``/``--quote`` options
    as ``rag-exp golden add``."""
    import shlex

    source = (item.candidate.source_uri if item.candidate
              else "SOURCE_URI_OF_THE_PAGE_THAT_NOW_HAS_IT" if item.doc_removed else item.old.source_uri)
    quote = item.candidate.quote if item.candidate else QUOTE_PLACEHOLDER
    return " ".join([
        "rag-exp golden reanchor", "--golden", shlex.quote(str(golden_path)), "--corpus", shlex.quote(str(corpus)),
        "--ref", shlex.quote(item.ref), "--source-uri", shlex.quote(source), "--quote", shlex.quote(quote),
    ])


# == drift status for evaluation (read-only) ===================================================
def drift_status(golden_path: str | Path | object, docs: list[Document]) -> dict[str, int]:
    """Read-only drift counts for a run to log (``golden.drift.<key>``) and warn about.

    ``golden_path``: a golden-set path (or a loaded ``GoldenSet``, whose records are reused).
    Keys: ``spans``; ``unchanged`` (document hash as labelled/anchored); ``in_place`` (document
    changed, passage still at its offsets: harmless); ``pending`` (document changed or removed,
    passage no longer at its offsets, no anchor for it yet: run ``rag-exp golden reanchor``);
    ``pending_removed`` (of those, the document is gone); ``pending_cases`` (cases with a pending
    span); ``anchored`` (moved/fuzzy anchors in effect); ``stale`` (already anchored stale).
    """
    if hasattr(golden_path, "records") and hasattr(golden_path, "cases"):
        records = list(golden_path.records)  # a loaded GoldenSet
    else:
        records = GoldenFile(golden_path).read()  # type: ignore[arg-type]
    by_id = {d.doc_id: d for d in docs}
    hashes = {d.doc_id: d.content_hash for d in docs}
    out = dict.fromkeys(("spans", "unchanged", "in_place", "pending", "pending_removed", "pending_cases",
                         "anchored", "stale"), 0)
    pending_cases: set[str] = set()
    for sr in span_refs(records):
        out["spans"] += 1
        if sr.status == "stale":
            out["stale"] += 1
            continue
        if sr.status in ("moved", "fuzzy"):
            out["anchored"] += 1
        eff = sr.effective
        doc = by_id.get(eff.doc_id)
        if doc is not None and hashes[eff.doc_id] == eff.doc_hash:
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

