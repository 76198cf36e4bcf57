"""Which machine-judged pairs a spot-check asks about and in which order, the spot-check file they are
recorded in, and the case sample of judge-corrected metrics (:mod:`.spotcheck` asks and reports).

Pair order: judgements sorted by ``sha256("<seed>|<judgement id>")``: reproducible, and stable
when more judgements are appended later (a new judgement slots in without reshuffling the rest).

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

import hashlib
import json
import math
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .agreement import LABELS
from .records import MACHINE_JUDGES, VERDICTS, Judgement, Record
from .resolve import current

DEFAULT_SEED = 7
CASE_SEED = 7  # the case order of the case sample (fixed: every run reads the same sample)
MIN_CASE_SAMPLE = 30  # = rag_experiments.stats.ppi.MIN_CASES: fewer sampled cases give no corrected interval


def spotcheck_path(golden_path: str | Path) -> Path:
    """``experiments/spotcheck/<stem>.jsonl`` for ``experiments/golden/<stem>.jsonl``; for a golden
    file elsewhere, ``<its folder>/spotcheck/<stem>.jsonl``."""
    p = Path(golden_path)
    stem = p.name.removesuffix(".jsonl")
    base = p.parent.parent if p.parent.name == "golden" else p.parent
    return base / "spotcheck" / f"{stem}.jsonl"


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



def judge_id(j: Judgement) -> tuple[str, str]:
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
    counts = Counter(judge_id(j) for j in machine_judged_pairs(records))
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
