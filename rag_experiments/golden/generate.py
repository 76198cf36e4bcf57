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

Default bars, from the demo set (118 paraphrase, 112 exact questions written by an agent):
paraphrase mean overlap 0.33 (p75 0.44, p90 0.57; 19 over 0.5), exact without the identifier mean
0.50 (p75 0.75; 19 at 1.0). ``paraphrase`` 0.5: the quality report's warning level; a generated set
averaging 0.55 scored recall 0.746 where hand-written questions (0.11) scored 0.385
(lossless-claude/lcm#358). ``exact`` 0.75: above it nearly every word beside the identifier is the
passage's own. Other kinds have no bar unless one is given.

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
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any, Callable, Iterable

from .. import llm
from ..errors import ConfigError
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
from .quality import content_words
from .records import new_id

PROMPT_VERSION = "gen-v1"
REWRITE_PROMPT_VERSION = "rewrite-v1"
LEAKAGE_BARS: dict[str, float] = {"paraphrase": 0.5, "exact": 0.75}  # see the module docstring
EXPECTED_REWRITE_TOKENS = 60  # per rewrite answer, for the cost estimate
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
    copied = sorted(_leak_words(question, identifier) & content_words(evidence))
    keep = f"Identifier to keep verbatim: {identifier}\n" if identifier else ""
    return (f"Passage:\n<passage>\n{evidence}\n</passage>\n\nQuestion: {question}\n"
            f"Copied words: {', '.join(copied)}\n{keep}\n{language_sentence(language)}Answer with the JSON object only.")


# == the leakage bar ===========================================================================
def _leak_words(question: str, identifier: str | None) -> set[str]:
    words = content_words(question)
    return words - content_words(identifier) if identifier else words


def leakage(question: str, evidence: str, identifier: str | None = None) -> float | None:
    """The share of the question's content words found in its evidence (the quality report's
    :func:`~rag_experiments.golden.quality.overlap`), leaving out the identifier's own words when
    ``identifier`` is given (an exact question shares them by design). None: nothing to measure."""
    words = _leak_words(question, identifier)
    if not words:
        return None
    return len(words & content_words(evidence)) / len(words)


def parse_bars(specs: Iterable[str] | None, base: dict[str, float] | None = None) -> dict[str, float]:
    """``["paraphrase=0.4", "exact=off"]`` over :data:`LEAKAGE_BARS` (``off`` or ``none``: no bar
    for that kind). Raises ConfigError naming the bad item."""
    bars = dict(LEAKAGE_BARS if base is None else base)
    for spec in specs or ():
        kind, sep, value = str(spec).partition("=")
        kind, value = kind.strip(), value.strip()
        if not sep or not kind:
            raise ConfigError(f"--leakage-bar: {spec!r} is not KIND=VALUE",
                              hint="for example --leakage-bar paraphrase=0.4 (a share 0..1, or off)")
        if value.lower() in ("off", "none"):
            bars.pop(kind, None)
            continue
        try:
            bar = float(value)
        except ValueError:
            bar = float("nan")
        if not 0 <= bar <= 1:
            raise ConfigError(f"--leakage-bar: {kind}={value!r} is not a share between 0 and 1 (or off)",
                              hint="for example --leakage-bar paraphrase=0.4")
        bars[kind] = bar
    return bars


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


def leakage_counts(golden_path: str | Path) -> dict[str, dict]:
    """Per kind, over the golden set's generation and rewrite logs: ``generated``, ``kept`` (at or
    under the bar), ``rewritten``, ``dropped``, ``pending`` (held, rewrite not answered yet),
    ``unchecked`` (answers from before the bar), and the mean overlap ``before`` (of every generated
    question as first written) and ``after`` (of the questions that went into the set)."""
    state = read_state(Checkpoint(checkpoint_path(golden_path, "generate")))
    rstate = read_state(Checkpoint(checkpoint_path(golden_path, "rewrite")))
    latest: dict[str, dict] = {}
    for e in state.entries:
        if e.get("event") == "item" and e.get("status") == "done":
            latest[e["key"]] = e
    outcome: dict[str, dict] = {}
    for e in rstate.entries:
        if e.get("event") == "item" and e.get("status") == "done":
            outcome[e["key"]] = e
    rows: dict[str, dict] = {}
    before: dict[str, list[float]] = defaultdict(list)
    after: dict[str, list[float]] = defaultdict(list)

    def row(kind: str) -> dict:
        return rows.setdefault(kind, dict.fromkeys(("generated", "kept", "rewritten", "dropped", "pending",
                                                    "unchecked"), 0))

    for e in latest.values():
        if "leakage" not in e:
            for rec in e.get("records") or ():
                row(rec["kind"])["unchecked"] += 1
            continue
        for rec in e.get("records") or ():
            r = row(rec["kind"])
            r["generated"] += 1
            r["kept"] += 1
            value = (rec["provenance"].get("leakage") or {}).get("overlap")
            if value is not None:
                before[rec["kind"]].append(value)
                after[rec["kind"]].append(value)
        for held in e["leakage"].get("held") or ():
            kind = held["case"]["kind"]
            r = row(kind)
            r["generated"] += 1
            before[kind].append(held["overlap"])
            done = outcome.get(held["case"]["id"])
            if done is None:
                r["pending"] += 1
            elif done.get("outcome") == "rewritten":
                r["rewritten"] += 1
                if done.get("overlap_after") is not None:
                    after[kind].append(done["overlap_after"])
            else:
                r["dropped"] += 1
    for kind, r in rows.items():
        r["overlap_before"] = round(fmean(before[kind]), 3) if before[kind] else None
        r["overlap_after"] = round(fmean(after[kind]), 3) if after[kind] else None
    return dict(sorted(rows.items()))


def leakage_lines(counts: dict[str, dict]) -> list[str]:
    def num(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.2f}"

    out = []
    for kind, r in counts.items():
        line = (f"{kind}: {r['generated']} generated, {r['kept']} kept, {r['rewritten']} rewritten, "
                f"{r['dropped']} dropped; mean overlap {num(r['overlap_before'])} -> {num(r['overlap_after'])}")
        if r["pending"]:
            line += f"; {r['pending']} awaiting a rewrite (API errors: rerun)"
        if r["unchecked"]:
            line += f"; {r['unchecked']} from before the bar (unchecked)"
        out.append(line)
    return out


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
