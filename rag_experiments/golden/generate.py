"""Generate golden cases from corpus chunks with an LLM, resumably.

Pipeline: :func:`stratified_sample` picks chunks -> one prompt per chunk (:data:`SYSTEM_PROMPT`,
:func:`build_prompt`) -> the model answers a JSON list of questions -> :func:`parse_generation`
validates it strictly -> :func:`build_cases` turns valid items into ``case`` records whose evidence
is the located quote -> :class:`~.store.GoldenFile` appends them.

Resumability is :mod:`.llm_jobs`'s: each chunk's outcome is checkpointed in
``<golden stem>.generate.log.jsonl`` before its cases reach the golden set, so a rerun never
asks about a chunk twice, and a Message Batch (``--batch``) is resumed, never resubmitted.

**Leakage bar** (:data:`LEAKAGE_BARS`, ``--leakage-bar KIND=VALUE``): each generated question's
content-word overlap with its evidence quote is measured as the quality report measures it
(:func:`rag_experiments.golden.quality.overlap`; an ``exact`` question without its identifier's own
words, which it shares by design: :func:`leakage`). A question over its kind's bar is not appended:
it is held in the checkpoint and the model is asked once, with a second prompt
(:data:`REWRITE_SYSTEM_PROMPT`), to rewrite it in a user's words; the rewrite is appended if it is
at or under the bar (its provenance keeps the original question and both overlaps), else the
question is dropped. Rewrites are jobs of their own, checkpointed in
``<golden stem>.rewrite.log.jsonl`` (keyed by the held case's id): a killed run pays for nothing
twice. Counts kept / rewritten / dropped per kind (:func:`leakage_counts`) are read from the two
checkpoints, printed, and appended to the rewrite log as a ``leakage_summary`` event after each run.

The bars' measure, defaults (and why) and counts: :mod:`.leakage`; which chunks are sampled and the
skip rule: :mod:`.chunk_sample`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from .. import llm
from ..limits import query_problem
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
from .chunk_sample import (  # noqa: F401 - re-exported: generate's callers import them from here
    MIN_TOKENS,
    NAV_SHARE,
    TOKEN_BUCKETS,
    SampleResult,
    allocate,
    boilerplate_reason,
    sample_chunks,
    stratified_sample,
    token_bucket,
)
from .leakage import (  # noqa: F401 - re-exported: generate's callers import them from here
    LEAKAGE_BARS,
    leak_words,
    leakage,
    leakage_counts,
    leakage_lines,
    parse_bars,
)
from .quality import content_words
from .records import new_id

PROMPT_VERSION = "gen-v1"
REWRITE_PROMPT_VERSION = "rewrite-v1"
EXPECTED_REWRITE_TOKENS = 60  # per rewrite answer, for the cost estimate
EXPECTED_OUTPUT_TOKENS = 300  # per generation answer, for the cost estimate
COPY_RUN_WORDS = 8  # a paraphrase sharing this many consecutive words with the passage copies it

SYSTEM_PROMPT = """\
You help build a test set for a search engine over technical documentation. You are shown one \
passage of the documentation. Write the questions a real user of the software would type into \
the search box, and that this passage alone answers.

Rubric:
1. "paraphrase": one question in the user's own words. A user has not read the passage and does \
not know its wording: do not copy its phrases (no more than two or three consecutive words), use \
everyday vocabulary, describe the goal or the problem rather than naming the section.
2. "exact": if the passage contains an exact identifier, one question that uses that identifier \
verbatim, as a user who already knows the name would search for it: a configuration parameter \
(work_mem), an error or SQLSTATE code (40P01), a function or operator name (jsonb_path_query), a \
command or one of its options (pg_dump --jobs), a file name (pg_hba.conf), a system view or \
column. Copy the identifier exactly as it appears in the passage (case, underscores, \
punctuation) into the question and into "identifier". If the passage has no such identifier, \
leave the exact question out.
3. Each question must be answerable from this passage alone, without other pages. Do not ask \
about things the passage only mentions in passing.
4. "evidence_quote": a verbatim substring of the passage that answers the question: copy it \
character for character (one sentence or a few, no ellipsis, no reformatting).
5. If the passage answers no question a real user would ask (a table of contents, a list of \
links, a license notice, a fragment), answer [].

Answer with a JSON list and nothing else:
[{"kind": "paraphrase", "question": "...", "identifier": null, "evidence_quote": "..."},
 {"kind": "exact", "question": "...", "identifier": "...", "evidence_quote": "..."}]"""


REWRITE_SYSTEM_PROMPT = """\
You help build a test set for a search engine over technical documentation. A question written \
for it copies the wording of the passage that answers it, so it tests word matching, not search. \
Rewrite it as a real user would type it: someone who has not read the passage and does not know \
its wording.

Rules:
1. Keep the meaning: the passage must still answer the rewritten question.
2. Do not reuse the copied words listed (at most one of them) and no more than two consecutive \
words of the passage; use everyday words, describe the goal or the problem.
3. If an identifier is given, keep it verbatim (case, underscores, punctuation) and rewrite the \
rest of the question around it.

Answer with one JSON object and nothing else:
{"question": "..."}"""


def language_sentence(language: str = "english") -> str:
    """``Write the questions in German.`` for a corpus whose corpus.language is not english (nor
    ``simple``, which names no language); empty for english, so English prompts (and the requests
    their checkpoints and caches are keyed by) stay as they were."""
    name = language.rsplit(".", 1)[-1]
    return "" if name in ("english", "simple") else f"Write the questions in {name.capitalize()}. "


def build_prompt(chunk: dict, language: str = "english") -> str:
    """The user message for one chunk (the rubric is the system prompt); ``language``: corpus.language."""
    return (f"Passage (from {chunk['source_uri']}, document type {chunk['doc_type']}):\n"
            f"<passage>\n{chunk['text']}\n</passage>\n\n"
            f"{language_sentence(language)}Write the questions following the rubric. Answer with the JSON list only.")


def build_rewrite_prompt(question: str, evidence: str, identifier: str | None, language: str = "english") -> str:
    """The user message asking to rewrite one question (the rules are :data:`REWRITE_SYSTEM_PROMPT`)."""
    copied = sorted(leak_words(question, identifier) & content_words(evidence))
    keep = f"Identifier to keep verbatim: {identifier}\n" if identifier else ""
    return (f"Passage:\n<passage>\n{evidence}\n</passage>\n\nQuestion: {question}\n"
            f"Copied words: {', '.join(copied)}\n{keep}\n{language_sentence(language)}Answer with the JSON object only.")


# == locating quotes ===========================================================================
def find_all(text: str, needle: str) -> list[int]:
    """Every start offset of ``needle`` in ``text`` (overlapping occurrences included)."""
    out, i = [], text.find(needle)
    while needle and i >= 0:
        out.append(i)
        i = text.find(needle, i + 1)
    return out


def quote_matches(text: str, quote: str) -> tuple[str, list[tuple[int, int]]]:
    """Where ``quote`` occurs in ``text``: ``("exact", spans)`` when it occurs verbatim, else
    ``("whitespace", spans)`` matching with any run of whitespace equal to any other, else
    ``("none", [])``."""
    if not quote.strip():
        return "none", []
    exact = [(i, i + len(quote)) for i in find_all(text, quote)]
    if exact:
        return "exact", exact
    pattern = r"\s+".join(re.escape(tok) for tok in quote.split())
    loose = [(m.start(), m.end()) for m in re.finditer(pattern, text)]
    return ("whitespace", loose) if loose else ("none", [])


# == validating answers ========================================================================
KINDS = ("paraphrase", "exact")
_WORD = re.compile(r"\w+")


def _copies(question: str, passage: str, run: int = COPY_RUN_WORDS) -> bool:
    q = [w.lower() for w in _WORD.findall(question)]
    if len(q) < run:
        return False
    p = " " + " ".join(w.lower() for w in _WORD.findall(passage)) + " "
    return any(" " + " ".join(q[i:i + run]) + " " in p for i in range(len(q) - run + 1))


def copies_passage(question: str, passage: str, run: int = COPY_RUN_WORDS) -> bool:
    """Whether ``question`` shares ``run`` (8) consecutive words with ``passage`` (it copies it)."""
    return _copies(question, passage, run)


def parse_generation(text: str, passage: str) -> tuple[list[dict], Counter]:
    """Validate one answer strictly. Returns the accepted items and a Counter of problems.

    A malformed answer (``malformed_json``, ``not_a_list``) yields nothing; otherwise each item
    is judged on its own: ``bad_item`` (not an object, missing/wrong-typed field, unknown kind,
    empty question), ``exact_without_identifier``, ``identifier_not_verbatim`` (the identifier is
    not a verbatim substring of the passage), ``identifier_not_in_question``,
    ``paraphrase_copies_passage`` (shares >= 8 consecutive words with the passage),
    ``duplicate_kind``, ``duplicate_question``, ``question_too_large`` (see :mod:`rag_experiments.limits`). ``empty_answer`` counts a deliberate ``[]``.
    Quotes are checked later (:func:`build_cases`): a missing quote is not a rejection.
    """
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
    accepted: list[dict] = []
    kinds: set[str] = set()
    questions: set[str] = set()
    for item in data:
        if not isinstance(item, dict):
            problems["bad_item"] += 1
            continue
        kind, question = item.get("kind"), item.get("question")
        identifier, quote = item.get("identifier"), item.get("evidence_quote")
        if (kind not in KINDS or not isinstance(question, str) or not question.strip()
                or not isinstance(quote, str) or not (identifier is None or isinstance(identifier, str))):
            problems["bad_item"] += 1
            continue
        question = " ".join(question.split())
        if query_problem(question):  # a NUL or an essay would make every later run fail on it
            problems["question_too_large"] += 1
            continue
        identifier = identifier if identifier and identifier.strip() else None
        if kind == "exact" and identifier is None:
            problems["exact_without_identifier"] += 1
            continue
        if identifier is not None and identifier not in passage:
            problems["identifier_not_verbatim"] += 1
            continue
        if kind == "exact" and identifier not in question:
            problems["identifier_not_in_question"] += 1
            continue
        if kind == "paraphrase" and _copies(question, passage):
            problems["paraphrase_copies_passage"] += 1
            continue
        if kind in kinds:
            problems["duplicate_kind"] += 1
            continue
        if question in questions:
            problems["duplicate_question"] += 1
            continue
        kinds.add(kind)
        questions.add(question)
        accepted.append({"kind": kind, "question": question, "identifier": identifier, "evidence_quote": quote})
    return accepted, problems


CHUNK_KEYS = ("chunk_id", "doc_id", "source_uri", "doc_type", "start", "end", "text", "n_tokens", "doc_hash")


def check_chunk(chunk: dict) -> None:
    """A chunk's ``text`` must be the document span ``[start, end)`` (not its indexed text)."""
    missing = set(CHUNK_KEYS) - set(chunk)
    if missing:
        raise ValueError(f"chunk {chunk.get('chunk_id')!r} lacks {', '.join(sorted(missing))}")
    if len(chunk["text"]) != int(chunk["end"]) - int(chunk["start"]):
        raise ValueError(f"chunk {chunk['chunk_id']}: text has {len(chunk['text'])} chars but the span "
                         f"{chunk['start']}..{chunk['end']} has {int(chunk['end']) - int(chunk['start'])}; "
                         "pass the span text (document[start:end]), not the indexed text")


def build_cases(chunk: dict, items: list[dict], model: str,
                provider: str = llm.DEFAULT_PROVIDER) -> tuple[list[dict], Counter]:
    """``case`` records for the accepted items of one chunk; ``provenance`` names who wrote the
    question (``method: llm``, ``provider``, ``model``, ``prompt_version``).

    The evidence span is the quote located in the chunk (exactly, else whitespace-insensitively:
    ``quote_whitespace_located``), as char offsets into the *document* (chunk start + offset);
    a quote not found falls back to the whole chunk span (``quote_not_found``).
    """
    notes: Counter = Counter()
    cases = []
    text, base = chunk["text"], int(chunk["start"])
    for item in items:
        mode, spans = quote_matches(text, item["evidence_quote"])
        if mode == "none":
            notes["quote_not_found"] += 1
            s, e, located = 0, len(text), "chunk_fallback"
        else:
            if mode == "whitespace":
                notes["quote_whitespace_located"] += 1
            (s, e), located = spans[0], mode
        rec: dict[str, Any] = {
            "type": "case",
            "id": new_id("c", item["question"], chunk["chunk_id"]),
            "query": item["question"],
            "kind": item["kind"],
            "doc_type": chunk["doc_type"],
            "evidence": [{"doc_id": chunk["doc_id"], "source_uri": chunk["source_uri"], "start": base + s,
                          "end": base + e, "quote": text[s:e], "doc_hash": chunk["doc_hash"], "grade": 2}],
            "provenance": {"method": "llm", "provider": provider, "model": model, "prompt_version": PROMPT_VERSION,
                           "source_chunk": chunk["chunk_id"], "evidence_located": located},
        }
        if item["identifier"] is not None:
            rec["identifier"] = item["identifier"]
        cases.append(rec)
    return cases, notes


# == generation ================================================================================
@dataclass(frozen=True, kw_only=True)
class GenerationPlan(JobPlan):
    sample: SampleResult  # one job per sampled chunk
    bars: dict[str, float] = field(default_factory=lambda: dict(LEAKAGE_BARS))
    rewrites_pending: int = 0  # questions held over the bar in earlier runs, not yet rewritten
    rewrite_estimate: llm.CostEstimate | None = None  # the worst case: every question over its bar
    language: str = "english"  # corpus.language: the language the prompts ask the questions in


@dataclass(kw_only=True)
class GenerationReport(JobReport):
    sampled: int
    skipped: dict[str, int]
    cases_appended: int = 0
    cases_reconciled: int = 0
    cases_already_present: int = 0
    rewrites_processed: int = 0
    leakage: dict[str, dict] = field(default_factory=dict)  # kind -> leakage_counts() row

    def leakage_lines(self) -> list[str]:
        """One line per kind: kept / rewritten / dropped and the mean overlap before and after."""
        return leakage_lines(self.leakage)


def plan_generation(chunks: Iterable[dict], golden_path: str | Path, *, n: int = 150, seed: int = 13,
                    model: str = llm.DEFAULT_MODEL, batch: bool = False, retry_failed: bool = False,
                    price: llm.Price | None = None, provider: str = llm.DEFAULT_PROVIDER,
                    bars: dict[str, float] | None = None, language: str = "english") -> GenerationPlan:
    """Sample, read the checkpoints, and estimate the cost of what is left. No API call.

    ``bars``: the leakage bar per kind (default :data:`LEAKAGE_BARS`; ``{}``: no bar). ``language``:
    the corpus's corpus.language; other than english, the prompts ask for questions in it."""
    bars = dict(LEAKAGE_BARS if bars is None else bars)
    sample = stratified_sample(chunks, n, seed)
    for c in sample.chunks:
        check_chunk(c)
    cp_path = checkpoint_path(golden_path, "generate")
    state = read_state(Checkpoint(cp_path))
    jobs = [Job(str(c["chunk_id"]), build_prompt(c, language), {k: c[k] for k in CHUNK_KEYS}) for c in sample.chunks]
    fields = plan_fields(jobs, state, golden_path=golden_path, checkpoint_path=cp_path, system=SYSTEM_PROMPT,
                         model=model, batch=batch, retry_failed=retry_failed,
                         output_tokens_per_request=EXPECTED_OUTPUT_TOKENS, price=price, provider=provider)
    rewrites = _rewrite_fields(state, golden_path, model=model, batch=batch, retry_failed=retry_failed, price=price,
                               provider=provider, language=language)
    # the worst case of the second prompt: every question of every pending chunk over its bar
    worst = llm.estimate_cost(model, [REWRITE_SYSTEM_PROMPT + "\n" + build_rewrite_prompt("?" * 80, j.payload["text"], None,
                                                                                         language)
                                      for j in fields["pending"] for _kind in bars],
                              output_tokens_per_request=EXPECTED_REWRITE_TOKENS, batch=batch, price=price,
                              provider=provider) if bars else None
    return GenerationPlan(sample=sample, bars=bars, language=language, rewrites_pending=len(rewrites["pending"]) + rewrites["in_open_batches"],
                          rewrite_estimate=worst, **fields)


def interpret_generation(model: str, provider: str = llm.DEFAULT_PROVIDER,
                         bars: dict[str, float] | None = None) -> Interpret:
    """Read one answer: cases at or under their kind's bar are the entry's ``records`` (appended);
    the others are ``held`` (rewritten by the second prompt). ``bars`` None: no bar (as before)."""
    def interpret(chunk: dict, text: str) -> dict:
        items, problems = parse_generation(text, chunk["text"])
        cases, notes = build_cases(chunk, items, model, provider)
        problems.update(notes)
        unusable = bool(problems.get("malformed_json") or problems.get("not_a_list"))
        if bars is None:
            return {"records": cases, "problems": dict(problems), "unusable": unusable}
        kept, held = [], []
        for case in cases:
            value = leakage(case["query"], case["evidence"][0]["quote"], case.get("identifier"))
            bar = bars.get(case["kind"])
            if bar is not None and value is not None and value > bar:
                held.append({"case": case, "overlap": round(value, 4), "bar": bar})
                continue
            case["provenance"]["leakage"] = {"overlap": None if value is None else round(value, 4), "bar": bar}
            kept.append(case)
        if held:
            problems["over_leakage_bar"] += len(held)
        return {"records": kept, "problems": dict(problems), "unusable": unusable,
                "leakage": {"bars": dict(bars), "held": held}}
    return interpret


# -- rewriting questions over the bar ------------------------------------------------------------
def _held(state) -> list[dict]:
    """Every question held over its bar in the generation log (the latest answer per chunk)."""
    latest: dict[str, dict] = {}
    for e in state.entries:
        if e.get("event") == "item" and e.get("status") == "done":
            latest[e["key"]] = e
    return [h for e in latest.values() for h in ((e.get("leakage") or {}).get("held") or ())]


def rewrite_job(held: dict, language: str = "english") -> Job:
    case = held["case"]
    prompt = build_rewrite_prompt(case["query"], case["evidence"][0]["quote"], case.get("identifier"), language)
    return Job(case["id"], prompt, held)


def _rewrite_fields(state, golden_path: str | Path, *, model: str, batch: bool, retry_failed: bool,
                    price: llm.Price | None, provider: str, language: str = "english") -> dict[str, Any]:
    cp_path = checkpoint_path(golden_path, "rewrite")
    rstate = read_state(Checkpoint(cp_path))
    jobs = [rewrite_job(h, language) for h in _held(state)]
    return plan_fields(jobs, rstate, golden_path=golden_path, checkpoint_path=cp_path, system=REWRITE_SYSTEM_PROMPT,
                       model=model, batch=batch, retry_failed=retry_failed,
                       output_tokens_per_request=EXPECTED_REWRITE_TOKENS, price=price, provider=provider)


@dataclass(frozen=True, kw_only=True)
class RewritePlan(JobPlan):
    pass


def interpret_rewrite(model: str, provider: str = llm.DEFAULT_PROVIDER) -> Interpret:
    """Read a rewrite: the rewritten case when it is valid and at or under the bar (``outcome``
    rewritten), else nothing (``outcome`` dropped, the reason in ``problems``)."""
    def interpret(held: dict, text: str) -> dict:
        case, bar = held["case"], held["bar"]
        identifier, evidence = case.get("identifier"), case["evidence"][0]["quote"]

        def dropped(problem: str, unusable: bool = False, after: float | None = None) -> dict:
            return {"records": [], "problems": {f"rewrite_{problem}": 1}, "unusable": unusable,
                    "outcome": "dropped", "kind": case["kind"], "overlap_before": held["overlap"],
                    "overlap_after": after}

        try:
            data = llm.extract_json(text)
        except llm.JSONExtractionError:
            return dropped("malformed_json", True)
        question = data.get("question") if isinstance(data, dict) else None
        if not isinstance(question, str) or not question.strip():
            return dropped("bad_answer", True)
        question = " ".join(question.split())
        if query_problem(question):
            return dropped("question_too_large")
        if identifier and identifier not in question:
            return dropped("lost_identifier")
        if question == case["query"]:
            return dropped("unchanged", after=held["overlap"])
        value = leakage(question, evidence, identifier)
        if case["kind"] == "paraphrase" and _copies(question, evidence):
            return dropped("copies_passage", after=value)
        if value is not None and value > bar:
            return dropped("still_over_bar", after=round(value, 4))
        source_chunk = case["provenance"].get("source_chunk", "")
        rec = {**case, "id": new_id("c", question, source_chunk), "query": question,
               "provenance": {**case["provenance"], "rewritten_from": case["query"],
                              "rewrite_prompt_version": REWRITE_PROMPT_VERSION,
                              "leakage": {"overlap": None if value is None else round(value, 4), "bar": bar,
                                          "before": held["overlap"]}}}
        return {"records": [rec], "problems": {"rewritten": 1}, "unusable": False, "outcome": "rewritten",
                "kind": case["kind"], "overlap_before": held["overlap"],
                "overlap_after": None if value is None else round(value, 4)}
    return interpret


def run_generation(plan: GenerationPlan, client: Any, *, concurrency: int = 4, max_tokens: int = 1024,
                   on_progress: Callable[[dict], None] | None = None, poll_interval: float = 30.0,
                   poll_timeout: float | None = None, price: llm.Price | None = None) -> GenerationReport:
    """Run a plan: reconcile, resume open batches, then generate for the pending chunks; then
    rewrite the questions held over the leakage bar (this run's and any earlier run's left).

    ``client`` may be None when nothing is pending and no batch is open.
    """
    report = GenerationReport(sampled=len(plan.sample.chunks), skipped=dict(plan.sample.skipped),
                              already_done=plan.already_done)

    def counted(appended: int, present: int) -> None:
        report.cases_appended += appended
        report.cases_already_present += present

    task = Task("generation", SYSTEM_PROMPT, PROMPT_VERSION, interpret_generation(plan.model, plan.provider, plan.bars))
    report.cases_reconciled = run_jobs(task, plan, client, report, counted=counted, max_tokens=max_tokens,
                                       concurrency=concurrency, on_progress=on_progress,
                                       poll_interval=poll_interval, poll_timeout=poll_timeout, price=price)
    # the second prompt: every held question without a rewrite outcome (killed runs included)
    state = read_state(Checkpoint(plan.checkpoint_path))
    rplan = RewritePlan(**_rewrite_fields(state, plan.golden_path, model=plan.model, batch=plan.batch,
                                          retry_failed=False, price=price, provider=plan.provider,
                                          language=plan.language))
    rreport = JobReport(already_done=rplan.already_done)
    rtask = Task("rewriting", REWRITE_SYSTEM_PROMPT, REWRITE_PROMPT_VERSION, interpret_rewrite(plan.model, plan.provider))
    try:
        report.cases_reconciled += run_jobs(rtask, rplan, client, rreport, counted=counted, max_tokens=256,
                                            concurrency=concurrency, on_progress=None,  # the bar counts chunks
                                            poll_interval=poll_interval, poll_timeout=poll_timeout, price=price)
    finally:
        _merge(report, rreport, plan.model, plan.provider, price)
    report.leakage = leakage_counts(plan.golden_path)
    if rplan.pending or report.processed:  # the counts of this run, beside the rewrites' outcomes
        Checkpoint(rplan.checkpoint_path).append({"event": "leakage_summary", "bars": dict(plan.bars),
                                                 "counts": report.leakage})
    return report


def _merge(report: GenerationReport, other: JobReport, model: str, provider: str, price: llm.Price | None) -> None:
    """Add the rewrites' calls, usage and problems to the generation's report (cost from the sum)."""
    report.rewrites_processed = other.processed
    report.api_errors += other.api_errors
    report.problems.update(other.problems)
    report.usage += other.usage
    report.batch_usage += other.batch_usage
    direct = llm.cost_usd(model, report.usage.input_tokens, report.usage.output_tokens, price=price, provider=provider)
    batched = llm.cost_usd(model, report.batch_usage.input_tokens, report.batch_usage.output_tokens, batch=True,
                           price=price, provider=provider)
    report.cost_usd = None if direct is None or batched is None else direct + batched
    report.batches = [*report.batches, *other.batches]
    report.errors = [*report.errors, *other.errors]
    report.torn_checkpoint_lines += other.torn_checkpoint_lines
