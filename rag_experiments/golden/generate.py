"""Generate golden cases from corpus chunks with an LLM, resumably.

Pipeline: :func:`stratified_sample` picks chunks -> one prompt per chunk (:data:`SYSTEM_PROMPT`,
:func:`build_prompt`) -> the model answers a JSON list of questions -> :func:`parse_generation`
validates it strictly -> :func:`build_cases` turns valid items into ``case`` records whose evidence
is the located quote -> :class:`~.store.GoldenFile` appends them.

Resumability is :mod:`.llm_jobs`'s: each chunk's outcome is checkpointed in
``<golden stem>.generate.log.jsonl`` before its cases reach the golden set, so a rerun never
asks about a chunk twice, and a Message Batch (``--batch``) is resumed, never resubmitted.

Sampling skip rule (:func:`boilerplate_reason`, first match wins), documented because it shapes
the golden set:

* ``too_short``: fewer than :data:`MIN_TOKENS` (40) tokens: stubs, lone sentences, fragments.
* ``heading_only``: every non-blank line is a Markdown heading (ATX ``#`` or setext underline).
* ``table_punctuation``: letters and digits are under half of the non-space characters
  (table rules ``|---|---|``, ASCII art, separator rows).
* ``navigation``: at least 3 non-heading lines and >= 70% of them are navigation lines: a
  (bulleted) line that is only links (Markdown ``[x](y)`` or HTML ``<a>``) plus at most 3 other
  words, or only navigation words (prev, next, up, home, contents, index, top) and separators.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .. import llm
from ..limits import query_problem
from .llm_jobs import (Checkpoint, Interpret, Job, JobPlan, JobReport, Task, checkpoint_path, plan_fields,
                       read_state, run_jobs)
from .records import new_id

PROMPT_VERSION = "gen-v1"
MIN_TOKENS = 40
TOKEN_BUCKETS = (64, 128, 256)  # bucket edges: <64, 64-127, 128-255, 256+
NAV_SHARE = 0.7
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


def build_prompt(chunk: dict) -> str:
    """The user message for one chunk (the rubric is the system prompt)."""
    return (f"Passage (from {chunk['source_uri']}, document type {chunk['doc_type']}):\n"
            f"<passage>\n{chunk['text']}\n</passage>\n\n"
            "Write the questions following the rubric. Answer with the JSON list only.")


# == sampling ===================================================================================
_HEADING = re.compile(r"^#{1,6}(\s|$)")
_SETEXT = re.compile(r"^(=+|-+)$")
_BULLET = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
_MD_LINK = re.compile(r"!?\[[^\]]*\]\([^)]*\)")
_HTML_LINK = re.compile(r"<a\b[^>]*>.*?</a>", re.IGNORECASE)
_NAV_WORDS = re.compile(r"^(?:(?:prev(?:ious)?|next|up|home|top|contents|index|back)\b[\s|/·•:,>»«<-]*)+$",
                        re.IGNORECASE)
_WORD = re.compile(r"\w+")


def token_bucket(n_tokens: int) -> str:
    """``<64``, ``64-127``, ``128-255`` or ``256+``."""
    lo = 0
    for edge in TOKEN_BUCKETS:
        if n_tokens < edge:
            return f"<{edge}" if lo == 0 else f"{lo}-{edge - 1}"
        lo = edge
    return f"{lo}+"


def _is_nav_line(line: str) -> bool:
    body = _BULLET.sub("", line)
    if _NAV_WORDS.match(body):
        return True
    stripped, n_links = _MD_LINK.subn(" ", body)
    stripped, n_html = _HTML_LINK.subn(" ", stripped)
    return (n_links + n_html) > 0 and len(_WORD.findall(stripped)) <= 3


def boilerplate_reason(chunk: dict) -> str | None:
    """Why a chunk is not worth a question (see the module docstring), or None if it is."""
    if int(chunk["n_tokens"]) < MIN_TOKENS:
        return "too_short"
    text = chunk["text"]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    body = [ln for ln in lines if not _HEADING.match(ln) and not _SETEXT.match(ln)]
    if not body:
        return "heading_only"
    nonspace = [ch for ch in text if not ch.isspace()]
    if sum(ch.isalnum() for ch in nonspace) < 0.5 * len(nonspace):
        return "table_punctuation"
    if len(body) >= 3 and sum(_is_nav_line(ln) for ln in body) >= NAV_SHARE * len(body):
        return "navigation"
    return None


@dataclass(frozen=True)
class SampleResult:
    chunks: tuple[dict, ...]
    skipped: dict[str, int]  # boilerplate reason -> chunks skipped
    strata: dict[tuple[str, str], tuple[int, int]]  # (doc_type, bucket) -> (eligible, taken)


def allocate(sizes: dict[Any, int], n: int) -> dict[Any, int]:
    """Proportional allocation of ``n`` over strata by largest remainder, at least 1 per
    non-empty stratum, never more than a stratum holds. With more strata than ``n`` every
    stratum still gets one (the sample is then larger than ``n``)."""
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    exact = {k: n * s / total for k, s in sizes.items()}
    quota = {k: min(s, max(1, math.floor(exact[k]))) for k, s in sizes.items() if s > 0}
    keys = sorted(quota)
    while sum(quota.values()) < n:
        room = [k for k in keys if quota[k] < sizes[k]]
        best = max(room, key=lambda k: (exact[k] - quota[k], -keys.index(k)))
        quota[best] += 1
    while sum(quota.values()) > n:
        over = [k for k in keys if quota[k] > 1]
        if not over:
            break
        worst = min(over, key=lambda k: (exact[k] - quota[k], keys.index(k)))
        quota[worst] -= 1
    return quota


def stratified_sample(chunks: Iterable[dict], n: int = 150, seed: int = 13) -> SampleResult:
    """Stratified sample over doc_type x token bucket (see :func:`allocate`), boilerplate skipped.

    Reproducible: input order does not matter (chunks are sorted by id) and each stratum draws
    with its own generator seeded by ``(seed, doc_type, bucket)``, so adding a document type
    leaves the other strata's draws unchanged.
    """
    skipped: Counter = Counter()
    strata: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for chunk in sorted(chunks, key=lambda c: str(c["chunk_id"])):
        reason = boilerplate_reason(chunk)
        if reason:
            skipped[reason] += 1
            continue
        strata[(str(chunk["doc_type"]), token_bucket(int(chunk["n_tokens"])))].append(chunk)
    quotas = allocate({k: len(v) for k, v in strata.items()}, n)
    picked: list[dict] = []
    for key in sorted(strata):
        rng = random.Random(f"{seed}|{key[0]}|{key[1]}")
        picked.extend(sorted(rng.sample(strata[key], quotas[key]), key=lambda c: str(c["chunk_id"])))
    return SampleResult(tuple(picked), dict(skipped),
                        {k: (len(v), quotas[k]) for k, v in sorted(strata.items())})


def sample_chunks(chunks: Iterable[dict], n: int = 150, seed: int = 13) -> list[dict]:
    """The chunks of :func:`stratified_sample` (ordered by stratum, then chunk id)."""
    return list(stratified_sample(chunks, n, seed).chunks)


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


def _copies(question: str, passage: str, run: int = COPY_RUN_WORDS) -> bool:
    q = [w.lower() for w in _WORD.findall(question)]
    if len(q) < run:
        return False
    p = " " + " ".join(w.lower() for w in _WORD.findall(passage)) + " "
    return any(" " + " ".join(q[i:i + run]) + " " in p for i in range(len(q) - run + 1))


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


@dataclass(kw_only=True)
class GenerationReport(JobReport):
    sampled: int
    skipped: dict[str, int]
    cases_appended: int = 0
    cases_reconciled: int = 0
    cases_already_present: int = 0


def plan_generation(chunks: Iterable[dict], golden_path: str | Path, *, n: int = 150, seed: int = 13,
                    model: str = llm.DEFAULT_MODEL, batch: bool = False, retry_failed: bool = False,
                    price: llm.Price | None = None, provider: str = llm.DEFAULT_PROVIDER) -> GenerationPlan:
    """Sample, read the checkpoint, and estimate the cost of what is left. No API call."""
    sample = stratified_sample(chunks, n, seed)
    for c in sample.chunks:
        check_chunk(c)
    cp_path = checkpoint_path(golden_path, "generate")
    state = read_state(Checkpoint(cp_path))
    jobs = [Job(str(c["chunk_id"]), build_prompt(c), {k: c[k] for k in CHUNK_KEYS}) for c in sample.chunks]
    return GenerationPlan(sample=sample, **plan_fields(
        jobs, state, golden_path=golden_path, checkpoint_path=cp_path, system=SYSTEM_PROMPT, model=model,
        batch=batch, retry_failed=retry_failed, output_tokens_per_request=EXPECTED_OUTPUT_TOKENS, price=price,
        provider=provider))


def interpret_generation(model: str, provider: str = llm.DEFAULT_PROVIDER) -> Interpret:
    def interpret(chunk: dict, text: str) -> dict:
        items, problems = parse_generation(text, chunk["text"])
        cases, notes = build_cases(chunk, items, model, provider)
        problems.update(notes)
        unusable = bool(problems.get("malformed_json") or problems.get("not_a_list"))
        return {"records": cases, "problems": dict(problems), "unusable": unusable}
    return interpret


def run_generation(plan: GenerationPlan, client: Any, *, concurrency: int = 4, max_tokens: int = 1024,
                   on_progress: Callable[[dict], None] | None = None, poll_interval: float = 30.0,
                   poll_timeout: float | None = None, price: llm.Price | None = None) -> GenerationReport:
    """Run a plan: reconcile, resume open batches, then generate for the pending chunks.

    ``client`` may be None when nothing is pending and no batch is open.
    """
    report = GenerationReport(sampled=len(plan.sample.chunks), skipped=dict(plan.sample.skipped),
                              already_done=plan.already_done)

    def counted(appended: int, present: int) -> None:
        report.cases_appended += appended
        report.cases_already_present += present

    task = Task("generation", SYSTEM_PROMPT, PROMPT_VERSION, interpret_generation(plan.model, plan.provider))
    report.cases_reconciled = run_jobs(task, plan, client, report, counted=counted, max_tokens=max_tokens,
                                       concurrency=concurrency, on_progress=on_progress,
                                       poll_interval=poll_interval, poll_timeout=poll_timeout, price=price)
    return report
