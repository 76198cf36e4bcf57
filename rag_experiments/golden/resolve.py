"""From append-only records to the cases an evaluation uses.

Resolution rules (documented here because every number depends on them):

* A ``retire`` record removes its target case from evaluation.
* A case's own evidence spans are relevant with their grade (2 = YES, 1 = PART).
* Judgements add judged spans: YES -> grade 2, PART -> grade 1, NO -> judged non-relevant.
  A judgement named in a later judgement's ``supersedes`` is ignored. Among the remaining
  judgements of the same (case, span), a human's beats a machine judge's (``llm`` or
  ``agent``), and otherwise the later beats the earlier: an ``agent`` label is a machine label,
  so a later LLM label replaces it (it is not treated as a human's).
* An ``anchor`` record re-points a span after a corpus edit (``moved``/``fuzzy``) or marks it
  ``stale``; the latest anchor per span wins. Stale evidence is excluded from metrics and
  counted; a case whose every relevant span is stale is reported, not scored as a miss.
* **Evidence groups** (a case that needs A *and* B): each evidence span belongs to its ``group``
  (a case without groups is one group, 0). A judgement belongs to the group it names; one that
  names none belongs to group 0 of a one-group case, and on a multi-group case to the group whose
  evidence is in the same document when exactly one group's is (else to no group: it still counts
  as judged and earns its gain in MRR and nDCG, but no group's recall). A judgement re-grading a
  case's own evidence keeps the evidence's group. A group number the case does not have is an error.

:func:`current` is the one place these rules read the records: evaluation (:func:`resolve`),
``golden check`` / ``golden reanchor`` (:mod:`.anchoring`) and the evidence checks all start
from its :class:`Current`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..errors import GoldenSetError
from .records import MACHINE_JUDGES, VERDICTS, Anchor, Case, Judgement, Record, Retire, Span
from .golden_file import GoldenFile


@dataclass(frozen=True)
class SpanRef:
    """One labelled span (a case's evidence or a judgement's span) and its anchoring state."""

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
    judge_kind: str | None = None  # judgements: llm | human | agent
    group: int | None = None  # evidence: its group (0 without groups); judgements: the group named, if any

    @property
    def reference(self) -> Span:
        """The text whose relevance was judged: the labelled span, or a human re-anchoring of it."""
        return self.judged or self.original

    @property
    def scored(self) -> Span:
        """The span evaluation uses: the effective one; a stale span keeps its labelled one (unscored)."""
        return self.original if self.status == "stale" else self.effective


@dataclass(frozen=True)
class Current:
    """What the records say now: retired cases, superseded judgements, every labelled span with its
    latest anchor applied (superseded and retired ones too: re-anchoring keeps them current)."""

    records: tuple[Record, ...]
    retired: frozenset[str]
    superseded: frozenset[str]
    spans: tuple[SpanRef, ...]

    @property
    def cases(self) -> list[Case]:
        return [r for r in self.records if isinstance(r, Case)]

    @property
    def live(self) -> list[SpanRef]:
        """Spans that count: not of a retired case, not of a superseded judgement."""
        return [sr for sr in self.spans if sr.case_id not in self.retired and sr.ref not in self.superseded]

    @property
    def live_judgements(self) -> list[Judgement]:
        return [r for r in self.records if isinstance(r, Judgement) and r.id not in self.superseded]


_LAST_CURRENT: list[tuple[tuple[Record, ...], Current]] = []  # (the records tuple, its Current), newest last


def current(records: Iterable[Record]) -> Current:
    # A sweep point resolves the same (immutable) records tuple three times; the answer of the
    # last few tuples is kept by identity (a tuple of frozen records cannot change under it).
    if isinstance(records, tuple):
        for seen, now in _LAST_CURRENT:
            if seen is records:
                return now
        now = _current(records)
        _LAST_CURRENT[:] = [*_LAST_CURRENT[-3:], (records, now)]
        return now
    return _current(tuple(records))


def _current(records: tuple[Record, ...]) -> Current:
    anchors = [r for r in records if isinstance(r, Anchor)]  # per ref, later records win
    latest = {a.ref: a for a in anchors}
    last_good = {a.ref: a for a in anchors if a.span is not None}
    human = {a.ref: a for a in anchors if a.span is not None and a.by_human}

    def make(ref: str, case_id: str, source: str, grade: int, original: Span, judge: str | None = None,
             group: int | None = None) -> SpanRef:
        good, a, h = last_good.get(ref), latest.get(ref), human.get(ref)
        return SpanRef(ref, case_id, source, grade, original, good.span if good else original, a.status if a else "ok",
                       a and a.id, a.checked_doc_hash if a and a.status == "stale" else None, h and h.span, judge, group)

    spans: list[SpanRef] = []
    for r in records:
        if isinstance(r, Case):
            spans += [make(f"{r.id}#{i}", r.id, "evidence", grade, span, group=r.groups[i] if r.groups else 0)
                      for i, (span, grade) in enumerate(r.evidence)]
        elif isinstance(r, Judgement):
            spans.append(make(r.id, r.case_id, "judgement", VERDICTS[r.verdict], r.span, r.judge_kind, r.group))
    return Current(
        records=records,
        retired=frozenset(r.target for r in records if isinstance(r, Retire)),
        superseded=frozenset(r.supersedes for r in records if isinstance(r, Judgement) and r.supersedes),
        spans=tuple(spans),
    )


@dataclass(frozen=True)
class Evidence:
    span: Span
    grade: int  # 0 = judged not relevant
    ref: str  # "<case id>#<index>" or a judgement id
    status: str = "ok"  # ok | moved | fuzzy | stale
    group: int | None = 0  # the evidence group it counts for (None: a multi-group case's ungrouped judgement)


@dataclass(frozen=True)
class EvalCase:
    case_id: str
    query: str
    kind: str
    doc_type: str
    evidence: tuple[Evidence, ...]  # everything judged for this case, any grade, any status
    identifier: str | None = None
    judge_kinds: frozenset[str] = field(default_factory=frozenset)
    stratum: str | None = None  # a query log's traffic stratum (head | torso | tail): golden import-queries
    without_evidence: bool = False  # a production query recorded without evidence (labelled by pooling)
    n_groups: int = 1  # evidence groups, all needed (a multi case: "needs A and B")

    @property
    def segment_kind(self) -> str:
        """The kind segments use: ``production-head`` for a query log's head stratum, else the kind
        (a dash, not a colon: MLflow on Windows refuses ``:`` in metric names)."""
        return f"{self.kind}-{self.stratum}" if self.stratum else self.kind

    @property
    def unanswered(self) -> bool:
        """Recorded without evidence and no passage judged relevant yet (unlabelled, or every judged
        passage NO): kept in the set, not scored, counted (:func:`..import_queries.unanswered_share`)."""
        return self.without_evidence and not self.relevant

    @property
    def relevant(self) -> tuple[Evidence, ...]:
        return tuple(e for e in self.evidence if e.grade > 0 and e.status != "stale")

    @property
    def judged(self) -> tuple[Evidence, ...]:
        return tuple(e for e in self.evidence if e.status != "stale")

    @property
    def stale(self) -> tuple[Evidence, ...]:
        return tuple(e for e in self.evidence if e.grade > 0 and e.status == "stale")

    @property
    def all_stale(self) -> bool:
        return not self.relevant and bool(self.stale)


@dataclass(frozen=True)
class GoldenSet:
    path: Path
    digest: str
    cases: tuple[EvalCase, ...]
    records: tuple[Record, ...] = field(repr=False, default=())
    head: str = ""  # sha256 of the last line: with len(records), the version as a prefix of the chain

    @property
    def scorable(self) -> tuple[EvalCase, ...]:
        return tuple(c for c in self.cases if c.relevant)

    def anchor_counts(self) -> dict[str, int]:
        counts = Counter(e.status for c in self.cases for e in c.evidence if e.grade > 0)
        return {s: counts.get(s, 0) for s in ("ok", "moved", "fuzzy", "stale")}


def resolve(records: Iterable[Record], path: Path, digest: str, head: str = "") -> GoldenSet:
    now = current(records)
    judgements: dict[str, dict[tuple, SpanRef]] = {}
    evidence: dict[str, list[SpanRef]] = {}
    for sr in now.spans:
        if sr.source == "evidence":
            evidence.setdefault(sr.case_id, []).append(sr)
        elif sr.ref not in now.superseded:
            per_case = judgements.setdefault(sr.case_id, {})
            old = per_case.get(sr.original.key)
            # a human's verdict beats a machine's (llm or agent); otherwise the later one wins
            if old is None or not (old.judge_kind == "human" and sr.judge_kind in MACHINE_JUDGES):
                per_case[sr.original.key] = sr

    cases = []
    for r in now.cases:
        if r.id in now.retired:
            continue
        by_key = {sr.original.key: Evidence(sr.scored, sr.grade, sr.ref, sr.status, sr.group)
                  for sr in evidence.get(r.id, ())}  # a production query may come without evidence
        kinds = set()
        for key, j in sorted(judgements.get(r.id, {}).items()):
            kinds.add(j.judge_kind)
            if key in by_key:
                # a judgement about the case's own evidence re-grades it (a superseding label)
                own = by_key[key]
                by_key[key] = Evidence(own.span, j.grade, own.ref, own.status, own.group)
                continue
            by_key[key] = Evidence(j.scored, j.grade, j.ref, j.status, _judged_group(r, j, path))
        cases.append(EvalCase(
            case_id=r.id, query=r.query, kind=r.kind, doc_type=r.doc_type,
            evidence=tuple(by_key.values()), identifier=r.identifier, judge_kinds=frozenset(kinds),
            stratum=r.raw.get("stratum"), without_evidence=not r.evidence, n_groups=r.n_groups,
        ))
    return GoldenSet(path=path, digest=digest, cases=tuple(cases), records=now.records, head=head)


def _judged_group(case: Case, j: SpanRef, path: Path) -> int | None:
    """The evidence group a judgement counts for (the rule in the module docstring)."""
    if j.group is not None:
        if j.group >= case.n_groups:
            raise GoldenSetError(f"{path}: judgement {j.ref} names evidence group {j.group}, but case {case.id} "
                                 f"has {case.n_groups} group(s) (0..{case.n_groups - 1})",
                                 hint="append a judgement with the right group that supersedes it")
        return j.group
    if case.n_groups == 1:
        return 0
    same_doc = {g for (span, _), g in zip(case.evidence, case.groups) if span.doc_id == j.original.doc_id}
    return same_doc.pop() if len(same_doc) == 1 else None


_LOADED: dict[tuple[Path, str, str, int], GoldenSet] = {}


def load_golden(path: str | Path) -> GoldenSet:
    gf = GoldenFile(path)
    records = gf.read_records()  # verified on every call (memoised by the file's identity there)
    # the same bytes resolve to the same set: a sweep point reuses it (the digest covers every byte)
    key = (gf.path, gf.digest(), gf.head(), len(records))
    golden = _LOADED.get(key)
    if golden is None:
        if len(_LOADED) >= 8:
            _LOADED.clear()
        golden = _LOADED[key] = resolve(records, gf.path, key[1], head=key[2])
    return golden
