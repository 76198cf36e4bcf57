"""Labelling by a person, no LLM: ``rag-exp golden label --by-hand``.

The pairs offered are exactly the ones the LLM judge would be sent (:func:`.label.candidate_pairs`
over the same pool: ``--pool`` / ``--sweep`` / ``-k`` / ``--per-run-depth``, or the configured
retriever's top k): hits evaluation already credits, and hits overlapping a span already judged
for the case (by anyone: a person, the LLM, an agent), are not offered. So a rerun offers only
what is still unlabelled (resumable), and an LLM pass afterwards is not asked about them either.

Two ways to give the verdicts, both writing the same records:

* the terminal loop (:func:`run_terminal`): the question, the passage (between ``[[ ]]``) with its
  document, offsets and some context, then ``y`` / ``p`` / ``n`` (YES / PART / NO), ``s`` (skip: offered again next
  time) or ``q`` (quit) and Enter; stdin may be a pipe. Each verdict is appended to the golden
  file as it is given (:meth:`GoldenFile.append`, its lock, one write and an fsync, with Ctrl-C held
  back for that instant), so Ctrl-C, a closed terminal or a kill loses at most the pair on screen;
* a blind CSV (:func:`export_csv`; read back by :func:`.sheet_import.import_csv`) for a spreadsheet or a colleague: the
  pair id, case, question, document, offsets, the passage and its context; no system, rank or
  score. The filled ``verdict`` column is read back (every row checked before anything is
  written; empty rows skipped; a pair labelled in the meantime, or imported before, is not
  labelled twice).

Each verdict is a ``judgement`` record with ``judge = {kind: human, name: <labeller>}`` (the
``--labeller``, default the OS user) and ``provenance = {method: by-hand, via: terminal | csv,
pool: ...}``: to coverage (judged@k), compare, promote and the spot-check it is a judgement like
any other, and a person's (resolution prefers it over a machine judge's; the spot-check, which
validates machine judges, has nothing to check in it).

Near-duplicates (:data:`.same_text.NEAR_DUPLICATE`): passages of one case whose texts are
the same after normalisation (whitespace, Markdown markup, case; :func:`rag_experiments.golden.normalise.normalised`),
or have a token similarity of at least 0.95 (:func:`.fuzzy.similarity`) with the same identifiers
(:func:`.fuzzy.guard_tokens`), typically a page that repeats another page's text word for word,
are offered once; the verdict is written for each of them, the copies with ``applied_from: <id of
the judgement given>`` and their ``similarity``. A passage whose near-duplicate was already judged
for that case (an earlier session; by a person, the LLM judge or an agent) gets that verdict the
same way, without being offered; the copy names the judge who gave it (its ``judge``, kind included).
"""

from __future__ import annotations

import csv
import getpass
import json
import os
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, TextIO

from rich.console import Console
from rich.text import Text

from ..errors import UserError
from ..interrupts import sigint_held
from .golden_file import GoldenFile
from .label import Pair, candidate_pairs, sampled_pairs
from .records import new_id
from .resolve import load_golden
from .same_text import judged_text, near_duplicate, verdicts_by_case
from .sheet_cells import sheet_row
from .spotcheck import read_answer

CONTEXT_CHARS = 240  # document text shown before and after the passage
LABELS = ("YES", "PART", "NO")
CSV_COLUMNS = ("pair_id", "case_id", "question", "document", "start", "end", "context_before", "passage",
               "context_after", "same_text_also_in", "verdict")


def default_labeller() -> str:
    return os.environ.get("USER") or getpass.getuser()


# -- planning -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Offer:
    """A passage to show for a case, and its near-duplicates in the pool (the verdict goes to each)."""

    pair: Pair
    duplicates: tuple[tuple[Pair, float], ...] = ()

    @property
    def pair_id(self) -> str:
        return pair_id(self.pair)


def pair_id(pair: Pair) -> str:
    return new_id("p", pair.key)


@dataclass(frozen=True)
class HandPlan:
    golden_path: Path
    cases: int
    offers: tuple[Offer, ...]
    skipped: dict[str, int]
    applied: tuple[dict, ...]  # records for pairs whose near-duplicate was already judged (by anyone)
    pool: dict | None = None
    sample: Any = None  # --sample N: the design drawn (label.SampleDraw); each pair carries its part

    @property
    def pairs(self) -> int:
        return sum(1 + len(o.duplicates) for o in self.offers)


def plan_hand_labelling(golden_path: str | Path, retrieve: Callable[[str], list[dict]], *, k: int,
                        pool: dict | None = None, sample: Any = None, source: Any = None) -> HandPlan:
    """The passages to offer, grouped into near-duplicates, and the records of pairs an earlier
    human verdict on the same text already answers. ``sample`` (label.SampleSpec): offer the pairs
    of a stratified random sample only (:func:`.label.sampled_pairs`, the LLM judge's draw)."""
    golden = load_golden(golden_path)
    draw = None
    if sample is not None:
        pairs, skipped, draw = sampled_pairs(golden, retrieve, k=k, spec=sample, source=source, n=sample.n)
    else:
        pairs, skipped = candidate_pairs(golden, retrieve, k=k)
    skipped = Counter(skipped)
    earlier = verdicts_by_case(golden.records)  # anyone's: a person's, the judge's, an agent's
    offers: list[Offer] = []
    dups: dict[int, list[tuple[Pair, float]]] = {}
    applied: list[dict] = []
    by_case: dict[str, list[int]] = {}
    for pair in pairs:
        source = judged_text(pair.hit["text"], earlier.get(pair.case_id, ()))
        if source is not None:
            rec, sim = source
            applied.append(judgement(pair, rec["verdict"], rec["judge"], via="applied", pool=pool,
                                     applied_from=rec["id"], similarity=sim))
            skipped["same_text_already_judged"] += 1
            continue
        for idx in by_case.get(pair.case_id, ()):
            sim = near_duplicate(pair.hit["text"], offers[idx].pair.hit["text"])
            if sim is not None:
                dups.setdefault(idx, []).append((pair, sim))
                break
        else:
            by_case.setdefault(pair.case_id, []).append(len(offers))
            offers.append(Offer(pair))
    offers = [Offer(o.pair, tuple(dups.get(i, ()))) for i, o in enumerate(offers)]
    return HandPlan(Path(golden_path), len(golden.cases), tuple(offers), dict(skipped), tuple(applied), pool, draw)


def judgement(pair: Pair, verdict: str, judge: Mapping[str, Any], *, via: str, pool: dict | None = None,
              applied_from: str | None = None, similarity: float | None = None, seconds: float | None = None) -> dict:
    """The ``judgement`` record of a person's verdict on ``pair`` (``judge``: kind human, name)."""
    h = pair.hit
    judge = dict(judge)
    rec = {
        "type": "judgement",
        "id": new_id("j", pair.case_id, h["doc_id"], h["start"], h["end"], judge.get("kind", "human"),
                     judge.get("name", "")),
        "case_id": pair.case_id,
        "span": {"doc_id": h["doc_id"], "source_uri": h["source_uri"], "start": int(h["start"]), "end": int(h["end"]),
                 "quote": h["text"], "doc_hash": h["doc_hash"]},
        "verdict": verdict,
        "judge": judge,
    }
    prov: dict[str, Any] = {"method": "by-hand", "via": via}
    if pool:
        prov["pool"] = pool
    if seconds is not None:
        prov["seconds"] = round(seconds, 2)
    rec["provenance"] = prov
    if applied_from:
        rec["applied_from"] = applied_from  # the verdict was given on that judgement's passage
        rec["similarity"] = similarity
    if pair.sample:  # drawn by --sample: the design evaluation weights it with
        rec["sample"] = dict(pair.sample)
    return rec


def offer_records(offer: Offer, verdict: str, judge: Mapping[str, Any], *, via: str, pool: dict | None = None,
                  seconds: float | None = None) -> list[dict]:
    """The verdict's record for the passage shown, then one per near-duplicate (``applied_from`` it)."""
    first = judgement(offer.pair, verdict, judge, via=via, pool=pool, seconds=seconds)
    return [first] + [judgement(p, verdict, judge, via=via, pool=pool, applied_from=first["id"], similarity=sim)
                      for p, sim in offer.duplicates]


def append_held(gf: GoldenFile, records: list[dict], then: Callable[[], None] | None = None) -> None:
    """Append with Ctrl-C held back until the records and the manifest are written, and ``then`` (the
    session's count of them) has run: a Ctrl-C during the write is delivered after it
    (:func:`..interrupts.sigint_held`), so a count kept after this call would miss a verdict the file holds."""
    if not records:
        return
    with sigint_held():
        gf.append(records)
        if then is not None:
            then()


# -- the terminal loop --------------------------------------------------------------------------
@dataclass
class HandReport:
    offered: int = 0
    verdicts: Counter = field(default_factory=Counter)  # given this session
    skipped: int = 0
    duplicates_applied: int = 0  # copies of a verdict given this session (near-duplicates)
    applied_earlier: int = 0  # copies of an earlier session's verdict
    seconds: list[float] = field(default_factory=list)  # per verdict given
    interrupted: bool = False
    left: int = 0

    @property
    def labels(self) -> int:
        return sum(self.verdicts.values())

    def timing_line(self) -> str:
        if not self.seconds:
            return "time per label: no verdict given this session"
        total = sum(self.seconds)
        return (f"time per label: {total / len(self.seconds):.1f} s mean, {statistics.median(self.seconds):.1f} s "
                f"median over {len(self.seconds)} label(s) ({total:.0f} s in all; with near-duplicates, "
                f"{total / (len(self.seconds) + self.duplicates_applied):.1f} s per judgement written)")

    def summary(self) -> str:
        v = self.verdicts
        return (f"labelled {self.labels} passage(s) this session (YES {v['YES']}, PART {v['PART']}, NO {v['NO']}), "
                f"skipped {self.skipped}; near-duplicates given the same verdict: {self.duplicates_applied} "
                f"(+{self.applied_earlier} from earlier verdicts); left to label: {self.left}")


def _context(doc_text: str | None, start: int, end: int) -> tuple[str, str]:
    if not doc_text:
        return "", ""
    before = doc_text[max(0, start - CONTEXT_CHARS):start]
    after = doc_text[end:end + CONTEXT_CHARS]
    if start > CONTEXT_CHARS and "\n" in before:
        before = before[before.index("\n") + 1:]  # from a line start
    if end + CONTEXT_CHARS < len(doc_text) and "\n" in after:
        after = after[:after.rindex("\n")]
    return before, after


def checked_judge_kind(kind: str) -> str:
    """``human`` (a person made the call) or ``agent`` (an AI agent labelling by hand: a machine judge)."""
    if kind not in ("human", "agent"):
        raise UserError(f"judge kind {kind!r}: expected human or agent")
    return kind


def _where(pair: Pair) -> str:
    h = pair.hit
    return f"{h['source_uri']} chars {h['start']}..{h['end']}"


def run_terminal(plan: HandPlan, *, labeller: str, doc_text: Callable[[str], str | None] = lambda _d: None,
                 stdin: TextIO | None = None, console: Any = None,
                 clock: Callable[[], float] = time.monotonic, judge_kind: str = "human") -> HandReport:
    """Offer each passage until the end, ``q`` or end of input; each verdict is appended at once."""
    stdin = stdin or sys.stdin
    console = console or Console(highlight=False)
    gf = GoldenFile(plan.golden_path)
    judge = {"kind": checked_judge_kind(judge_kind), "name": labeller}
    report = HandReport(left=len(plan.offers))
    if plan.applied:
        append_held(gf, list(plan.applied), then=lambda: setattr(report, "applied_earlier", len(plan.applied)))
        console.print(f"{len(plan.applied)} pair(s) repeat a passage already judged for the same question (by a person, the judge or an agent): "
                      "given that verdict (applied_from the earlier judgement)", markup=False)
    queries = {c.case_id: c.query for c in load_golden(plan.golden_path).cases}
    try:
        for i, offer in enumerate(plan.offers):
            p = offer.pair
            console.rule(f"passage {i + 1} of {len(plan.offers)} (case {p.case_id})")
            console.print(Text("Question: ", style="bold") + Text(queries.get(p.case_id, p.query)))
            console.print(Text("Document: ", style="bold") + Text(_where(p)))
            if offer.duplicates:
                console.print(Text("  the same text is also in (the verdict applies to each): "
                                   + "; ".join(f"{_where(d)}" for d, _ in offer.duplicates), style="dim"))
            full = doc_text(p.hit["doc_id"])
            before, after = _context(full, p.hit["start"], p.hit["end"])
            body = Text()  # the passage between [[ ]] (and in bold), its context dimmed
            if before:
                body.append(("..." if len(before) < p.hit["start"] else "") + before, style="dim")
            body.append("[[" + p.hit["text"] + "]]", style="bold")
            if after:
                body.append(after + ("..." if full and p.hit["end"] + len(after) < len(full) else ""), style="dim")
            console.print(body)
            shown = clock()
            answer = read_answer(stdin, console)
            if answer == "QUIT":
                break
            report.offered += 1
            if answer == "SKIP":
                report.skipped += 1
                continue
            took = clock() - shown
            records = offer_records(offer, answer, judge, via="terminal", pool=plan.pool, seconds=took)

            def count(answer=answer, took=took, written=len(records)) -> None:
                report.verdicts[answer] += 1
                report.seconds.append(took)
                report.duplicates_applied += written - 1
                report.left -= 1
            append_held(gf, records, then=count)
    except KeyboardInterrupt:
        report.interrupted = True
        console.print()
    report.left = max(0, len(plan.offers) - report.labels)
    return report


# -- the blind CSV ------------------------------------------------------------------------------
def export_csv(plan: HandPlan, out: str | Path, doc_text: Callable[[str], str | None]) -> int:
    """Write the plan's passages (one row per offer; near-duplicates named in ``same_text_also_in``)
    to a new CSV with an empty ``verdict`` column. No system, rank or score: blind."""
    out = Path(out)
    if out.exists():
        raise UserError(f"--export {out}: exists; not overwritten (it may hold verdicts)", hint="name a new file")
    queries = {c.case_id: c.query for c in load_golden(plan.golden_path).cases}
    try:
        with out.open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(CSV_COLUMNS)
            for o in plan.offers:  # no cell a spreadsheet would run as a formula (a logged question "=HYPERLINK(...")
                h = o.pair.hit
                before, after = _context(doc_text(h["doc_id"]), h["start"], h["end"])
                also = "\n".join(f"{d.hit['source_uri']} {d.hit['start']}..{d.hit['end']}" for d, _ in o.duplicates)
                w.writerow(sheet_row([o.pair_id, o.pair.case_id, queries.get(o.pair.case_id, o.pair.query),
                                      h["source_uri"], h["start"], h["end"], before, h["text"], after, also, ""]))
        designs = {p.key: p.sample for o in plan.offers for p in (o.pair, *(d for d, _ in o.duplicates)) if p.sample}
        if designs:  # kept out of the sheet (blind: a stratum is a rank range); --import reads it back
            design_path(out).write_text(json.dumps(designs, sort_keys=True), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--export {out}: cannot write: {exc.strerror}",
                        hint="name a file in a folder you can write") from None
    return len(plan.offers)


def design_path(csv_path: str | Path) -> Path:
    """The sampling design of an exported sheet's pairs (``--sample`` with ``--export``): beside it."""
    p = Path(csv_path)
    return p.with_name(p.name + ".sample.json")
