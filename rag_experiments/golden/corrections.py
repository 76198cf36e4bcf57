"""A verdict that differs from the one recorded for the same passage: found when a sheet is imported,
reported row by row, and, given a reason, recorded as judgements that supersede the recorded ones.

Why: the golden set is append-only. A label is changed by a later record that names the one it
replaces and says why (``supersedes`` and ``reason``: :mod:`.resolve`), never by an edit. Before this
module, ``golden label --import`` counted a changed verdict on a labelled passage as "already
labelled" and recorded nothing, so a person's correction, or a second labeller's other opinion, was
dropped without a word (found by a new user on nginx's documentation, 2026-12-07).

What a correction replaces: every live judgement of the case on the passage's span (a person's
verdict beats a machine's among live judgements, so superseding only the one that counts now could
let an older one count again), and the judgements given to copies of the same text from them
(``applied_from``: the verdict was given once for all of them). A case's own evidence is not a
judgement: it is changed by retiring the case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .label import same_passage
from .records import VERDICTS, Judgement, new_id
from .resolve import GoldenSet

VERDICT_OF_GRADE = {grade: verdict for verdict, grade in VERDICTS.items()}  # records.VERDICTS, inverted


@dataclass(frozen=True)
class Disagreement:
    """A sheet's verdict on a passage whose recorded verdict is another."""

    where: str  # "--import F.csv, row 5"
    case_id: str
    source_uri: str
    start: int
    end: int
    verdict: str  # the sheet's
    recorded: str  # the verdict that counts now
    by: str  # who gave it: "alice (human)", or "the case's own evidence"
    ref: str  # the judgement that counts now, or "<case id>#<i>" for the case's own evidence

    @property
    def own_evidence(self) -> bool:
        return self.ref.startswith(self.case_id + "#")

    def text(self) -> str:
        return (f"{self.where}: {self.verdict} on {self.source_uri} {self.start}..{self.end} (case {self.case_id}), "
                f"recorded {self.recorded} by {self.by}")


class Recorded:
    """What the golden set holds now, read once per import: each case's judged passages and the judgements
    behind them."""

    def __init__(self, golden: GoldenSet) -> None:
        self.cases = {c.case_id: c for c in golden.cases}
        self.judgements = [r for r in golden.records if isinstance(r, Judgement)]
        self.by_id = {r.id: r for r in self.judgements}
        self.gone = frozenset(r.supersedes for r in self.judgements if r.supersedes)

    def verdict(self, case_id: str, span: tuple[str, int, int]) -> tuple[str, str, str] | None:
        """(verdict, by whom, ref) of what counts now for ``span`` in the case: its exact span first, else
        a span that is the same passage for judging (:func:`.label.same_passage`); None when unjudged."""
        case = self.cases.get(case_id)
        if case is None:
            return None
        matches = [e for e in case.evidence if e.span.key == span] or \
            [e for e in case.evidence if same_passage(span, e.span.key)]
        if not matches:
            return None
        e = matches[0]
        rec = self.by_id.get(e.ref)
        if rec is None:  # the case's own evidence, or re-graded by a judgement on its span
            live = self._live(case_id, e.span.key)
            rec = live[-1] if live else None
        by = (f"{rec.raw.get('judge', {}).get('name') or 'unnamed'} ({rec.judge_kind})" if rec is not None
              else "the case's own evidence")
        return VERDICT_OF_GRADE[e.grade], by, (rec.id if rec is not None else e.ref)

    def _live(self, case_id: str, key: tuple[str, int, int]) -> list[Judgement]:
        return [r for r in self.judgements if r.case_id == case_id and r.span.key == key and r.id not in self.gone]

    def superseding(self, d: Disagreement, judge: Mapping, reason: str, via: str) -> list[dict]:
        """The records that change ``d``'s passage to the sheet's verdict: one per live judgement of the
        case on that span, and one per copy given its verdict (``applied_from``), each naming the one it
        replaces."""
        on_span = self._live(d.case_id, self.by_id[d.ref].span.key)
        out = [_record(old, d.verdict, judge, reason, via, applied_from=None) for old in on_span]
        old_ids = {r.id for r in on_span}
        for copy in self.judgements:
            if copy.case_id == d.case_id and copy.raw.get("applied_from") in old_ids and copy.id not in self.gone:
                out.append(_record(copy, d.verdict, judge, reason, via, applied_from=out[0]["id"]))
        return out


def _record(old: Judgement, verdict: str, judge: Mapping, reason: str, via: str, applied_from: str | None) -> dict:
    s = old.span
    rec = {
        "type": "judgement",
        "id": new_id("j", old.case_id, s.doc_id, s.start, s.end, judge.get("kind"), judge.get("name"), "supersedes",
                     old.id),
        "case_id": old.case_id,
        "span": s.to_json(),
        "verdict": verdict,
        "judge": dict(judge),
        "provenance": {"method": "by-hand", "via": via},
        "supersedes": old.id,
        "reason": reason,
    }
    if old.raw.get("group") is not None:
        rec["group"] = old.raw["group"]
    if applied_from is not None:
        rec["applied_from"] = applied_from
        if old.raw.get("similarity") is not None:
            rec["similarity"] = old.raw["similarity"]
    return rec
