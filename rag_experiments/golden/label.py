"""Label retrieved passages with an LLM judge (pooling), resumably.

For each case, the top-k hits of a retriever are judged (YES / PART / NO) unless:

* evaluation would already count the hit relevant (:func:`covers`, which is
  :func:`rag_experiments.span_match.matches`: same document, and the overlap is at least
  half of the evidence span or at least half of the hit), or
* a span overlapping it was already judged for this case (:func:`already_judged`: the same rule,
  between the hit and each judged span), in the golden set, in the checkpoint, or earlier in this
  run. A (case, span) pair is never judged twice.

Each verdict is appended as a ``judgement`` record (span = the hit's text span with its quote and
document hash; ``judge = {kind: llm, provider, model, prompt_version}``: ``provider`` is
``anthropic`` or ``openai`` (an OpenAI-compatible server), and judgements written before
providers existed, without it, are Anthropic's). Outcomes are checkpointed in
``<golden stem>.label.log.jsonl`` first (see :mod:`.llm_jobs` for the resume rules); malformed
judge answers are counted and skipped, never fatal.

**Sampled labelling** (``--sample N`` / ``--budget USD``; :func:`draw_sample`): instead of every
pair, a stratified random sample of them. The pairs (the *population*: what a full run would
judge) are split into strata by rank (:data:`DEFAULT_STRATA` ``1-5,6-10,11-20``; a pooled pair's
rank is its best rank in the pool's runs), ``N`` is allocated over the strata with sampling rates
halving from one stratum to the next (:data:`DEFAULT_PRIORITY`; at least 2 per stratum; capped at
the stratum), and within a stratum the pairs first in a seeded random order (sha256 of seed and
pair key) are judged. Each judgement records the design (``sample``: id, stratum, population
``N_h``, seed, inclusion ``n_h / N_h``); evaluation turns them into IPW estimates
(:mod:`rag_experiments.evaluation.sampled`). The order does not depend on what else is judged, so
a rerun with the same seed and strata judges the same pairs (the sample's own judgements stay in
its population; nothing is paid twice) and a rerun with a larger ``N`` extends the sample.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable

from .. import llm
from ..span_match import matches
from ..limits import query_problem
from .golden_file import GoldenFile
from .llm_jobs import (Checkpoint, GoldenAppender, Job, JobPlan, JobReport, Task, check_batch_provider,
                       checkpoint_path, plan_fields, read_state, run_jobs)
from ..errors import ConfigError
from ..stats.ipw import allocate
from .records import VERDICTS, Judgement, new_id
from .resolve import load_golden, resolve
from .same_text import applied_record, split_same_text, verdicts_by_case

PROMPT_VERSION = "judge-v1"
MIN_COVERAGE = 0.5
EXPECTED_OUTPUT_TOKENS = 60  # per verdict, for the cost estimate

SYSTEM_PROMPT = """\
You judge the results of a search engine over technical documentation. You get a user's \
question and one passage. Decide whether the passage answers the question.

YES: the passage fully answers the question on its own.
PART: the passage answers part of the question, or gives information needed for the answer \
without giving the answer itself.
NO: the passage does not help answer the question (same topic but a different question is NO).

Judge from the passage only; do not fill gaps with outside knowledge.
Answer with one JSON object and nothing else:
{"verdict": "YES" | "PART" | "NO", "reason": "<one short sentence>"}"""


def build_prompt(query: str, passage: str, language: str = "english", parts: tuple[str, ...] = ()) -> str:
    """The user message for one (question, passage) pair; ``language``: corpus.language (not english:
    the judge is told the language they are written in; english prompts stay as they were).
    ``parts``: a question that needs several passages (evidence groups): the passage that answers
    each part, so the judge says which part this passage answers (``"part"``: its number, or null)."""
    name = language.rsplit(".", 1)[-1]
    told = "" if name in ("english", "simple") else f"The question and the passage are in {name.capitalize()}. "
    if parts:
        listed = "\n".join(f"Part {i}: <reference>{text}</reference>" for i, text in enumerate(parts, start=1))
        told += (f"The question needs several passages; each part is answered by a reference passage:\n{listed}\n"
                 "Judge the passage for the part it answers (YES: it answers that part fully, PART: partly) and add "
                 '"part": that part\'s number (null when the verdict is NO). ')
    return (f"Question: {query}\n\nPassage:\n<passage>\n{passage}\n</passage>\n\n"
            f"{told}Answer with the JSON object only.")


# -- overlap rules: evaluation's, so labelling skips exactly what evaluation would credit ---------
def covers(hit: dict, evidence: Any, min_coverage: float = MIN_COVERAGE) -> bool:
    """Evaluation would credit ``hit`` (a dict with doc_id/start/end) for ``evidence``."""
    return matches(hit["doc_id"], hit["start"], hit["end"], evidence.doc_id, evidence.start, evidence.end,
                   min_coverage)


def same_passage(a: tuple[str, int, int], b: tuple[str, int, int], min_share: float = MIN_COVERAGE) -> bool:
    """Two ``(doc_id, start, end)`` spans are one passage for judging purposes. Overlap of at
    least half of either span is the same as at least half of the shorter one."""
    return matches(*a, *b, min_share)


def already_judged(span: tuple[str, int, int], judged: Iterable[tuple[str, int, int]]) -> bool:
    return any(same_passage(span, j) for j in judged)


def pair_key(case_id: str, doc_id: str, start: int, end: int) -> str:
    """The checkpoint key of a (case, span) pair: ``case_id|doc_id|start|end``."""
    return f"{case_id}|{doc_id}|{start}|{end}"


def parse_pair_key(key: str) -> tuple[str, tuple[str, int, int]]:
    case_id, rest = key.split("|", 1)  # case ids never contain "|"; doc ids might
    doc_id, start, end = rest.rsplit("|", 2)
    return case_id, (doc_id, int(start), int(end))


# -- answers ------------------------------------------------------------------------------------
def parse_verdict(text: str) -> tuple[str | None, str | None, str | None]:
    """``(verdict, reason, problem)``: strict JSON object with ``verdict`` in YES/PART/NO."""
    try:
        data = llm.extract_json(text)
    except llm.JSONExtractionError:
        return None, None, "malformed_json"
    if not isinstance(data, dict):
        return None, None, "not_an_object"
    verdict = data.get("verdict")
    if verdict not in VERDICTS:
        return None, None, "bad_verdict"
    reason = data.get("reason")
    reason = " ".join(reason.split())[:500] if isinstance(reason, str) and reason.strip() else None
    return verdict, reason, None


def judgement_record(case_id: str, hit: dict, verdict: str, reason: str | None, model: str,
                     pool: dict | None = None, provider: str = llm.DEFAULT_PROVIDER, sample: dict | None = None) -> dict:
    # the id of an Anthropic judgement is what it was before providers existed; another
    # provider's model name is qualified (the same name on two APIs is two judges)
    judge_key = model if provider == llm.DEFAULT_PROVIDER else f"{provider}:{model}"
    rec = {
        "type": "judgement",
        "id": new_id("j", case_id, hit["doc_id"], hit["start"], hit["end"], "llm", judge_key, PROMPT_VERSION),
        "case_id": case_id,
        "span": {"doc_id": hit["doc_id"], "source_uri": hit["source_uri"], "start": int(hit["start"]),
                 "end": int(hit["end"]), "quote": hit["text"], "doc_hash": hit["doc_hash"]},
        "verdict": verdict,
        "judge": {"kind": "llm", "provider": provider, "model": model, "prompt_version": PROMPT_VERSION},
    }
    if reason:
        rec["reason"] = reason
    if pool:  # where the judged hit came from: the runs pooled and the depth (rag-exp golden label --pool)
        rec["provenance"] = {"pool": pool}
    if sample:  # drawn by --sample: the design evaluation weights it with
        rec["sample"] = dict(sample)
    return rec


def interpret_verdict(model: str, provider: str = llm.DEFAULT_PROVIDER) -> Callable[[dict, str], dict]:
    def interpret(payload: dict, text: str) -> dict:
        verdict, reason, problem = parse_verdict(text)
        if problem:
            return {"records": [], "problems": {problem: 1}, "unusable": True}
        rec = judgement_record(payload["case_id"], payload["hit"], verdict, reason, model, payload.get("pool"),
                               provider, payload.get("sample"))
        problems = {f"verdict_{verdict}": 1}
        if payload.get("parts"):  # a multi case: the verdict is for the evidence group the judge named
            part = _part_of(text, len(payload["parts"]))
            if part is not None and verdict != "NO":
                rec["group"] = part - 1
            elif verdict != "NO":
                problems["part_missing"] = 1  # no group: resolution's same-document rule places it
        # the same text elsewhere in the pool (another document): the verdict, applied from this one
        copies = [applied_record(rec, payload["case_id"], c["hit"], c["similarity"], payload.get("pool"),
                                 c.get("sample")) for c in payload.get("copies") or ()]
        return {"records": [rec, *copies], "problems": problems, "unusable": False}
    return interpret


def _part_of(text: str, n_parts: int) -> int | None:
    """The judge's ``"part"`` (1..n_parts), or None when absent or out of range."""
    try:
        data = llm.extract_json(text)
    except llm.JSONExtractionError:
        return None
    part = data.get("part") if isinstance(data, dict) else None
    return part if isinstance(part, int) and not isinstance(part, bool) and 1 <= part <= n_parts else None


def case_parts(golden: Any) -> dict[str, tuple[str, ...]]:
    """Per multi-group case, the quote of its first evidence span of each group (the parts the judge sees)."""
    out = {}
    for case in golden.cases:
        if case.n_groups > 1:
            own = {}
            for e in case.evidence:
                if e.ref.startswith(f"{case.case_id}#") and e.group is not None:
                    own.setdefault(e.group, e.span.quote)
            out[case.case_id] = tuple(own.get(g, "") for g in range(case.n_groups))
    return out


# -- plan + run ---------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class LabelPlan(JobPlan):
    cases: int  # one job per (case, hit span) pair to judge
    skipped: dict[str, int]  # covers_evidence, already_judged, offered_already, hit_text_mismatch, ...
    sample: SampleDraw | None = None  # --sample / --budget: the design drawn
    applied: tuple[dict, ...] = ()  # verdicts copied to pairs whose text was judged already (.same_text)


@dataclass(kw_only=True)
class LabelReport(JobReport):
    pairs: int
    skipped: dict[str, int]
    judgements_appended: int = 0
    judgements_reconciled: int = 0
    judgements_applied: int = 0  # earlier verdicts copied to the same text (never sent)


_HIT_KEYS = ("doc_id", "source_uri", "start", "end", "text", "doc_hash")


@dataclass(frozen=True)
class Pair:
    """A (case, retrieved span) pair to judge: ``hit`` holds :data:`_HIT_KEYS` (start/end as ints)."""

    key: str  # pair_key(case_id, doc_id, start, end)
    case_id: str
    query: str
    hit: dict
    rank: int = 0  # the hit's 1-based rank in its list (a pool: its best rank in the pooled runs); 0 unknown
    sample: dict | None = None  # drawn by a sample (draw_sample): the design its judgement records


def candidate_pairs(golden: Any, retrieve: Callable[[str], list[dict]], *, k: int,
                    also_judged: dict[str, list[tuple[str, int, int]]] | None = None,
                    retry_keys: frozenset[str] = frozenset(),
                    on_case: Callable[[int, int], None] | None = None) -> tuple[list[Pair], dict[str, int]]:
    """The (case, span) pairs a judge must see, in case order then the hits' order, and the skip
    counts: the top ``k`` of ``retrieve(query)`` for every case, minus hits evaluation already
    credits, hits overlapping a span judged for the case (in the golden set, in ``also_judged``,
    or earlier in this list) and malformed hits. Shared by the LLM judge (:func:`plan_labelling`)
    and labelling by hand (:mod:`.hand_label`): both see the same pairs."""
    also_judged = also_judged or {}
    skipped: Counter = Counter()
    pairs: list[Pair] = []
    for i, case in enumerate(golden.cases):
        if on_case:
            on_case(i, len(golden.cases))
        if query_problem(case.query):  # cannot be searched (and is excluded from runs): retire it
            skipped["query_too_large"] += 1
            continue
        judged = [e.span.key for e in case.evidence]  # everything judged or given, any grade
        judged += also_judged.get(case.case_id, [])
        earlier = len(judged)  # past this index: spans offered by this plan (another run's copy of a hit)
        relevant = case.relevant
        for position, hit in enumerate(list(retrieve(case.query))[:k], start=1):
            if any(key not in hit for key in _HIT_KEYS):
                skipped["hit_missing_fields"] += 1
                continue
            start, end = int(hit["start"]), int(hit["end"])
            if len(hit["text"]) != end - start or end <= start:
                skipped["hit_text_mismatch"] += 1
                continue
            key = pair_key(case.case_id, hit["doc_id"], start, end)
            span = (hit["doc_id"], start, end)
            if any(covers(hit, e.span) for e in relevant):
                skipped["covers_evidence"] += 1
                continue
            if key in retry_keys:
                pass  # an unusable answer for exactly this pair: ask again
            elif already_judged(span, judged):
                # judged before, or the same passage already offered in this plan (a pool's runs share hits)
                skipped["already_judged" if already_judged(span, judged[:earlier]) else "offered_already"] += 1
                continue
            judged.append(span)
            clean = {k2: hit[k2] for k2 in _HIT_KEYS}
            clean["start"], clean["end"] = start, end
            rank = hit.get("rank")
            pairs.append(Pair(key, case.case_id, case.query, clean,
                              rank if isinstance(rank, int) and rank > 0 else position))
    return pairs, dict(skipped)


# -- sampled labelling ---------------------------------------------------------------------------
DEFAULT_STRATA = "1-5,6-10,11-20"
DEFAULT_PRIORITY = 0.5  # each stratum's sampling rate relative to the one above it


def parse_strata(text: str, where: str = "--strata") -> list[tuple[str, int, int]]:
    """``"1-5,6-10,11-20"`` -> ``[("1-5", 1, 5), ...]``: contiguous rank ranges from 1 (a single rank
    may be written ``3``; the last may be open, ``21+``). Ranks past the last range fall in it."""
    out: list[tuple[str, int, int]] = []
    for part in [p.strip() for p in str(text).split(",")]:
        try:
            if part.endswith("+"):
                lo, hi = int(part[:-1]), 10**9
            elif "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
            else:
                lo = hi = int(part)
        except ValueError:
            raise ConfigError(f"{where}: {part!r} is not a rank range (like 1-5, 6, or 21+)",
                              hint=f"for example {where} {DEFAULT_STRATA}") from None
        expected = out[-1][2] + 1 if out else 1
        if lo != expected or hi < lo or (out and out[-1][2] >= 10**9):
            raise ConfigError(f"{where}: {part!r} must start at rank {expected} and not end before it "
                              "(contiguous ranges from 1, an open range only last)",
                              hint=f"for example {where} {DEFAULT_STRATA}")
        out.append((part, lo, hi))
    return out


def stratum_of_rank(rank: int, strata: list[tuple[str, int, int]]) -> str:
    for name, lo, hi in strata:
        if lo <= rank <= hi:
            return name
    return strata[-1][0]


@dataclass(frozen=True)
class SampleSpec:
    """``--sample N`` (``n``) or ``--budget USD`` (``budget``), with its seed and strata."""

    n: int | None = None
    budget: float | None = None
    seed: int = 13
    strata: str = DEFAULT_STRATA
    unit: str = "case"  # case: whole cases (every pair of each drawn case); pair: pairs within rank strata

    def __post_init__(self) -> None:
        if (self.n is None) == (self.budget is None):
            raise ConfigError("a sample needs --sample N or --budget USD (one of them)")
        if self.unit not in ("case", "pair"):
            raise ConfigError(f"--sample-unit: must be case or pair, got {self.unit!r}")
        if self.n is not None and self.n < 1:
            raise ConfigError(f"--sample: must be >= 1 pair, got {self.n}")
        if self.budget is not None and not self.budget > 0:
            raise ConfigError(f"--budget: must be > 0 USD, got {self.budget}")
        parse_strata(self.strata)

    def sample_id(self, source: Any) -> str:
        """One id per (seed, unit, strata, what was pooled or retrieved): reruns of the same sample share it."""
        design = self.strata if self.unit == "pair" else "cases"
        return new_id("s", self.seed, design, json.dumps(source, sort_keys=True, default=str))


@dataclass(frozen=True)
class SampleDraw:
    """The design drawn: per stratum its population N_h and the n_h pairs to judge."""

    id: str
    seed: int
    strata: tuple[str, ...]
    population: dict[str, int]
    allocated: dict[str, int]
    already: int = 0  # pairs of this sample judged before (golden set), not asked again
    budget: float | None = None
    unit: str = "pair"
    pairs: int = 0  # pairs drawn (unit case: every pair of the drawn cases)
    pool_pairs: int = 0  # pairs in the population

    @property
    def n(self) -> int:
        return sum(self.allocated.values())

    def describe(self) -> str:
        total = sum(self.population.values())
        if self.unit == "case":
            return (f"sample {self.id} (seed {self.seed}): {self.n} of {total} cases, all {self.pairs} of their "
                    f"pairs ({self.pairs} of {self.pool_pairs} pairs); the metrics of runs scored on these labels "
                    "are estimates with intervals")
        per = ", ".join(f"ranks {h}: {self.allocated[h]} of {self.population[h]}" for h in self.strata)
        return (f"sample {self.id} (seed {self.seed}): {self.n} of {total} pairs ({per}); the metrics of runs scored "
                "on these labels are IPW estimates with intervals")


def _order_key(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}|{key}".encode()).hexdigest()


def draw_sample(pairs: list[Pair], spec: SampleSpec, sample_id: str, n: int) -> tuple[list[Pair], SampleDraw]:
    """The ``n`` pairs to judge out of ``pairs`` (the population), each carrying its design; in the
    population's order. Within a stratum the first ``n_h`` in the seeded order are taken, so a larger
    ``n`` extends a smaller one's sample."""
    if spec.unit == "case":
        return _draw_cases(pairs, spec, sample_id, n)
    strata = parse_strata(spec.strata)
    names = [name for name, _lo, _hi in strata]
    by = {name: [] for name in names}
    for p in pairs:
        by[stratum_of_rank(p.rank or strata[-1][1], strata)].append(p)
    sizes = {name: len(by[name]) for name in names}
    priority = {name: DEFAULT_PRIORITY ** i for i, name in enumerate(names)}
    alloc = allocate(sizes, n, priority)
    chosen: dict[str, dict] = {}
    for name in names:
        for p in sorted(by[name], key=lambda p: _order_key(spec.seed, p.key))[:alloc[name]]:
            chosen[p.key] = {"id": sample_id, "stratum": name, "population": sizes[name], "seed": spec.seed,
                             "inclusion": round(alloc[name] / sizes[name], 6)}
    picked = [Pair(p.key, p.case_id, p.query, p.hit, p.rank, chosen[p.key]) for p in pairs if p.key in chosen]
    return picked, SampleDraw(sample_id, spec.seed, tuple(names), sizes, alloc, budget=spec.budget, unit="pair",
                              pairs=len(picked), pool_pairs=len(pairs))


CASES_STRATUM = "cases"


def _draw_cases(pairs: list[Pair], spec: SampleSpec, sample_id: str, n: int) -> tuple[list[Pair], SampleDraw]:
    """Unit case: the cases first in the seeded order (sha256 of seed and case id), as many as
    hold about ``n`` pairs on average (at least 2; every pair of a drawn case is judged)."""
    cases = list(dict.fromkeys(p.case_id for p in pairs))  # cases with at least one pair to judge
    if not cases:
        return [], SampleDraw(sample_id, spec.seed, (CASES_STRATUM,), {CASES_STRATUM: 0}, {CASES_STRATUM: 0},
                              budget=spec.budget, unit="case")
    want = len(cases) if n >= len(pairs) else min(len(cases), max(2, round(len(cases) * n / len(pairs))))
    drawn = set(sorted(cases, key=lambda c: _order_key(spec.seed, c))[:want])
    design = {"id": sample_id, "unit": "case", "stratum": CASES_STRATUM, "population": len(cases), "seed": spec.seed,
              "inclusion": round(want / len(cases), 6)}
    picked = [Pair(p.key, p.case_id, p.query, p.hit, p.rank, design) for p in pairs if p.case_id in drawn]
    return picked, SampleDraw(sample_id, spec.seed, (CASES_STRATUM,), {CASES_STRATUM: len(cases)},
                              {CASES_STRATUM: want}, budget=spec.budget, unit="case", pairs=len(picked),
                              pool_pairs=len(pairs))


def _without_sample(golden: Any, sample_id: str) -> tuple[Any, set[str]]:
    """The golden set as it was before this sample judged anything (its judgements removed), and the
    pair keys it judged: the population of a rerun is the first run's."""
    own = [r for r in golden.records if isinstance(r, Judgement) and (r.raw.get("sample") or {}).get("id") == sample_id]
    if not own:
        return golden, set()
    ids = {r.id for r in own}
    rest = tuple(r for r in golden.records if r.id not in ids)
    return resolve(rest, golden.path, golden.digest, golden.head), {pair_key(r.case_id, *r.span.key) for r in own}


def sampled_pairs(golden: Any, retrieve: Callable[[str], list[dict]], *, k: int, spec: SampleSpec, source: Any,
                  n: int, also_judged: dict[str, list[tuple[str, int, int]]] | None = None,
                  retry_keys: frozenset[str] = frozenset(),
                  on_case: Callable[[int, int], None] | None = None) -> tuple[list[Pair], dict[str, int], SampleDraw]:
    """:func:`candidate_pairs` of the golden set without this sample's own judgements (the population),
    then :func:`draw_sample`; the pairs this sample judged already are left out (counted in
    ``skipped['sampled_already_judged']`` and :attr:`SampleDraw.already`). ``also_judged``: spans
    judged elsewhere (a checkpoint), minus this sample's. Shared by the LLM judge and labelling by hand."""
    sid = spec.sample_id(source)
    before, judged_keys = _without_sample(golden, sid)
    population, skipped = candidate_pairs(before, retrieve, k=k, also_judged=also_judged, retry_keys=retry_keys,
                                          on_case=on_case)
    picked, draw = draw_sample(population, spec, sid, n)
    left = [p for p in picked if p.key not in judged_keys]
    draw = replace(draw, already=len(picked) - len(left))
    if draw.already:
        skipped = {**skipped, "sampled_already_judged": draw.already}
    return left, skipped, draw


def plan_labelling(golden_path: str | Path, retrieve: Callable[[str], list[dict]], *, k: int = 20,
                   model: str = llm.DEFAULT_MODEL, batch: bool = False, retry_failed: bool = False,
                   price: llm.Price | None = None,
                   on_case: Callable[[int, int], None] | None = None, pool: dict | None = None,
                   provider: str = llm.DEFAULT_PROVIDER, sample: SampleSpec | None = None,
                   source: Any = None, language: str = "english") -> LabelPlan:
    """Retrieve top-k for every (non-retired) case and decide which (case, span) pairs to judge.

    ``retrieve(query)`` returns hit dicts (chunk_id, doc_id, source_uri, start, end, text,
    doc_hash); only the first ``k`` are used. No API call is made here. ``pool``: the definition
    of a pool the hits come from (runs, k), recorded in each judgement's provenance. ``sample``:
    judge a stratified random sample of the pairs (``--sample`` / ``--budget``); ``source`` names
    what was retrieved (the pool, or the overrides and k) in the sample's id.
    """
    check_batch_provider(batch, provider)  # before retrieving every case's hits
    golden = load_golden(golden_path)
    cp_path = checkpoint_path(golden_path, "label")
    state = read_state(Checkpoint(cp_path))
    sid = sample.sample_id(source if source is not None else pool) if sample else None

    def ours(entry: dict) -> bool:  # a checkpointed verdict of this sample: it stays in the population
        return sid is not None and any((r.get("sample") or {}).get("id") == sid for r in entry.get("records") or ())

    checkpointed: dict[str, list[tuple[str, int, int]]] = {}
    keys = [e["key"] for e in state.entries if e.get("event") == "item" and e.get("status") == "done" and not ours(e)]
    keys += [item["key"] for b in state.open_batches for item in b["items"].values()
             if not (sid and ((item.get("payload") or {}).get("sample") or {}).get("id") == sid)]
    for key in keys:
        case_id, span = parse_pair_key(key)
        checkpointed.setdefault(case_id, []).append(span)
    for e in state.entries:  # the copies a checkpointed verdict was written for (same text), too
        if e.get("event") == "item" and e.get("status") == "done" and not ours(e):
            for r in e.get("records") or ():
                if r.get("applied_from") and isinstance(r.get("span"), dict):
                    checkpointed.setdefault(r["case_id"], []).append((r["span"]["doc_id"], r["span"]["start"],
                                                                      r["span"]["end"]))
    retry_keys = state.failed if retry_failed else frozenset()

    parts = case_parts(golden)  # multi cases: the judge is told the parts and names the one a passage answers

    earlier = verdicts_by_case(golden.records)
    skipped_same: dict[str, int] = {}
    applied: list[dict] = []

    def jobs_of(pairs: list[Pair]) -> list[Job]:
        """One job per distinct text of a case; the verdicts a text already has are copied instead."""
        sent, copied, counts = split_same_text(pairs, earlier, pool)
        applied[:] = copied
        skipped_same.clear()
        skipped_same.update(counts)
        jobs: list[Job] = []
        for pair, copies in sent:
            payload = {"case_id": pair.case_id, "hit": dict(pair.hit)}
            if copies:
                payload["copies"] = copies
            if pool:
                payload["pool"] = pool
            if pair.sample:
                payload["sample"] = pair.sample
            if pair.case_id in parts:
                payload["parts"] = list(parts[pair.case_id])
            jobs.append(Job(pair.key, build_prompt(pair.query, pair.hit["text"], language,
                                                   parts.get(pair.case_id, ())), payload))
        return jobs

    def fields(jobs: list[Job]) -> dict:
        return plan_fields(jobs, state, golden_path=golden_path, checkpoint_path=cp_path, system=SYSTEM_PROMPT,
                           model=model, batch=batch, retry_failed=retry_failed,
                           output_tokens_per_request=EXPECTED_OUTPUT_TOKENS, price=price, provider=provider)

    if sample is None:
        pairs, skipped = candidate_pairs(golden, retrieve, k=k, also_judged=checkpointed, retry_keys=retry_keys,
                                         on_case=on_case)
        f = fields(jobs_of(pairs))
        return LabelPlan(cases=len(golden.cases), skipped={**skipped, **skipped_same}, applied=tuple(applied), **f)
    hits: dict[str, list[dict]] = {}

    def cached(query: str) -> list[dict]:  # a budget plans twice: retrieve once
        if query not in hits:
            hits[query] = list(retrieve(query))
        return hits[query]

    def draw(n: int):
        return sampled_pairs(golden, cached, k=k, spec=sample, source=source if source is not None else pool, n=n,
                             also_judged=checkpointed, retry_keys=retry_keys, on_case=on_case)

    if sample.n is not None:
        pairs, skipped, design = draw(sample.n)
        f = fields(jobs_of(pairs))
        return LabelPlan(cases=len(golden.cases), skipped={**skipped, **skipped_same}, sample=design,
                         applied=tuple(applied), **f)
    # --budget: as many pairs as the estimate affords (the same estimate the confirmation shows)
    population, _skipped, design0 = draw(10**9)
    f = fields(jobs_of(population))
    if f["pending"] and f["estimate"].usd is None:
        raise ConfigError(f"--budget: no price for model {model!r} (provider {provider}): a budget cannot be "
                          "turned into a number of pairs", hint="pass --price IN,OUT, or --sample N instead")
    per_pair = (f["estimate"].usd / len(f["pending"])) if f["pending"] else 0.0
    done = design0.already + f["already_done"]
    n = design0.pairs if per_pair <= 0 else min(design0.pool_pairs, done + int(sample.budget / per_pair))
    while True:
        pairs, skipped, design = draw(n)
        f = fields(jobs_of(pairs))
        if not f["pending"] or f["estimate"].usd <= sample.budget:
            return LabelPlan(cases=len(golden.cases), skipped={**skipped, **skipped_same}, sample=design,
                             applied=tuple(applied), **f)
        if n <= done:
            raise ConfigError(f"--budget: ${sample.budget:.2f} does not cover the smallest sample here "
                              f"({len(f['pending'])} requests, about ${f['estimate'].usd:.2f})",
                              hint="raise --budget, or use --sample-unit pair (pairs instead of whole cases)")
        n = max(done, n - max(1, int((f["estimate"].usd - sample.budget) / per_pair)))


def run_labelling(plan: LabelPlan, client: Any, *, concurrency: int = 4, max_tokens: int = 256,
                  on_progress: Callable[[dict], None] | None = None, poll_interval: float = 30.0,
                  poll_timeout: float | None = None, price: llm.Price | None = None) -> LabelReport:
    """Run a plan: reconcile, resume open batches, then judge the pending pairs."""
    report = LabelReport(pairs=len(plan.jobs), skipped=dict(plan.skipped), already_done=plan.already_done)
    if plan.applied:  # earlier verdicts on the same text: written first, never sent
        appender = GoldenAppender(GoldenFile(plan.golden_path))
        report.judgements_applied = appender.add(list(plan.applied))[0]
        appender.flush()

    def counted(appended: int, _present: int) -> None:
        report.judgements_appended += appended

    task = Task("labelling", SYSTEM_PROMPT, PROMPT_VERSION, interpret_verdict(plan.model, plan.provider))
    report.judgements_reconciled = run_jobs(task, plan, client, report, counted=counted, max_tokens=max_tokens,
                                            concurrency=concurrency, on_progress=on_progress,
                                            poll_interval=poll_interval, poll_timeout=poll_timeout, price=price)
    return report
