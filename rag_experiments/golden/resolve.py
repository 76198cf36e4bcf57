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
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .records import MACHINE_JUDGES, VERDICTS, Span, parse_span
from .store import GoldenFile


@dataclass(frozen=True)
class Evidence:
    span: Span
    grade: int  # 0 = judged not relevant
    ref: str  # "<case id>#<index>" or a judgement id
    status: str = "ok"  # ok | moved | fuzzy | stale


@dataclass(frozen=True)
class EvalCase:
    case_id: str
    query: str
    kind: str
    doc_type: str
    evidence: tuple[Evidence, ...]  # everything judged for this case, any grade, any status
    identifier: str | None = None
    judge_kinds: frozenset[str] = field(default_factory=frozenset)

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
    records: tuple[dict, ...] = field(repr=False, default=())
    head: str = ""  # sha256 of the last line: with len(records), the version as a prefix of the chain

    @property
    def scorable(self) -> tuple[EvalCase, ...]:
        return tuple(c for c in self.cases if c.relevant)

    def anchor_counts(self) -> dict[str, int]:
        counts = Counter(e.status for c in self.cases for e in c.evidence if e.grade > 0)
        return {s: counts.get(s, 0) for s in ("ok", "moved", "fuzzy", "stale")}

    def live_judgements(self) -> list[dict]:
        """Judgement records no later judgement supersedes (what labels the cases now)."""
        superseded = {r["supersedes"] for r in self.records if r["type"] == "judgement" and r.get("supersedes")}
        return [r for r in self.records if r["type"] == "judgement" and r["id"] not in superseded]

    def judges(self) -> Counter:
        """Live judgements per (kind, model or name, prompt version); superseded ones not counted."""
        return Counter(
            (r["judge"]["kind"], r["judge"].get("model") or r["judge"].get("name", ""), r["judge"].get("prompt_version", ""))
            for r in self.live_judgements()
        )


def resolve(records: list[dict], path: Path, digest: str, head: str = "") -> GoldenSet:
    retired = {r["target"] for r in records if r["type"] == "retire"}
    superseded = {r["supersedes"] for r in records if r["type"] == "judgement" and r.get("supersedes")}
    anchors: dict[str, dict] = {}
    for r in records:
        if r["type"] == "anchor":
            anchors[r["ref"]] = r  # later records win

    def anchored(ref: str, span: Span) -> tuple[Span, str]:
        a = anchors.get(ref)
        if a is None:
            return span, "ok"
        if a["status"] == "stale":
            return span, "stale"
        return parse_span(a["span"], f"anchor {a['id']}"), a["status"]

    judgements: dict[str, dict[tuple, dict]] = {}
    for r in records:
        if r["type"] != "judgement" or r["id"] in superseded:
            continue
        span = parse_span(r["span"], r["id"])
        per_case = judgements.setdefault(r["case_id"], {})
        old = per_case.get(span.key)
        # a human's verdict beats a machine's (llm or agent); otherwise the later one wins
        if old is None or not (old["judge"]["kind"] == "human" and r["judge"]["kind"] in MACHINE_JUDGES):
            per_case[span.key] = r

    cases = []
    for r in records:
        if r["type"] != "case" or r["id"] in retired:
            continue
        by_key: dict[tuple, Evidence] = {}
        for i, ev in enumerate(r["evidence"]):
            ref = f"{r['id']}#{i}"
            original = parse_span(ev, ref)
            span, status = anchored(ref, original)
            by_key[original.key] = Evidence(span, int(ev["grade"]), ref, status)
        kinds = set()
        for key, j in sorted(judgements.get(r["id"], {}).items()):
            kinds.add(j["judge"]["kind"])
            if key in by_key:
                # a judgement about the case's own evidence re-grades it (a superseding label)
                own = by_key[key]
                by_key[key] = Evidence(own.span, VERDICTS[j["verdict"]], own.ref, own.status)
                continue
            span, status = anchored(j["id"], parse_span(j["span"], j["id"]))
            by_key[key] = Evidence(span, VERDICTS[j["verdict"]], j["id"], status)
        evidence = list(by_key.values())
        cases.append(EvalCase(
            case_id=r["id"], query=r["query"], kind=r["kind"], doc_type=r["doc_type"],
            evidence=tuple(evidence), identifier=r.get("identifier"), judge_kinds=frozenset(kinds),
        ))
    return GoldenSet(path=path, digest=digest, cases=tuple(cases), records=tuple(records), head=head)


def load_golden(path: str | Path) -> GoldenSet:
    gf = GoldenFile(path)
    records = gf.read()
    return resolve(records, gf.path, gf.digest(), head=gf.head())
