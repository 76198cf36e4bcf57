"""Label retrieved passages with an LLM judge (pooling), resumably.

For each case, the top-k hits of a retriever are judged (YES / PART / NO) unless:

* evaluation would already count the hit relevant (:func:`covers`, which is
  :func:`rag_experiments.evaluation.relevance.matches`: same document, and the overlap is at least
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
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .. import llm
from ..evaluation.relevance import matches
from ..limits import query_problem
from .llm_jobs import (Checkpoint, Job, JobPlan, JobReport, Task, check_batch_provider, checkpoint_path, plan_fields,
                       read_state, run_jobs)
from .records import VERDICTS, new_id
from .resolve import load_golden

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


def build_prompt(query: str, passage: str) -> str:
    return f"Question: {query}\n\nPassage:\n<passage>\n{passage}\n</passage>\n\nAnswer with the JSON object only."


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
                     pool: dict | None = None, provider: str = llm.DEFAULT_PROVIDER) -> dict:
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
    return rec


def interpret_verdict(model: str, provider: str = llm.DEFAULT_PROVIDER) -> Callable[[dict, str], dict]:
    def interpret(payload: dict, text: str) -> dict:
        verdict, reason, problem = parse_verdict(text)
        if problem:
            return {"records": [], "problems": {problem: 1}, "unusable": True}
        rec = judgement_record(payload["case_id"], payload["hit"], verdict, reason, model, payload.get("pool"),
                               provider)
        return {"records": [rec], "problems": {f"verdict_{verdict}": 1}, "unusable": False}
    return interpret


# -- plan + run ---------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class LabelPlan(JobPlan):
    cases: int  # one job per (case, hit span) pair to judge
    skipped: dict[str, int]  # covers_evidence, already_judged, duplicate_in_run, hit_text_mismatch, ...


@dataclass(kw_only=True)
class LabelReport(JobReport):
    pairs: int
    skipped: dict[str, int]
    judgements_appended: int = 0
    judgements_reconciled: int = 0


_HIT_KEYS = ("doc_id", "source_uri", "start", "end", "text", "doc_hash")


@dataclass(frozen=True)
class Pair:
    """A (case, retrieved span) pair to judge: ``hit`` holds :data:`_HIT_KEYS` (start/end as ints)."""

    key: str  # pair_key(case_id, doc_id, start, end)
    case_id: str
    query: str
    hit: dict


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
        relevant = case.relevant
        for hit in list(retrieve(case.query))[:k]:
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
                skipped["already_judged"] += 1
                continue
            judged.append(span)
            clean = {k2: hit[k2] for k2 in _HIT_KEYS}
            clean["start"], clean["end"] = start, end
            pairs.append(Pair(key, case.case_id, case.query, clean))
    return pairs, dict(skipped)


def plan_labelling(golden_path: str | Path, retrieve: Callable[[str], list[dict]], *, k: int = 20,
                   model: str = llm.DEFAULT_MODEL, batch: bool = False, retry_failed: bool = False,
                   price: llm.Price | None = None,
                   on_case: Callable[[int, int], None] | None = None, pool: dict | None = None,
                   provider: str = llm.DEFAULT_PROVIDER) -> LabelPlan:
    """Retrieve top-k for every (non-retired) case and decide which (case, span) pairs to judge.

    ``retrieve(query)`` returns hit dicts (chunk_id, doc_id, source_uri, start, end, text,
    doc_hash); only the first ``k`` are used. No API call is made here. ``pool``: the definition
    of a pool the hits come from (runs, k), recorded in each judgement's provenance.
    """
    check_batch_provider(batch, provider)  # before retrieving every case's hits
    golden = load_golden(golden_path)
    cp_path = checkpoint_path(golden_path, "label")
    state = read_state(Checkpoint(cp_path))
    checkpointed: dict[str, list[tuple[str, int, int]]] = {}
    keys = [e["key"] for e in state.entries if e.get("event") == "item" and e.get("status") == "done"]
    keys += [item["key"] for b in state.open_batches for item in b["items"].values()]
    for key in keys:
        case_id, span = parse_pair_key(key)
        checkpointed.setdefault(case_id, []).append(span)
    retry_keys = state.failed if retry_failed else frozenset()
    pairs, skipped = candidate_pairs(golden, retrieve, k=k, also_judged=checkpointed, retry_keys=retry_keys,
                                     on_case=on_case)
    jobs: list[Job] = []
    for pair in pairs:
        payload = {"case_id": pair.case_id, "hit": dict(pair.hit)}
        if pool:
            payload["pool"] = pool
        jobs.append(Job(pair.key, build_prompt(pair.query, pair.hit["text"]), payload))
    return LabelPlan(cases=len(golden.cases), skipped=skipped, **plan_fields(
        jobs, state, golden_path=golden_path, checkpoint_path=cp_path, system=SYSTEM_PROMPT, model=model,
        batch=batch, retry_failed=retry_failed, output_tokens_per_request=EXPECTED_OUTPUT_TOKENS, price=price,
        provider=provider))


def run_labelling(plan: LabelPlan, client: Any, *, concurrency: int = 4, max_tokens: int = 256,
                  on_progress: Callable[[dict], None] | None = None, poll_interval: float = 30.0,
                  poll_timeout: float | None = None, price: llm.Price | None = None) -> LabelReport:
    """Run a plan: reconcile, resume open batches, then judge the pending pairs."""
    report = LabelReport(pairs=len(plan.jobs), skipped=dict(plan.skipped), already_done=plan.already_done)

    def counted(appended: int, _present: int) -> None:
        report.judgements_appended += appended

    task = Task("labelling", SYSTEM_PROMPT, PROMPT_VERSION, interpret_verdict(plan.model, plan.provider))
    report.judgements_reconciled = run_jobs(task, plan, client, report, counted=counted, max_tokens=max_tokens,
                                            concurrency=concurrency, on_progress=on_progress,
                                            poll_interval=poll_interval, poll_timeout=poll_timeout, price=price)
    return report
