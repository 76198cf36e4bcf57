"""Human spot-check of the machine judges: agreement, Cohen's kappa, confusion matrix.

A machine judge is the configured LLM judge (``judge.kind: llm``) or any other machine that
labelled pairs (``judge.kind: agent``, e.g. an AI coding agent); both are checked the same way.

``rag-exp golden spotcheck`` shows seeded-random machine-judged (case, span) pairs, the question and
the passage, with the judge's verdict hidden; the human answers YES / PART / NO (``s`` skips,
``q`` quits). Each answer is appended at once to ``experiments/spotcheck/<golden stem>.jsonl``,
so quitting loses nothing and a rerun continues where it stopped. These records validate the
judge; they are not labels and never go into the golden set.

A judge (model or name + prompt version) counts as validated when at least :data:`MIN_PAIRS`
(30) of its pairs have a human verdict and the human disagrees with it on at most
:data:`MAX_DISAGREEMENT` (10%) of them. The golden set's labels count as validated
(:func:`judge_validation`) only when *every* machine judge with live labels in it is: labels
from an unchecked judge are not made trustworthy by another judge's good record. The top-level
numbers describe the current judge (the one with the most live labels); ``judges`` lists each.

Which pairs and cases are asked about, in which order (the case sample for judge-corrected metrics):
:mod:`.spotcheck_sample`; agreement, kappa and the judge's rates: :mod:`.agreement`.
"""

from __future__ import annotations

import csv
import getpass
import os
import shlex
import sys
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..errors import UserError
from .agreement import (  # noqa: F401 - re-exported: the spot-check's callers import them from here
    LABELS,
    MIN_CLASS,
    agreement_stats,
    cohen_kappa,
    confusion_matrix,
    judge_rates,
)
from .golden_file import GoldenFile
from .records import Judgement, new_id, now_iso
from .resolve import current, load_golden
from .sheet_cells import read_row, sheet_row
from .spotcheck_sample import (  # noqa: F401 - re-exported: the spot-check's callers import them from here
    CASE_SEED,
    DEFAULT_SEED,
    MIN_CASE_SAMPLE,
    CaseSample,
    append_spotcheck,
    case_sample,
    case_todo,
    halve_judge_part,
    human_verdicts,
    judge_id,
    machine_judged_pairs,
    machine_judges,
    order_cases,
    order_pairs,
    read_spotchecks,
    spotcheck_path,
)

MIN_PAIRS = 30
MAX_DISAGREEMENT = 0.10
ANSWERS = {"y": "YES", "yes": "YES", "p": "PART", "part": "PART", "n": "NO", "no": "NO",
            "s": "SKIP", "skip": "SKIP", "q": "QUIT", "quit": "QUIT"}


def judge_validation(golden_path: str | Path, spot_path: str | Path | None = None) -> dict:
    """Judge-validation status for a run to record: ``validated`` (every machine judge with live
    labels has >= 30 spot-checked pairs and disagreement <= 10%), ``judges`` (each one's numbers),
    and for the current judge ``agreement``, ``kappa``, ``n``, ``judge_model``,
    ``judge_prompt_version``, ``disagreement``, ``confusion`` and the spot-check file."""
    records = load_golden(golden_path).records  # verified; a tuple, so its resolution is reused
    spot = Path(spot_path) if spot_path else spotcheck_path(golden_path)
    all_checks = [s for s in read_spotchecks(spot) if s.get("human_verdict") in LABELS]
    judges = machine_judges(records)
    per_judge = [_one_judge(j, all_checks, spot) for j in judges]
    result = per_judge[0] if per_judge else _one_judge(None, all_checks, spot)
    result = dict(result)
    result["validated"] = bool(per_judge) and all(v["validated"] for v in per_judge)
    result["judges"] = [{k: v[k] for k in ("judge_model", "judge_prompt_version", "n", "agreement", "validated")}
                        for v in per_judge]
    result["case_sample"] = case_sample(records, all_checks).to_json()
    return result


def _one_judge(judge: tuple[str, str] | None, checks: list[dict], spot: Path) -> dict:
    if judge is not None:
        checks = [s for s in checks if (s["judge"].get("model", ""), s["judge"].get("prompt_version", "")) == judge]
    latest: dict[str, dict] = {}
    for s in checks:
        latest[s["judgement_id"]] = s  # one verdict per judgement: the human's last word
    stats = agreement_stats([(s["human_verdict"], s["llm_verdict"]) for s in latest.values()])
    disagreement = None if stats["agreement"] is None else 1 - stats["agreement"]
    validated = bool(judge and stats["n"] >= MIN_PAIRS and disagreement is not None
                     and disagreement <= MAX_DISAGREEMENT + 1e-12)
    return {"validated": validated, "agreement": stats["agreement"], "kappa": stats["kappa"], "n": stats["n"],
            "disagreement": disagreement, "judge_model": judge[0] if judge else None,
            "judge_prompt_version": judge[1] if judge else None, "min_pairs": MIN_PAIRS,
            "max_disagreement": MAX_DISAGREEMENT, "confusion": stats["confusion"], "spotcheck_file": str(spot),
            **{k: stats[k] for k in ("tpr", "tnr", "human_relevant", "human_no", "prevalence_yes",
                                     "prevalence_relevant", "class_warning")}}


# -- the interactive flow -----------------------------------------------------------------------
def read_answer(stdin: TextIO, console: Any) -> str:
    while True:
        console.print("[bold]Verdict?[/] [green]y[/]=YES  [yellow]p[/]=PART  [red]n[/]=NO  s=skip  q=quit: ", end="")
        line = stdin.readline()
        if not line:
            console.print()
            return "QUIT"  # end of input: stop, progress is saved
        answer = ANSWERS.get(line.strip().lower())
        if answer:
            return answer
        console.print(f"  not understood: {line.strip()!r}", markup=False)


def _record(j: Judgement, answer: str, author: str, golden_path: str | Path, design: dict | None = None) -> dict:
    model, pv = judge_id(j)
    extra = {"design": design} if design else {}
    return {**extra,
        "type": "spotcheck", "id": new_id("s", j.id, author, now_iso()), "judgement_id": j.id,
        "case_id": j.case_id, "span": {k: j.span.to_json()[k] for k in ("doc_id", "source_uri", "start", "end")},
        "human_verdict": answer, "llm_verdict": j.verdict,
        "judge": {"kind": j.judge_kind, "model": model, "prompt_version": pv},
        "author": author, "golden_set": Path(golden_path).name, "created_at": now_iso(),
    }


def _unchecked(golden_path: str | Path, spot: Path, seed: int,
               cases: int | None = None) -> tuple[dict[str, str], int, list[Judgement]]:
    """(question per case id, pairs already answered YES/PART/NO, the pairs not yet shown, in
    the seeded order): what the interactive check and the CSV export both work through. With
    ``cases``: the machine pairs without a verdict of the first ``cases`` cases of the case order
    (:func:`case_todo`), and the number of those cases already complete."""
    now = current(GoldenFile(golden_path).read_records())
    existing = read_spotchecks(spot)
    questions = {r.id: r.query for r in now.cases}
    if cases is not None:
        todo, complete = case_todo(now.records, existing, cases, seed)
        return questions, complete, todo
    seen = {s["judgement_id"] for s in existing}
    have = len({s["judgement_id"] for s in existing if s.get("human_verdict") in LABELS})
    todo = [j for j in order_pairs(machine_judged_pairs(now.records), seed) if j.id not in seen]
    return questions, have, todo


EXPORT_COLUMNS = ("judgement_id", "question", "source_uri", "passage", "verdict")


def export_pairs(golden_path: str | Path, out: str | Path, *, n: int = MIN_PAIRS, seed: int = DEFAULT_SEED,
                 spot_path: str | Path | None = None, cases: int | None = None) -> int:
    """The next unchecked pairs, in the order the interactive check shows them, as a CSV to
    answer offline (a spreadsheet, a reviewer without the tool): judgement id, question, source
    and passage, and an empty ``verdict`` column (YES / PART / NO, or empty to skip). The
    machine's verdict is not in it: the check stays blind. With ``cases``: every unchecked machine
    pair of the first ``cases`` cases of the case sample's order. Returns how many rows were written."""
    spot = Path(spot_path) if spot_path else spotcheck_path(golden_path)
    queries, have, todo = _unchecked(golden_path, spot, seed, cases)
    if cases is None:
        todo = todo[:max(0, n - have)]
    out = Path(out)
    if out.exists():
        raise UserError(f"{out}: exists; not overwritten (it may hold answers)", hint="name a new file")
    try:
        with out.open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(EXPORT_COLUMNS)
            for j in todo:
                w.writerow(sheet_row([j.id, queries.get(j.case_id, ""), j.span.source_uri, j.span.quote, ""]))
    except OSError as exc:
        raise UserError(f"--export {out}: cannot write: {exc.strerror}", hint="name a file in a folder you can write") from None
    return len(todo)


def answers_command(golden_path: str | Path, answers: str | Path, author: str | None = None) -> str:
    """The command that records an exported sheet's verdicts, with every option it needs: the
    golden set it was exported from (without it the verdicts went to the default set) and the
    author when one was named."""
    argv = ["rag-exp", "golden", "spotcheck", "--golden", str(golden_path), "--answers", str(answers)]
    if author:
        argv += ["--author", author]
    return shlex.join(argv)


def import_answers(golden_path: str | Path, answers: str | Path, *, author: str | None = None,
                   spot_path: str | Path | None = None) -> dict:
    """Record the verdicts of an exported CSV (:func:`export_pairs`), keyed by judgement id, so
    row order does not matter. Every row is checked before anything is written: an unknown or
    repeated judgement id or a verdict other than YES / PART / NO (y / p / n) or empty names the
    file and line. Empty verdicts are skipped; a pair already checked keeps its first answer.
    Returns :func:`judge_validation` plus the ``answered`` / ``skipped`` / ``already`` counts."""
    author = author or os.environ.get("USER") or getpass.getuser()
    spot = Path(spot_path) if spot_path else spotcheck_path(golden_path)
    path = Path(answers)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise UserError(f"--answers {path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"--answers {path}: not valid UTF-8 (byte {exc.start})") from None
    reader = csv.DictReader(text.splitlines(keepends=True))
    try:  # every row read first: a malformed CSV (a field over csv's size limit, ...) is one line
        rows = [(reader.line_num, read_row(row)) for row in reader]  # the export's formula guard removed
    except csv.Error as exc:
        raise UserError(f"--answers {path}: not readable as CSV near line {reader.line_num + 1} ({exc})") from None
    missing = [c for c in ("judgement_id", "verdict") if c not in (reader.fieldnames or [])]
    if missing:
        raise UserError(f"--answers {path}: no {' or '.join(missing)} column (header: {reader.fieldnames})",
                        hint="answer the file `rag-exp golden spotcheck --export FILE` wrote")
    now = current(GoldenFile(golden_path).read_records())
    pairs = {j.id: j for j in machine_judged_pairs(now.records)}
    seen = {s["judgement_id"] for s in read_spotchecks(spot) if s.get("human_verdict") in LABELS}
    todo, skipped, already, ids = [], 0, 0, set()
    for line_num, row in rows:
        where = f"--answers {path}:{line_num}"
        jid = (row.get("judgement_id") or "").strip()
        raw = (row.get("verdict") or "").strip()
        if jid not in pairs:
            raise UserError(f"{where}: {jid!r} is not a live machine judgement of {Path(golden_path).name}",
                            hint="export again: the golden set may have changed since")
        if jid in ids:
            raise UserError(f"{where}: {jid} answered twice in the file")
        ids.add(jid)
        if not raw:
            skipped += 1
            continue
        verdict = ANSWERS.get(raw.lower())
        if verdict == "SKIP":
            skipped += 1
            continue
        if verdict not in LABELS:
            raise UserError(f"{where}: verdict {raw!r} is not YES, PART or NO (y / p / n), or empty to skip")
        if jid in seen:
            already += 1
            continue
        todo.append(_record(pairs[jid], verdict, author, golden_path))
    for rec in todo:
        append_spotcheck(spot, rec)
    result = judge_validation(golden_path, spot)
    result.update({"answered": len(todo), "skipped": skipped, "already": already})
    return result


def run_spotcheck(golden_path: str | Path, *, n: int = MIN_PAIRS, seed: int = DEFAULT_SEED,
                  author: str | None = None, stdin: TextIO | None = None, console: Any = None,
                  spot_path: str | Path | None = None, cases: int | None = None) -> dict:
    """Ask for human verdicts until ``n`` pairs have one (skips do not count), or quit / EOF.
    With ``cases``: until every machine pair of the first ``cases`` cases of the case order has
    one (the case sample for judge-corrected metrics). Works with piped stdin. Returns
    :func:`judge_validation` plus ``asked`` / ``answered`` / ``skipped`` counts for this session."""
    stdin = stdin or sys.stdin
    console = console or Console(highlight=False)
    author = author or os.environ.get("USER") or getpass.getuser()
    spot = Path(spot_path) if spot_path else spotcheck_path(golden_path)
    queries, have, todo = _unchecked(golden_path, spot, seed, cases)
    session = Counter()
    need = max(0, n - have) if cases is None else len(todo)
    design = None if cases is None else {"sample": "cases", "case_seed": CASE_SEED}
    if cases is None:
        console.print(f"Spot-check of the machine judge(s): {have} of {n} pairs checked, {len(todo)} unchecked pairs "
                      f"left; verdicts go to {spot}", markup=False)
    else:
        console.print(f"Case sample for judge-corrected metrics: {have} of the first {cases} cases complete, "
                      f"{len(todo)} machine pair(s) of the others to check (every pair of a case: a skipped pair "
                      f"is asked again next time); verdicts go to {spot}", markup=False)
    order = {cid: i for i, cid in enumerate(dict.fromkeys(j.case_id for j in todo))}
    for j in todo:
        if session["answered"] >= need:
            break
        done = have + session["answered"]
        console.rule(f"pair {done + 1} of {n}" if cases is None else
                     f"case {have + order[j.case_id] + 1} of {cases}: pair {session['asked'] + 1} of {len(todo)}")
        console.print(Text("Question: ", style="bold") + Text(queries.get(j.case_id, "?")))
        console.print(Panel(Text(j.span.quote), title=Text(j.span.source_uri), expand=True))
        answer = read_answer(stdin, console)
        if answer == "QUIT":
            session["quit"] += 1
            break
        session["asked"] += 1
        session["answered" if answer != "SKIP" else "skipped"] += 1
        append_spotcheck(spot, _record(j, answer, author, golden_path, design))
    result = judge_validation(golden_path, spot)
    result.update({"asked": session["asked"], "answered": session["answered"], "skipped": session["skipped"]})
    print_report(result, console)
    return result


def print_report(result: dict, console: Any) -> None:
    if not result["n"]:
        console.print("No spot-checked pairs yet.")
        print_case_sample(result.get("case_sample"), console)
        return
    kappa = "undefined" if result["kappa"] is None else f"{result['kappa']:.3f}"
    status = "[green]validated[/]" if result["validated"] else "[yellow]not validated[/]"
    console.print(f"Judge {escape(str(result['judge_model']))} / {escape(str(result['judge_prompt_version']))}: "
                  f"n={result['n']}, "
                  f"agreement {result['agreement']:.1%}, Cohen's kappa {kappa}: {status} "
                  f"(needs >= {result['min_pairs']} pairs and <= {result['max_disagreement']:.0%} disagreement)")
    table = Table(title="rows: human, columns: LLM judge")
    table.add_column("human \\ judge")
    for lab in LABELS:
        table.add_column(lab, justify="right")
    for h in LABELS:
        table.add_row(h, *(str(result["confusion"][h][j]) for j in LABELS))
    console.print(table)

    def pct(x):
        return "n/a" if x is None else f"{x:.0%}"

    console.print(f"true-positive rate {pct(result.get('tpr'))} (of {result.get('human_relevant', 0)} pairs checked "
                  f"YES/PART), true-negative rate {pct(result.get('tnr'))} (of {result.get('human_no', 0)} NO); "
                  f"prevalence of YES {pct(result.get('prevalence_yes'))}")
    if result.get("class_warning"):
        console.print(f"[yellow]WARNING: {escape(result['class_warning'])}[/]")
    print_case_sample(result.get("case_sample"), console)


def print_case_sample(cs: dict | None, console: Any) -> None:
    """The case sample behind judge-corrected metrics, and how many more labels halve its part."""
    if not cs or not cs.get("machine_pairs"):
        return
    n, big_n = cs["cases"], cs["of_cases"]
    line = (f"Case sample (judge-corrected metrics): {n} of {big_n} cases have every machine pair checked, in "
            f"case order ({cs['pairs']} pairs)")
    if cs.get("next_case"):
        line += f"; it stops at case {cs['next_case']} ({cs['next_missing']} pair(s) unchecked)"
    console.print(line, markup=False)
    if n < MIN_CASE_SAMPLE:
        console.print(f"  runs log a judge-corrected estimate from {MIN_CASE_SAMPLE} cases: {cs['pairs_to_min_cases']} "
                      f"unchecked pair(s) in the first {MIN_CASE_SAMPLE}: rag-exp golden spotcheck --cases "
                      f"{MIN_CASE_SAMPLE}", markup=False)
    elif cs.get("cases_to_halve") is not None:
        console.print(f"  to halve the judge's part of the corrected intervals: {cs['more_cases_to_halve']} more cases "
                      f"(~{cs['more_pairs_to_halve']} more pairs at {cs['machine_pairs'] / big_n:.1f} machine pairs "
                      f"per case): rag-exp golden spotcheck --cases {cs['cases_to_halve']}", markup=False)
