"""Human spot-check of the machine judges: agreement, Cohen's kappa, confusion matrix.

A machine judge is the configured LLM judge (``judge.kind: llm``) or any other machine that
labelled pairs (``judge.kind: agent``, e.g. an AI coding agent); both are checked the same way.

``rag-exp golden spotcheck`` shows seeded-random machine-judged (case, span) pairs, the question and
the passage, with the judge's verdict hidden; the human answers YES / PART / NO (``s`` skips,
``q`` quits). Each answer is appended at once to ``experiments/spotcheck/<golden stem>.jsonl``,
so quitting loses nothing and a rerun continues where it stopped. These records validate the
judge; they are not labels and never go into the golden set.

Pair order: judgements sorted by ``sha256("<seed>|<judgement id>")``: reproducible, and stable
when more judgements are appended later (a new judgement slots in without reshuffling the rest).

A judge (model or name + prompt version) counts as validated when at least :data:`MIN_PAIRS`
(30) of its pairs have a human verdict and the human disagrees with it on at most
:data:`MAX_DISAGREEMENT` (10%) of them. The golden set's labels count as validated
(:func:`judge_validation`) only when *every* machine judge with live labels in it is: labels
from an unchecked judge are not made trustworthy by another judge's good record. The top-level
numbers describe the current judge (the one with the most live labels); ``judges`` lists each.

**The case sample** (``--cases N``), for judge-corrected metrics (:mod:`rag_experiments.stats.ppi`).
recall, RR and nDCG are functions of all the labels of a case, so a correction needs people's
verdicts on *every* machine-judged pair of a random sample of cases, not on random pairs.
``--cases N`` walks the live cases in a seeded order (``sha256("<seed>|case|<case id>")``, seed
:data:`CASE_SEED`, independent of ``--seed``) and asks for each case's machine pairs that have
no verdict yet (skipped ones again). The sample (:func:`case_sample`) is the longest prefix of that
order whose cases are complete: a prefix of a random order is a simple random sample whatever its
length, and verdicts given in the pair order count too. A case without machine labels is complete
as it is (its correction is 0). A case with a new machine judgement is incomplete until that pair
is checked, so the prefix stops there until it is.
"""

from __future__ import annotations

import csv
import getpass
import hashlib
import json
import math
import os
import shlex
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..errors import UserError
from .golden_file import GoldenFile
from .records import MACHINE_JUDGES, VERDICTS, Judgement, Record, new_id, now_iso
from .resolve import current, load_golden
from .sheet_cells import read_row, sheet_row

LABELS = ("YES", "PART", "NO")
MIN_PAIRS = 30
MAX_DISAGREEMENT = 0.10
DEFAULT_SEED = 7
CASE_SEED = 7  # the case order of the case sample (fixed: every run reads the same sample)
MIN_CASE_SAMPLE = 30  # = rag_experiments.stats.ppi.MIN_CASES: fewer sampled cases give no corrected interval
ANSWERS = {"y": "YES", "yes": "YES", "p": "PART", "part": "PART", "n": "NO", "no": "NO",
            "s": "SKIP", "skip": "SKIP", "q": "QUIT", "quit": "QUIT"}


def spotcheck_path(golden_path: str | Path) -> Path:
    """``experiments/spotcheck/<stem>.jsonl`` for ``experiments/golden/<stem>.jsonl``; for a golden
    file elsewhere, ``<its folder>/spotcheck/<stem>.jsonl``."""
    p = Path(golden_path)
    stem = p.name.removesuffix(".jsonl")
    base = p.parent.parent if p.parent.name == "golden" else p.parent
    return base / "spotcheck" / f"{stem}.jsonl"


# -- statistics ---------------------------------------------------------------------------------
def confusion_matrix(pairs: list[tuple[str, str]], labels: tuple[str, ...] = LABELS) -> dict[str, dict[str, int]]:
    """``matrix[human][judge]`` counts over (human, judge) verdict pairs."""
    m = {h: {j: 0 for j in labels} for h in labels}
    for h, j in pairs:
        m[h][j] += 1
    return m


def cohen_kappa(pairs: list[tuple[str, str]], labels: tuple[str, ...] = LABELS) -> float | None:
    """Cohen's kappa = (p_o - p_e) / (1 - p_e), with p_o the observed agreement and
    p_e = sum over labels of (human share x judge share). None when undefined (no pairs, or
    p_e = 1: both raters used one and the same label throughout)."""
    n = len(pairs)
    if n == 0:
        return None
    p_o = sum(h == j for h, j in pairs) / n
    human, judge = Counter(h for h, _ in pairs), Counter(j for _, j in pairs)
    p_e = sum(human[lab] * judge[lab] for lab in labels) / (n * n)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1 - p_e)


MIN_CLASS = 5  # fewer human verdicts than this of a class: the judge's rate on that class says nothing yet


def judge_rates(pairs: list[tuple[str, str]]) -> dict:
    """The judge against the human as rates, relevant = YES or PART: the true-positive rate (of
    the pairs the human called relevant, the share the judge did too), the true-negative rate (of
    the human's NO, the share the judge called NO), the prevalence of YES (and of relevant) in the
    sample, and a warning when the sample holds fewer than MIN_CLASS of one class."""
    pos = [(h, j) for h, j in pairs if h in ("YES", "PART")]
    neg = [(h, j) for h, j in pairs if h == "NO"]
    out = {
        "tpr": sum(j in ("YES", "PART") for _, j in pos) / len(pos) if pos else None,
        "tnr": sum(j == "NO" for _, j in neg) / len(neg) if neg else None,
        "human_relevant": len(pos), "human_no": len(neg),
        "prevalence_yes": sum(h == "YES" for h, _ in pairs) / len(pairs) if pairs else None,
        "prevalence_relevant": len(pos) / len(pairs) if pairs else None,
        "class_warning": None,
    }
    small = [(name, n) for name, n in (("relevant (YES/PART)", len(pos)), ("NO", len(neg))) if n < MIN_CLASS]
    if pairs and small:
        name, n = small[0]
        out["class_warning"] = (f"the spot-check holds only {n} pair(s) checked {name}: the judge's "
                                f"{'true-positive' if name.startswith('relevant') else 'true-negative'} rate says "
                                f"nothing yet (need {MIN_CLASS}); spot-check more pairs (rag-exp golden spotcheck -n ...)")
    return out


def agreement_stats(pairs: list[tuple[str, str]]) -> dict:
    n = len(pairs)
    agreement = sum(h == j for h, j in pairs) / n if n else None
    return {"n": n, "agreement": agreement, "kappa": cohen_kappa(pairs), "confusion": confusion_matrix(pairs),
            **judge_rates(pairs)}


# -- data ---------------------------------------------------------------------------------------
def read_spotchecks(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line from a killed session
        if isinstance(rec, dict) and rec.get("type") == "spotcheck":
            out.append(rec)
    return out


def append_spotcheck(path: Path, rec: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def machine_judged_pairs(records: list[Record]) -> list[Judgement]:
    """The current machine (llm or agent) judgement of each (case, span) of a live case (not
    superseded, not retired)."""
    now = current(records)
    cases = {r.id for r in now.cases} - now.retired
    latest: dict[tuple, Judgement] = {}
    for r in now.live_judgements:
        if r.judge_kind in MACHINE_JUDGES and r.case_id in cases:
            latest[(r.case_id, *r.span.key)] = r
    return list(latest.values())



def _judge_id(j: Judgement) -> tuple[str, str]:
    """(model, prompt version): the same model name served by another provider than Anthropic
    (judge.provider, e.g. a self-hosted model behind an OpenAI-compatible server) is another
    judge, ``openai:<model>``; records without a provider are Anthropic's, as before."""
    judge = j.raw["judge"]
    model = judge.get("model") or judge.get("name", "")
    provider = judge.get("provider")
    if provider and provider != "anthropic" and judge.get("model"):
        model = f"{provider}:{model}"
    return (model, judge.get("prompt_version", ""))


def machine_judges(records: list[Record]) -> list[tuple[str, str]]:
    """Every machine judge with live labels, the one with the most labels first."""
    counts = Counter(_judge_id(j) for j in machine_judged_pairs(records))
    return sorted(counts, key=lambda k: (-counts[k], k))


def order_pairs(judgements: list[Judgement], seed: int) -> list[Judgement]:
    return sorted(judgements, key=lambda j: hashlib.sha256(f"{seed}|{j.id}".encode()).hexdigest())


def order_cases(case_ids, seed: int = CASE_SEED) -> list[str]:
    """The case sample's order: by ``sha256("<seed>|case|<case id>")`` (stable as cases are added)."""
    return sorted(case_ids, key=lambda c: hashlib.sha256(f"{seed}|case|{c}".encode()).hexdigest())


@dataclass(frozen=True)
class CaseSample:
    """People's verdicts on every machine-judged pair of a random sample of cases."""

    cases: tuple[str, ...]  # the sampled cases, in case order
    grades: dict[str, int]  # judgement id -> people's grade (YES 2, PART 1, NO 0), sampled cases only
    pairs: int  # machine pairs in the sampled cases
    n_all: int  # live cases
    machine_pairs: int  # machine pairs in all live cases
    next_case: str | None = None  # the first case of the order that is not complete: the sample stops there
    next_missing: int = 0  # its machine pairs without a verdict
    to_minimum: int = 0  # machine pairs without a verdict in the first MIN_CASE_SAMPLE cases of the order

    @property
    def pairs_per_case(self) -> float:
        return self.machine_pairs / self.n_all if self.n_all else 0.0

    def to_json(self) -> dict:
        n, big_n = len(self.cases), self.n_all
        out = {"cases": n, "of_cases": big_n, "pairs": self.pairs, "machine_pairs": self.machine_pairs,
               "case_seed": CASE_SEED, "next_case": self.next_case, "next_missing": self.next_missing,
               "min_cases": MIN_CASE_SAMPLE, "pairs_to_min_cases": self.to_minimum}
        half = halve_judge_part(n, big_n)
        if half is not None:
            out.update({"cases_to_halve": half, "more_cases_to_halve": half - n,
                        "more_pairs_to_halve": math.ceil((half - n) * self.pairs_per_case)})
        return out


def halve_judge_part(n: int, n_all: int) -> int | None:
    """Sampled cases that would halve the judge part of a corrected interval: its variance is
    ``(1/n - 1/N) var(H - M)``, so halving the width quarters ``1/n - 1/N``:
    ``n' = 1 / ((1/n - 1/N) / 4 + 1/N)`` (about 4n while n is small against N; at most N)."""
    if n < 1 or n >= n_all:
        return None
    return min(n_all, math.ceil(1 / ((1 / n - 1 / n_all) / 4 + 1 / n_all) - 1e-9))


def human_verdicts(checks: list[dict]) -> dict[str, str]:
    """judgement id -> the person's last YES / PART / NO (skips are no verdict)."""
    out: dict[str, str] = {}
    for s in checks:
        if s.get("human_verdict") in LABELS:
            out[s["judgement_id"]] = s["human_verdict"]
    return out


def _cases_and_verdicts(records, checks: list[dict]) -> tuple[list[str], dict[str, list[Judgement]], dict[str, str]]:
    """(the live case ids; case id -> its machine-judged pairs; judgement id -> the person's verdict):
    what the case sample and its to-do list are both read from."""
    now = current(records)
    live = [r.id for r in now.cases if r.id not in now.retired]
    by_case: dict[str, list[Judgement]] = {}
    for j in machine_judged_pairs(now.records):
        by_case.setdefault(j.case_id, []).append(j)
    return live, by_case, human_verdicts(checks)


def case_sample(records: list[Record] | tuple[Record, ...], checks: list[dict], seed: int = CASE_SEED) -> CaseSample:
    """The longest prefix of the seeded case order whose every machine pair has a human verdict."""
    live, by_case, verdicts = _cases_and_verdicts(records, checks)
    cases, grades, pairs, stop, missing = [], {}, 0, None, 0
    order = order_cases(live, seed)
    to_minimum = sum(j.id not in verdicts for cid in order[:MIN_CASE_SAMPLE] for j in by_case.get(cid, []))
    for cid in order:
        js = by_case.get(cid, [])
        unchecked = [j for j in js if j.id not in verdicts]
        if unchecked:
            stop, missing = cid, len(unchecked)
            break
        cases.append(cid)
        grades.update({j.id: VERDICTS[verdicts[j.id]] for j in js})
        pairs += len(js)
    return CaseSample(tuple(cases), grades, pairs, len(live), sum(len(v) for v in by_case.values()), stop, missing,
                      to_minimum)


def case_todo(records, checks: list[dict], n_cases: int, pair_seed: int = DEFAULT_SEED) -> tuple[list[Judgement], int]:
    """(the machine pairs without a verdict of the first ``n_cases`` cases of the case order, case
    by case, each case's pairs in the pair order; how many of those cases are complete)."""
    live, by_case, verdicts = _cases_and_verdicts(records, checks)
    todo, complete = [], 0
    for cid in order_cases(live)[:n_cases]:
        missing = [j for j in order_pairs(by_case.get(cid, []), pair_seed) if j.id not in verdicts]
        complete += not missing
        todo += missing
    return todo, complete


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
    model, pv = _judge_id(j)
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
