"""A filled CSV read back (``golden label --import``): every row checked before anything is written,
the verdicts recorded as the person's or the agent's judgements, their near-duplicates given the same
verdict, and a row whose verdict differs from the one recorded for its passage reported, or with
``--supersede`` recorded as a correction (:mod:`.corrections`). The sheet itself is written by
:func:`.hand_label.export_csv`."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..errors import UserError
from .corrections import Disagreement, Recorded
from .golden_file import GoldenFile
from .hand_label import LABELS, Offer, checked_judge_kind, append_held, design_path, offer_records, pair_id
from .label import Pair, already_judged
from .resolve import load_golden
from .same_text import near_duplicate
from .sheet_cells import read_row
from .spotcheck import ANSWERS

_ALSO = re.compile(r"^(.*) (\d+)\.\.(\d+)$")


@dataclass
class ImportReport:
    labelled: Counter = field(default_factory=Counter)
    duplicates_applied: int = 0
    empty: int = 0
    already: int = 0  # pairs labelled before with the same verdict (an earlier import, the terminal, another judge)
    # rows whose verdict differs from the one recorded for their passage: not recorded (corrections.py)
    disagree: list = field(default_factory=list)
    corrected: int = 0  # rows recorded as judgements superseding the recorded verdict (--supersede)
    superseding: int = 0  # the records those rows took (each live judgement of the passage and its copies)

    def summary(self, path: Path) -> str:
        v = self.labelled
        fixed = (f"; {self.corrected} verdict(s) changed ({self.superseding} record(s) superseding the recorded ones)"
                 if self.corrected else "")
        differ = f", {len(self.disagree)} differing from the recorded verdict (not recorded)" if self.disagree else ""
        return (f"recorded {sum(v.values())} verdict(s) from {path} (YES {v['YES']}, PART {v['PART']}, NO {v['NO']}) "
                f"+{self.duplicates_applied} near-duplicate(s) given the same verdict{fixed}; skipped {self.empty} "
                f"empty row(s), {self.already} pair(s) already labelled{differ}")

    def disagreement_lines(self, limit: int = 10) -> list[str]:
        """One line per row whose verdict differs from the recorded one (at most ``limit``)."""
        lines = [d.text() + (" (the case's own evidence: retire the case if it is wrong)" if d.own_evidence else "")
                 for d in self.disagree[:limit]]
        if len(self.disagree) > limit:
            lines.append(f"... and {len(self.disagree) - limit} more")
        return lines


def import_csv(golden_path: str | Path, path: str | Path, docs: Sequence, *, labeller: str,
               judge_kind: str = "human", supersede: str | None = None) -> ImportReport:
    """Read the ``verdict`` column of an exported CSV back (YES / PART / NO, y / p / n; empty or
    ``s`` skips). Every row is checked before anything is written; a bad one is one line naming
    the file, the row and the value. Pairs already judged for their case are not labelled again: a
    row with the recorded verdict is counted as already labelled, one with another verdict is reported
    (:attr:`ImportReport.disagree`), or with ``supersede`` (the reason) recorded as judgements that
    supersede the recorded ones (:mod:`.corrections`)."""
    path = Path(path)
    where0 = f"--import {path}"
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise UserError(f"{where0}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{where0}: not valid UTF-8 (byte {exc.start})",
                        hint="save the sheet as CSV UTF-8") from None
    reader = csv.DictReader(text.splitlines(keepends=True))
    try:
        rows = [(reader.line_num, read_row(row)) for row in reader]  # the export's formula guard removed
    except csv.Error as exc:
        raise UserError(f"{where0}: not readable as CSV near line {reader.line_num + 1} ({exc})") from None
    need = ("pair_id", "case_id", "document", "start", "end", "passage", "verdict")
    missing = [c for c in need if c not in (reader.fieldnames or [])]
    if missing:
        raise UserError(f"{where0}: no {', '.join(missing)} column (header: {reader.fieldnames})",
                        hint="fill in the file `rag-exp golden label --by-hand --export FILE.csv` wrote")
    golden = load_golden(golden_path)
    cases = {c.case_id: c for c in golden.cases}
    by_uri = {d.source_uri: d for d in docs}
    by_uri.update({d.doc_id: d for d in docs if d.doc_id not in by_uri})
    judge = {"kind": checked_judge_kind(judge_kind), "name": labeller}
    report = ImportReport()
    designs: dict = {}
    if design_path(path).exists():  # exported from a sample: each pair's design goes into its record
        try:
            designs = json.loads(design_path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(f"{where0}: cannot read its sampling design {design_path(path)}: {exc}",
                            hint="export the sample again") from None

    def pair_of(case_id: str, uri: str, start_s: str, end_s: str, where: str) -> Pair:
        doc = by_uri.get(uri)
        if doc is None:
            raise UserError(f"{where}: document {uri!r} is not in the corpus",
                            hint="import against the corpus the file was exported from (--set corpus.path=...)")
        if not (start_s.isdigit() and end_s.isdigit()) or not 0 <= int(start_s) < int(end_s) <= len(doc.text):
            raise UserError(f"{where}: offsets {start_s!r}..{end_s!r} are not a span of {uri} "
                            f"(0..{len(doc.text)})", hint="export again; do not edit the offset columns")
        s, e = int(start_s), int(end_s)
        hit = {"doc_id": doc.doc_id, "source_uri": doc.source_uri, "start": s, "end": e, "text": doc.text[s:e],
               "doc_hash": doc.content_hash}
        key = f"{case_id}|{doc.doc_id}|{s}|{e}"
        return Pair(key, case_id, cases[case_id].query, hit, sample=designs.get(key))

    todo: list[tuple[Offer, str, str]] = []
    seen: set[str] = set()
    for n_row, (_line, row) in enumerate(rows, start=2):  # a spreadsheet's row numbers: the header is row 1
        where = f"{where0}, row {n_row}"
        raw = (row.get("verdict") or "").strip()
        pid = (row.get("pair_id") or "").strip()
        if pid in seen:
            raise UserError(f"{where}: pair {pid} appears twice in the file", hint="keep one row per pair_id")
        seen.add(pid)
        answer = ANSWERS.get(raw.lower()) if raw else "SKIP"
        if answer not in (*LABELS, "SKIP"):
            raise UserError(f"{where}: verdict {raw!r} is not YES, PART or NO (y / p / n), or empty to skip",
                            hint="fix that cell and import again; nothing was recorded")
        case_id = (row.get("case_id") or "").strip()
        if case_id not in cases:
            raise UserError(f"{where}: case {case_id!r} is not a live case of {Path(golden_path).name}",
                            hint="export again: the golden set may have changed since")
        pair = pair_of(case_id, (row.get("document") or "").strip(), (row.get("start") or "").strip(),
                       (row.get("end") or "").strip(), where)
        if pair_id(pair) != pid:
            raise UserError(f"{where}: pair_id {pid!r} does not match its case, document and offsets",
                            hint="export again; do not edit the id, case, document or offset columns")
        if " ".join((row.get("passage") or "").split()) != " ".join(pair.hit["text"].split()):
            raise UserError(f"{where}: the passage is not the text of {pair.hit['source_uri']} at "
                            f"{pair.hit['start']}..{pair.hit['end']} (the document changed since the export, or the "
                            "cell was edited)", hint="export again and re-enter this verdict")
        dups = []
        for n, entry in enumerate(x for x in (row.get("same_text_also_in") or "").splitlines() if x.strip()):
            m = _ALSO.match(entry.strip())
            if m is None:
                raise UserError(f"{where}: same_text_also_in line {n + 1} {entry!r} is not 'DOCUMENT START..END'",
                                hint="export again; do not edit that column")
            dup = pair_of(case_id, m.group(1), m.group(2), m.group(3), f"{where} (same_text_also_in)")
            sim = near_duplicate(pair.hit["text"], dup.hit["text"])
            if sim is None:
                raise UserError(f"{where}: {entry!r} no longer holds the same text as the passage",
                                hint="export again: the corpus changed since")
            dups.append((dup, sim))
        if answer == "SKIP":
            report.empty += 1
            continue
        todo.append((Offer(pair, tuple(dups)), answer, where))

    # every row is valid: now write, skipping pairs judged already (a second import, the terminal, another judge)
    judged = {c.case_id: [e.span.key for e in c.evidence] for c in golden.cases}
    now = Recorded(golden)
    records: list[dict] = []
    for offer, verdict, where in todo:
        def done(p: Pair) -> bool:
            return already_judged((p.hit["doc_id"], p.hit["start"], p.hit["end"]), judged[p.case_id])

        if done(offer.pair):  # the passage itself is labelled: the row was imported before (or judged since)
            h = offer.pair.hit
            was = now.verdict(offer.pair.case_id, (h["doc_id"], h["start"], h["end"]))
            if was is None or was[0] == verdict:
                report.already += 1 + len(offer.duplicates)
                continue
            d = Disagreement(where, offer.pair.case_id, h["source_uri"], h["start"], h["end"], verdict, *was)
            if supersede is None or d.own_evidence:
                report.disagree.append(d)
                continue
            recs = now.superseding(d, judge, supersede, via="csv")
            records += recs
            report.corrected += 1
            report.superseding += len(recs)
            continue
        fresh = tuple((p, sim) for p, sim in offer.duplicates if not done(p))
        report.already += len(offer.duplicates) - len(fresh)
        recs = offer_records(Offer(offer.pair, fresh), verdict, judge, via="csv")
        for p in (offer.pair, *(p for p, _ in fresh)):
            judged[p.case_id].append((p.hit["doc_id"], p.hit["start"], p.hit["end"]))
        records += recs
        report.labelled[verdict] += 1
        report.duplicates_applied += len(recs) - 1
    append_held(GoldenFile(golden_path), records)
    return report
