"""Generate questions that need two passages (kind ``multi``) from pairs of chunks, resumably.

``rag-exp golden generate --multi N``. Pipeline: :func:`pair_chunks` picks N pairs of chunks that
belong together -> one prompt per pair (:data:`MULTI_SYSTEM_PROMPT`, :func:`build_multi_prompt`)
-> the model answers a JSON list of at most one question that needs *both* passages, with a quote
from each -> :func:`parse_multi` validates it -> :func:`build_multi_case` writes a ``case`` of kind
``multi`` whose evidence is the two located quotes, group 0 and group 1 (all-of: :mod:`.records`).

Pairs (no API call; deterministic for a seed, the chunks' order does not matter):

* ``same_document``: two chunks of one document that do not overlap and are not neighbours (at
  least one chunk of the document between them): different sections of one page;
* ``shared_identifier``: two chunks of different documents that both hold an identifier
  (:func:`rag_experiments.identifiers.extract_identifiers`: a parameter, function, file, error
  code...) that at most :data:`MAX_IDENTIFIER_DOCS` documents hold (a rare name ties them; ``the``
  or a name on every page does not).

Boilerplate chunks are skipped (:func:`.chunk_sample.boilerplate_reason`). N is split evenly between the
two kinds of pair (the rest to the other kind when one has too few).

Resumability is :mod:`.llm_jobs`'s, with its own checkpoint ``<golden stem>.generate-multi.log.jsonl``
keyed by the pair: a rerun never asks about a pair twice; a Message Batch is resumed, never resubmitted.

Leakage: each question's content-word overlap with its two quotes together is measured as for the
other kinds (:func:`.leakage.leakage`) and kept in the provenance; ``multi`` has no bar by default
(the bars of :data:`.leakage.LEAKAGE_BARS` are unchanged). With ``--leakage-bar multi=VALUE`` a
question over it is dropped (``over_leakage_bar``; no rewrite prompt for ``multi``).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .. import llm
from ..identifiers import extract_identifiers
from ..limits import query_problem
from .chunk_sample import boilerplate_reason
from .generate import CHUNK_KEYS, check_chunk, copies_passage, language_sentence, quote_matches
from .leakage import leakage
from .llm_jobs import (
    Checkpoint,
    Interpret,
    Job,
    JobPlan,
    JobReport,
    Task,
    checkpoint_path,
    plan_fields,
    read_state,
    run_jobs,
)
from .records import new_id

KIND = "multi"
PROMPT_VERSION = "gen-multi-v1"
TASK = "generate-multi"  # the checkpoint: <golden stem>.generate-multi.log.jsonl
MAX_IDENTIFIER_DOCS = 3
EXPECTED_OUTPUT_TOKENS = 250
PAIR_KINDS = ("same_document", "shared_identifier")

MULTI_SYSTEM_PROMPT = """\
You help build a test set for a search engine over technical documentation. You are shown two \
passages, A and B, of the documentation. Write the one question a real user of the software would \
type into the search box that needs BOTH passages: A answers one part of it and B another, and \
neither passage alone answers all of it.

Rubric:
1. Ask in the user's own words. A user has not read the passages: do not copy their phrases (no \
more than two or three consecutive words); describe the goal or the problem.
2. The question must need both passages. If the two passages do not belong together in one \
question a real user would ask, answer [].
3. "quote_a": a verbatim substring of passage A that answers its part; "quote_b" the same for \
passage B. Copy each character for character (one sentence or a few, no ellipsis, no reformatting).

Answer with a JSON list and nothing else:
[{"question": "...", "quote_a": "...", "quote_b": "..."}]"""


def build_multi_prompt(a: dict, b: dict, tie: str, language_sentence: str = "") -> str:
    """The user message for one pair (the rubric is the system prompt). ``tie``: why they belong together."""
    return (f"Passage A (from {a['source_uri']}, document type {a['doc_type']}):\n<passage_a>\n{a['text']}\n"
            f"</passage_a>\n\nPassage B (from {b['source_uri']}, document type {b['doc_type']}):\n<passage_b>\n"
            f"{b['text']}\n</passage_b>\n\nThey belong together: {tie}.\n"
            f"{language_sentence}Write the question following the rubric. Answer with the JSON list only.")


# == pairs =======================================================================================
@dataclass(frozen=True)
class Pair:
    a: dict
    b: dict
    kind: str  # same_document | shared_identifier
    identifier: str | None = None

    @property
    def key(self) -> str:
        return f"pair:{self.a['chunk_id']}+{self.b['chunk_id']}"

    @property
    def tie(self) -> str:
        if self.kind == "same_document":
            return f"two sections of the same document, {self.a['source_uri']}"
        return f"both documents mention {self.identifier}"


def pair_chunks(chunks: Iterable[dict], n: int, seed: int = 13) -> list[Pair]:
    """``n`` pairs of chunks that belong together (see the module docstring), reproducibly."""
    usable = sorted((c for c in chunks if boilerplate_reason(c) is None), key=lambda c: str(c["chunk_id"]))
    by_doc: dict[str, list[dict]] = defaultdict(list)
    for c in usable:
        by_doc[str(c["doc_id"])].append(c)
    same: list[Pair] = []
    for doc in sorted(by_doc):
        parts = sorted(by_doc[doc], key=lambda c: (int(c["start"]), int(c["end"])))
        for i, a in enumerate(parts):
            for b in parts[i + 2:]:  # a neighbour is the same section continued
                if int(b["start"]) >= int(a["end"]):
                    same.append(Pair(a, b, "same_document"))
    docs_of: dict[str, set[str]] = defaultdict(set)
    holders: dict[str, list[dict]] = defaultdict(list)
    for c in usable:
        for ident in extract_identifiers(c["text"]):
            docs_of[ident].add(str(c["doc_id"]))
            holders[ident].append(c)
    shared: dict[tuple[str, str], Pair] = {}
    for ident in sorted(docs_of):
        if not 2 <= len(docs_of[ident]) <= MAX_IDENTIFIER_DOCS:
            continue
        cs = holders[ident]
        for i, a in enumerate(cs):
            for b in cs[i + 1:]:
                if a["doc_id"] != b["doc_id"]:
                    key = (str(a["chunk_id"]), str(b["chunk_id"]))
                    shared.setdefault(key, Pair(a, b, "shared_identifier", ident))
    pools = {"same_document": same, "shared_identifier": [shared[k] for k in sorted(shared)]}
    quota = {"same_document": n // 2, "shared_identifier": n - n // 2}
    for kind, other in (("same_document", "shared_identifier"), ("shared_identifier", "same_document")):
        short = quota[kind] - len(pools[kind])
        if short > 0:
            quota[kind] -= short
            quota[other] += short
    picked: list[Pair] = []
    for kind in PAIR_KINDS:
        rng = random.Random(f"{seed}|multi|{kind}")
        pool = pools[kind]
        picked += sorted(rng.sample(pool, min(quota[kind], len(pool))), key=lambda p: p.key)
    return picked


# == answers =====================================================================================
def parse_multi(text: str, a_text: str, b_text: str) -> tuple[list[dict], Counter]:
    """Validate one answer: at most one item ``{question, quote_a, quote_b}``. Problems:
    ``malformed_json``, ``not_a_list``, ``empty_answer`` (a deliberate ``[]``), ``bad_item``,
    ``question_too_large``, ``question_copies_passage`` (>= 8 consecutive words of either passage),
    ``extra_items`` (items after the first)."""
    problems: Counter = Counter()
    try:
        data = llm.extract_json(text)
    except llm.JSONExtractionError:
        problems["malformed_json"] += 1
        return [], problems
    if not isinstance(data, list):
        problems["not_a_list"] += 1
        return [], problems
    if not data:
        problems["empty_answer"] += 1
        return [], problems
    if len(data) > 1:
        problems["extra_items"] += len(data) - 1
    item = data[0]
    if not isinstance(item, dict) or not all(isinstance(item.get(f), str) and item[f].strip()
                                             for f in ("question", "quote_a", "quote_b")):
        problems["bad_item"] += 1
        return [], problems
    question = " ".join(item["question"].split())
    if query_problem(question):
        problems["question_too_large"] += 1
        return [], problems
    if copies_passage(question, a_text) or copies_passage(question, b_text):
        problems["question_copies_passage"] += 1
        return [], problems
    return [{"question": question, "quote_a": item["quote_a"], "quote_b": item["quote_b"]}], problems


def _locate(chunk: dict, quote: str, notes: Counter) -> dict:
    """The quote's span in document coordinates (the whole chunk when not found: ``quote_not_found``)."""
    text, base = chunk["text"], int(chunk["start"])
    mode, spans = quote_matches(text, quote)
    if mode == "none":
        notes["quote_not_found"] += 1
        s, e = 0, len(text)
    else:
        if mode == "whitespace":
            notes["quote_whitespace_located"] += 1
        s, e = spans[0]
    return {"doc_id": chunk["doc_id"], "source_uri": chunk["source_uri"], "start": base + s, "end": base + e,
            "quote": text[s:e], "doc_hash": chunk["doc_hash"], "grade": 2}


def build_multi_case(payload: dict, item: dict, model: str, provider: str = llm.DEFAULT_PROVIDER) -> tuple[dict, Counter]:
    """The ``case`` record of one accepted answer: kind ``multi``, evidence group 0 in chunk A, group 1 in B."""
    notes: Counter = Counter()
    a, b = payload["a"], payload["b"]
    ev_a, ev_b = _locate(a, item["quote_a"], notes), _locate(b, item["quote_b"], notes)
    if ev_a["doc_id"] == ev_b["doc_id"] and ev_a["start"] < ev_b["end"] and ev_b["start"] < ev_a["end"]:
        notes["quotes_overlap"] += 1
    rec = {"type": "case", "id": new_id("c", item["question"], a["chunk_id"], b["chunk_id"]), "query": item["question"],
           "kind": KIND, "doc_type": a["doc_type"], "evidence": [{**ev_a, "group": 0}, {**ev_b, "group": 1}],
           "provenance": {"method": "llm", "provider": provider, "model": model, "prompt_version": PROMPT_VERSION,
                          "source_chunks": [a["chunk_id"], b["chunk_id"]], "pairing": payload["pairing"]}}
    return rec, notes


def interpret_multi(model: str, provider: str = llm.DEFAULT_PROVIDER, bar: float | None = None) -> Interpret:
    def interpret(payload: dict, text: str) -> dict:
        items, problems = parse_multi(text, payload["a"]["text"], payload["b"]["text"])
        records = []
        for item in items:
            rec, notes = build_multi_case(payload, item, model, provider)
            problems.update(notes)
            if notes.get("quotes_overlap"):  # one passage, not two parts
                continue
            value = leakage(rec["query"], rec["evidence"][0]["quote"] + "\n" + rec["evidence"][1]["quote"])
            rec["provenance"]["leakage"] = {"overlap": None if value is None else round(value, 4), "bar": bar}
            if bar is not None and value is not None and value > bar:
                problems["over_leakage_bar"] += 1
                continue
            records.append(rec)
        unusable = bool(problems.get("malformed_json") or problems.get("not_a_list"))
        return {"records": records, "problems": dict(problems), "unusable": unusable}
    return interpret


# == plan and run ================================================================================
@dataclass(frozen=True, kw_only=True)
class MultiPlan(JobPlan):
    pairs: tuple[Pair, ...]
    bar: float | None = None
    language: str = "english"

    @property
    def by_kind(self) -> dict[str, int]:
        return dict(Counter(p.kind for p in self.pairs))


@dataclass(kw_only=True)
class MultiReport(JobReport):
    pairs: int
    cases_appended: int = 0
    cases_reconciled: int = 0
    cases_already_present: int = 0


def plan_multi(chunks: Iterable[dict], golden_path: str | Path, *, n: int = 20, seed: int = 13,
               model: str = llm.DEFAULT_MODEL, batch: bool = False, retry_failed: bool = False,
               price: llm.Price | None = None, provider: str = llm.DEFAULT_PROVIDER, bar: float | None = None,
               language: str = "english") -> MultiPlan:
    """Pair chunks, read the checkpoint, estimate the cost of what is left. No API call."""
    chunks = list(chunks)
    for c in chunks:
        check_chunk(c)
    pairs = pair_chunks(chunks, n, seed)
    cp_path = checkpoint_path(golden_path, TASK)
    state = read_state(Checkpoint(cp_path))
    jobs = [Job(p.key, build_multi_prompt(p.a, p.b, p.tie, language_sentence(language)),
                {"a": {k: p.a[k] for k in CHUNK_KEYS}, "b": {k: p.b[k] for k in CHUNK_KEYS},
                 "pairing": {"kind": p.kind, **({"identifier": p.identifier} if p.identifier else {})}})
            for p in pairs]
    fields = plan_fields(jobs, state, golden_path=golden_path, checkpoint_path=cp_path, system=MULTI_SYSTEM_PROMPT,
                         model=model, batch=batch, retry_failed=retry_failed,
                         output_tokens_per_request=EXPECTED_OUTPUT_TOKENS, price=price, provider=provider)
    return MultiPlan(pairs=tuple(pairs), bar=bar, language=language, **fields)


def run_multi(plan: MultiPlan, client: Any, *, concurrency: int = 4, max_tokens: int = 1024,
              on_progress: Callable[[dict], None] | None = None, poll_interval: float = 30.0,
              poll_timeout: float | None = None, price: llm.Price | None = None) -> MultiReport:
    """Run a plan: reconcile, resume open batches, then ask about the pending pairs."""
    report = MultiReport(pairs=len(plan.pairs), already_done=plan.already_done)

    def counted(appended: int, present: int) -> None:
        report.cases_appended += appended
        report.cases_already_present += present

    task = Task("multi-passage generation", MULTI_SYSTEM_PROMPT, PROMPT_VERSION,
                interpret_multi(plan.model, plan.provider, plan.bar))
    report.cases_reconciled = run_jobs(task, plan, client, report, counted=counted, max_tokens=max_tokens,
                                       concurrency=concurrency, on_progress=on_progress,
                                       poll_interval=poll_interval, poll_timeout=poll_timeout, price=price)
    return report
