"""Is the golden set any good? A report on the cases themselves, before any retriever is measured.

* **Content-word overlap** (by kind): the share of a question's content words that also occur in
  its own evidence passage. Content words are lower-cased ``\\w+`` tokens of two or more
  characters that are not in :data:`STOP_WORDS` (a short English list, written out so the number
  is reproducible). A generated "paraphrase" that copies its passage's words measures keyword
  matching, not understanding, and inflates every score. One project measured 0.746 recall on its
  generated set and 0.385 on a reviewed hand-written one, at overlaps 0.55 and 0.11
  (lossless-claude/lcm#358). Warning: paraphrase mean above :data:`PARAPHRASE_OVERLAP_WARN`
  (0.5). Exact-identifier questions are expected to share the identifier, so they get no warning.
* **Against a hand-written reference** (:func:`reference_groups`, when the set holds both): the mean
  overlap of the *generated* cases (``provenance.method`` ``llm`` or ``agent``: written by a
  model) beside that of the *reference* cases (``provenance.method`` ``human``: written by a person
  with ``golden add``, any kind, ``production`` included, with the evidence the person chose).
  Queries imported from a log (``method: import``) are not in the reference: their relevant
  passages come from pooling, and a pool with a keyword leg finds the passages that share the
  query's words (measured: 12 imported demo queries pooled by BM25 share 0.78). Warning: generated mean above the
  reference's by more than :data:`REFERENCE_GAP_WARN` (0.2): the generated questions are easier to
  find by their words than the real ones (0.55 against 0.11 in lossless-claude/lcm#358).
* **Near-duplicate questions**: pairs whose content-word sets have Jaccard similarity of at least
  :data:`DUPLICATE_JACCARD` (0.8). Each pair counts one paraphrase twice.
* **Coverage**: cases per document type against the corpus's share of each type (a type with
  documents and no case is never measured), and the documents holding the evidence of more than
  :data:`CASES_PER_DOC_SHARE` (5%) of the cases (and more than 5): the metrics lean on them.

Pure functions over the resolved golden set and the corpus documents: no I/O, no model.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from statistics import fmean
from typing import Sequence

STOP_WORDS = frozenset("""
a an the and or but if then else of to in on at by for with from as into onto about over under between
is are was were be been being am do does did done doing have has had having can could may might must shall
should will would not no nor so than too very just also only this that these those there here it its it's
i me my we our you your he she him her they them their what which who whom whose when where why how all any
both each few more most other some such own same up down out off again further once s t don doesn isn
""".split())
_WORD = re.compile(r"\w+")

PARAPHRASE_OVERLAP_WARN = 0.5
REFERENCE_GAP_WARN = 0.2
GENERATED_METHODS = ("llm", "agent")
DUPLICATE_JACCARD = 0.8
CASES_PER_DOC_SHARE = 0.05  # a document holding the evidence of more than 5% of the cases (and > 5 cases)
CASES_PER_DOC_MIN = 5


def content_words(text: str) -> set[str]:
    return {w for w in (m.group().lower() for m in _WORD.finditer(text)) if len(w) >= 2 and w not in STOP_WORDS}


def overlap(question: str, passage: str) -> float | None:
    """|content words of the question that occur in the passage| / |content words of the question|."""
    q = content_words(question)
    if not q:
        return None
    return len(q & content_words(passage)) / len(q)


@dataclass(frozen=True)
class QualityReport:
    n_cases: int
    overlap_by_kind: dict[str, float]  # mean content-word overlap per kind
    n_by_kind: dict[str, int]
    near_duplicates: list[tuple[str, str, float]]  # (case id, case id, Jaccard)
    cases_by_doc_type: dict[str, int]
    corpus_docs_by_doc_type: dict[str, int]
    max_cases_per_doc: int
    docs_over_limit: list[tuple[str, int]]
    warnings: list[str] = field(default_factory=list)
    # generated vs hand-written: {"who", "generated": {n, mean_overlap}, "reference": {...}}; None: not both
    reference: dict | None = None

    def to_json(self) -> dict:
        return {"n_cases": self.n_cases, "overlap_by_kind": self.overlap_by_kind, "n_by_kind": self.n_by_kind,
                "near_duplicates": [list(p) for p in self.near_duplicates],
                "cases_by_doc_type": self.cases_by_doc_type, "corpus_docs_by_doc_type": self.corpus_docs_by_doc_type,
                "max_cases_per_doc": self.max_cases_per_doc, "docs_over_limit": [list(d) for d in self.docs_over_limit],
                "warnings": self.warnings, "reference": self.reference}


_MEMO: dict = {}


def quality_of(golden, docs: Sequence) -> QualityReport:
    """:func:`quality_report` of a loaded golden set, once per golden version and corpus (a sweep
    point asks again for the same set)."""
    key = (golden.digest, len(docs), tuple(d.content_hash for d in docs[:3]))
    if key not in _MEMO:
        if len(_MEMO) > 16:
            _MEMO.clear()
        _MEMO[key] = quality_report(golden.scorable, docs, reference=reference_groups(golden.records))
    return _MEMO[key]


REFERENCE_WHO = ("cases written by a person (provenance.method human) against cases written by a model "
                 "(provenance.method llm or agent)")


def reference_groups(records: Sequence) -> dict[str, str]:
    """case id -> ``reference`` (``provenance.method`` human) or ``generated`` (method ``llm`` /
    ``agent``); other cases (query-log and benchmark imports...) are in neither."""
    out = {}
    for r in records:
        raw = getattr(r, "raw", None) or {}
        if raw.get("type") != "case":
            continue
        method = (raw.get("provenance") or {}).get("method")
        if method == "human":
            out[raw["id"]] = "reference"
        elif method in GENERATED_METHODS:
            out[raw["id"]] = "generated"
    return out


def near_duplicates(words: list[tuple[str, set[str]]], threshold: float) -> list[tuple[str, str, float]]:
    """Every pair (in input order) whose content words have Jaccard >= ``threshold``, with the
    Jaccard rounded to 3 places: what comparing all pairs gives, without comparing all pairs
    (that took 179 s at 10,000 cases, paid by every cold run). Prefix filtering (Bayardo et al.
    2007): a pair with Jaccard >= t shares at least ceil(t * max(|a|, |b|)) words, so with the
    words of every set ordered rarest first, the first |x| - ceil(t |x|) + 1 words of the two
    sets meet; only pairs that share such a prefix word are compared (0.27 s at 10,000)."""
    freq = Counter(w for _, ws in words for w in ws)
    index: dict[str, list[int]] = {}
    found: list[tuple[int, int, float]] = []
    for j, (_, wb) in enumerate(words):
        if not wb:
            continue
        ordered = sorted(wb, key=lambda w: (freq[w], w))
        # the 1e-12 keeps an exact product (t |x| integral) from rounding up: a longer prefix is safe
        prefix = ordered[: len(ordered) - math.ceil(threshold * len(ordered) - 1e-12) + 1]
        seen: set[int] = set()
        for w in prefix:
            for i in index.get(w, ()):
                if i not in seen:
                    seen.add(i)
                    wa = words[i][1]
                    jac = len(wa & wb) / len(wa | wb)
                    if jac >= threshold:
                        found.append((i, j, jac))
            index.setdefault(w, []).append(j)
    found.sort()
    return [(words[i][0], words[j][0], round(jac, 3)) for i, j, jac in found]


def quality_report(cases: Sequence, docs: Sequence = (), reference: dict[str, str] | None = None) -> QualityReport:
    """``cases``: the golden set's scorable cases (EvalCase); ``docs``: the corpus documents;
    ``reference``: :func:`reference_groups` of the records (None: no comparison)."""
    per_kind: dict[str, list[float]] = {}
    per_group: dict[str, list[float]] = {"generated": [], "reference": []}
    words: list[tuple[str, set[str]]] = []
    per_doc: Counter = Counter()
    for c in cases:
        own = [e for e in c.relevant if e.ref.startswith(f"{c.case_id}#")] or list(c.relevant)
        if own:
            value = overlap(c.query, " ".join(e.span.quote for e in own))
            if value is not None:
                per_kind.setdefault(c.kind, []).append(value)
                group = (reference or {}).get(c.case_id)
                if group:
                    per_group[group].append(value)
            per_doc[own[0].span.doc_id] += 1
        words.append((c.case_id, content_words(c.query)))
    dups = near_duplicates(words, DUPLICATE_JACCARD)
    by_type = dict(sorted(Counter(c.doc_type for c in cases).items()))
    corpus_types = dict(sorted(Counter(d.doc_type for d in docs).items()))
    limit = max(CASES_PER_DOC_MIN, CASES_PER_DOC_SHARE * len(cases))
    over = sorted(((d, n) for d, n in per_doc.items() if n > limit), key=lambda x: -x[1])
    report = QualityReport(
        n_cases=len(cases), overlap_by_kind={k: round(fmean(v), 3) for k, v in sorted(per_kind.items())},
        n_by_kind={k: len(v) for k, v in sorted(per_kind.items())}, near_duplicates=dups,
        cases_by_doc_type=by_type, corpus_docs_by_doc_type=corpus_types,
        max_cases_per_doc=max(per_doc.values(), default=0), docs_over_limit=over,
        reference={"who": REFERENCE_WHO, **{g: {"n": len(v), "mean_overlap": round(fmean(v), 3)}
                                            for g, v in per_group.items()}}
        if all(per_group.values()) else None)
    report.warnings.extend(_warnings(report))
    return report


def _warnings(r: QualityReport) -> list[str]:
    out = []
    para = r.overlap_by_kind.get("paraphrase")
    if para is not None and para > PARAPHRASE_OVERLAP_WARN:
        out.append(f"paraphrase questions copy their passage: content-word overlap {para:.2f} > "
                   f"{PARAPHRASE_OVERLAP_WARN} (scores will be inflated); rewrite the worst in your own words "
                   "and retire the originals (rag-exp golden add / golden retire), or regenerate with a prompt "
                   "that forbids the passage's wording")
    if r.reference:
        gen, ref = r.reference["generated"]["mean_overlap"], r.reference["reference"]["mean_overlap"]
        if gen - ref > REFERENCE_GAP_WARN:
            out.append(f"generated questions share {gen:.2f} of their content words with their evidence, the "
                       f"hand-written reference {ref:.2f} ({r.reference['reference']['n']} cases): generated "
                       "scores will run above what real questions get; regenerate with a lower "
                       "--leakage-bar or add real queries (rag-exp golden add / golden import-queries)")
    if r.near_duplicates:
        out.append(f"{len(r.near_duplicates)} near-duplicate question pair(s) (content-word Jaccard >= "
                   f"{DUPLICATE_JACCARD}), e.g. {r.near_duplicates[0][0]} ~ {r.near_duplicates[0][1]}: retire one "
                   "of each pair (rag-exp golden retire CASE_ID --reason duplicate)")
    missing = [t for t in r.corpus_docs_by_doc_type if t not in r.cases_by_doc_type]
    if missing:
        out.append(f"document type(s) with documents and no case: {', '.join(missing)}: nothing measures them; "
                   "generate or add cases there")
    if r.docs_over_limit:
        d, n = r.docs_over_limit[0]
        out.append(f"{len(r.docs_over_limit)} document(s) hold the evidence of more than {CASES_PER_DOC_SHARE:.0%} of "
                   f"the cases (most: {d}, {n} of {r.n_cases}): the metrics lean on them; add cases elsewhere")
    return out
