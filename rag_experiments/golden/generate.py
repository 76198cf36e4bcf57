"""Generate golden cases from corpus chunks with an LLM, resumably.

Pipeline: :func:`stratified_sample` picks chunks -> one prompt per chunk (:data:`SYSTEM_PROMPT`,
:func:`build_prompt`) -> the model answers a JSON list of questions -> :func:`parse_generation`
validates it strictly -> :func:`build_cases` turns valid items into ``case`` records whose evidence
is the located quote -> :class:`~.store.GoldenFile` appends them.

Resumability (also used by :mod:`.label`): every item's outcome (raw answer, parsed records,
usage, error) is appended to a JSONL checkpoint beside the golden file
(``<golden stem>.generate.log.jsonl``) *before* the records go to the golden set. A rerun skips
every item already in the checkpoint (no API call), and first appends any checkpointed record
missing from the golden set (a crash between the two writes). With ``--batch`` the Message
Batches API is used; the batch id (and everything needed to read its results) is checkpointed
as soon as the batch exists, so a rerun resumes polling instead of paying again.

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

import hashlib
import json
import math
import os
import random
import re
import threading
from collections import Counter, defaultdict
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from .. import llm
from ..errors import GoldenSetError
from .records import new_id, now_iso
from .store import GoldenFile

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
    ``duplicate_kind``, ``duplicate_question``. ``empty_answer`` counts a deliberate ``[]``.
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


def build_cases(chunk: dict, items: list[dict], model: str) -> tuple[list[dict], Counter]:
    """``case`` records for the accepted items of one chunk.

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
            "provenance": {"method": "llm", "model": model, "prompt_version": PROMPT_VERSION,
                           "source_chunk": chunk["chunk_id"], "evidence_located": located},
        }
        if item["identifier"] is not None:
            rec["identifier"] = item["identifier"]
        cases.append(rec)
    return cases, notes


# == checkpoint + job engine (shared with label) ===============================================
class Checkpoint:
    """Append-only JSONL log of job outcomes. Each entry is flushed and fsynced before the run
    moves on. A torn last line (killed mid-write) is ignored on read and counted."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.torn_lines = 0

    def entries(self) -> list[dict]:
        if not self.path.exists():
            return []
        out, self.torn_lines = [], 0
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                self.torn_lines += 1
                continue
            if isinstance(obj, dict):
                out.append(obj)
        return out

    def append(self, entry: dict) -> None:
        entry = {"at": now_iso(), **entry}
        data = json.dumps(entry, ensure_ascii=False, sort_keys=True)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a+b") as fh:
                fh.seek(0, os.SEEK_END)
                if fh.tell() > 0:
                    fh.seek(-1, os.SEEK_END)
                    if fh.read(1) != b"\n":
                        fh.write(b"\n")  # close a torn line so this entry parses
                fh.write(data.encode("utf-8") + b"\n")
                fh.flush()
                os.fsync(fh.fileno())


def checkpoint_path(golden_path: str | Path, task: str) -> Path:
    """``<golden dir>/<golden stem>.<task>.log.jsonl``."""
    p = Path(golden_path)
    return p.with_name(f"{p.name.removesuffix('.jsonl')}.{task}.log.jsonl")


@dataclass(frozen=True)
class Job:
    key: str  # what the checkpoint calls this item (chunk id, or case|doc|start|end)
    prompt: str
    payload: dict  # JSON-able; enough to interpret the answer later (kept in batch entries)

    @property
    def custom_id(self) -> str:
        return "k" + hashlib.sha256(self.key.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class CheckpointState:
    done: frozenset[str]  # keys with an outcome (an API error is not an outcome)
    failed: frozenset[str]  # done keys whose answer was unusable (malformed) - retried on request
    open_batches: tuple[dict, ...]  # batch_submitted entries not yet collected
    entries: tuple[dict, ...]


def read_state(cp: Checkpoint) -> CheckpointState:
    entries = cp.entries()
    done, failed = set(), set()
    submitted, collected = {}, set()
    for e in entries:
        if e.get("event") == "item" and e.get("status") == "done":
            done.add(e["key"])
            if e.get("unusable"):
                failed.add(e["key"])
            else:
                failed.discard(e["key"])
        elif e.get("event") == "batch_submitted":
            submitted[e["batch_id"]] = e
        elif e.get("event") == "batch_collected":
            collected.add(e["batch_id"])
    open_batches = tuple(b for bid, b in submitted.items() if bid not in collected)
    return CheckpointState(frozenset(done), frozenset(failed), open_batches, tuple(entries))


@dataclass
class EngineStats:
    processed: int = 0
    api_errors: int = 0
    usage: llm.Usage = field(default_factory=llm.Usage)
    batch_usage: llm.Usage = field(default_factory=llm.Usage)
    batches: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


Interpret = Callable[[dict, str], dict]  # (payload, answer text) -> checkpoint fields (records, problems, unusable)
Record = Callable[[dict], None]  # the checkpointed entry -> append its records to the golden set


class JobRunner:
    """Run jobs through the API (direct, concurrent, or as a Message Batch), checkpointing each
    outcome before handing it to ``record``. Shared by :mod:`.generate` and :mod:`.label`."""

    def __init__(self, client: Any, checkpoint: Checkpoint, *, system: str, model: str, prompt_version: str,
                 max_tokens: int, interpret: Interpret, record: Record,
                 on_progress: Callable[[dict], None] | None = None) -> None:
        self.client, self.cp, self.system, self.model = client, checkpoint, system, model
        self.prompt_version, self.max_tokens = prompt_version, max_tokens
        self.interpret, self.record, self.on_progress = interpret, record, on_progress
        self.stats = EngineStats()
        self._recorded: set[str] = set()

    # -- one outcome --------------------------------------------------------------------------
    def _outcome(self, job_key: str, payload: dict, text: str | None, usage: llm.Usage, error: str | None,
                 via: str) -> dict:
        entry: dict[str, Any] = {"event": "item", "key": job_key, "model": self.model,
                                 "prompt_version": self.prompt_version, "via": via, "usage": usage.to_json(),
                                 "raw": text, "error": error}
        if error is not None:
            entry["status"] = "api_error"
            return entry
        entry["status"] = "done"
        try:
            entry.update(self.interpret(payload, text or ""))
        except Exception as exc:  # a validation bug must not lose a paid answer
            entry.update({"records": [], "problems": {"interpret_failed": 1}, "unusable": True,
                          "error": f"interpretation failed: {type(exc).__name__}: {exc}"})
        return entry

    def _commit(self, entry: dict) -> None:
        if entry["key"] in self._recorded:
            return
        self.cp.append(entry)
        self._recorded.add(entry["key"])
        usage = llm.Usage.from_json(entry.get("usage"))
        if entry["via"].startswith("batch"):
            self.stats.batch_usage += usage
        else:
            self.stats.usage += usage
        if entry["status"] == "done":
            self.stats.processed += 1
            self.record(entry)
        else:
            self.stats.api_errors += 1
            self.stats.errors.append(f"{entry['key']}: {entry['error']}")
        if self.on_progress:
            self.on_progress(entry)

    # -- direct calls -------------------------------------------------------------------------
    def _call(self, job: Job) -> dict:
        import anthropic

        try:
            text, usage = llm.complete(self.client, job.prompt, model=self.model, system=self.system,
                                       max_tokens=self.max_tokens)
        except anthropic.APIError as exc:
            fatal = llm.fatal_api_error(exc)
            if fatal is not None:
                raise fatal from None
            return self._outcome(job.key, job.payload, None, llm.Usage(), llm.describe_api_error(exc), "direct")
        return self._outcome(job.key, job.payload, text, usage, None, "direct")

    def run_direct(self, jobs: list[Job], concurrency: int = 4) -> None:
        """Concurrent direct calls. On any exception (fatal API error, interrupt, a failing
        callback) pending jobs are cancelled, answers already in flight are still checkpointed
        (they are paid for), then the exception propagates."""
        if not jobs:
            return
        pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="llm")
        futures: dict[Future, Job] = {pool.submit(self._call, job): job for job in jobs}
        pending = set(futures)
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(finished, key=lambda f: futures[f].key):
                    self._commit(fut.result())
        except BaseException:
            for fut in pending:
                fut.cancel()
            pool.shutdown(wait=True)
            for fut, job in futures.items():
                if fut.done() and not fut.cancelled() and fut.exception() is None and job.key not in self._recorded:
                    try:
                        entry = fut.result()
                        self.cp.append(entry)  # save it; records are reconciled on the next run
                        self._recorded.add(job.key)
                    except BaseException:
                        pass
            raise
        finally:
            pool.shutdown(wait=True)

    # -- batches ------------------------------------------------------------------------------
    def submit_batch(self, jobs: list[Job]) -> dict:
        requests = [llm.batch_request(j.custom_id, j.prompt, model=self.model, system=self.system,
                                      max_tokens=self.max_tokens) for j in jobs]
        batch_id = llm.create_batch(self.client, requests)
        entry = {"event": "batch_submitted", "batch_id": batch_id, "model": self.model,
                 "prompt_version": self.prompt_version,
                 "items": {j.custom_id: {"key": j.key, "payload": j.payload} for j in jobs}}
        self.cp.append(entry)
        self.stats.batches.append(batch_id)
        return entry

    def collect_batch(self, submitted: dict, *, entries: Iterable[dict] = (), poll_interval: float = 30.0,
                      poll_timeout: float | None = None) -> None:
        """Poll a submitted batch until it ends, checkpoint every result, mark it collected.
        Results already checkpointed from this batch (``entries``: a collection cut short) are
        not recorded twice. Raises :class:`llm.BatchPending` if it does not end within
        ``poll_timeout``."""
        batch_id = submitted["batch_id"]
        llm.poll_batch(self.client, batch_id, interval=poll_interval, timeout=poll_timeout)
        items = submitted["items"]
        via = f"batch:{batch_id}"
        done = {e["key"] for e in entries if e.get("event") == "item" and e.get("via") == via}
        seen = set()
        for res in llm.batch_results(self.client, batch_id):
            item = items.get(res.custom_id)
            if item is None:
                continue
            seen.add(res.custom_id)
            if item["key"] in done:
                continue
            self._commit(self._outcome(item["key"], item["payload"], res.text, res.usage, res.error, via))
        for cid, item in items.items():
            if cid not in seen and item["key"] not in done:
                self._commit(self._outcome(item["key"], item["payload"], None, llm.Usage(),
                                           "no result returned for this request", via))
        self.cp.append({"event": "batch_collected", "batch_id": batch_id})

    def run(self, jobs: list[Job], state: CheckpointState, *, batch: bool, concurrency: int,
            poll_interval: float, poll_timeout: float | None) -> None:
        """Resume open batches first (they are paid for, whatever ``batch`` says), then run
        the jobs not covered by them, as a new batch or as direct calls."""
        in_batches = set()
        for submitted in state.open_batches:
            self.stats.batches.append(submitted["batch_id"])
            in_batches.update(item["key"] for item in submitted["items"].values())
            self.collect_batch(submitted, entries=state.entries, poll_interval=poll_interval,
                               poll_timeout=poll_timeout)
        todo = [j for j in jobs if j.key not in in_batches]
        if not todo:
            return
        if batch:
            self.collect_batch(self.submit_batch(todo), poll_interval=poll_interval, poll_timeout=poll_timeout)
        else:
            self.run_direct(todo, concurrency)


def pending_jobs(jobs: list[Job], state: CheckpointState, retry_failed: bool) -> list[Job]:
    """Jobs without an outcome in the checkpoint (plus unusable ones when ``retry_failed``)."""
    return [j for j in jobs if j.key not in state.done or (retry_failed and j.key in state.failed)]


def jobs_in_open_batches(state: CheckpointState) -> set[str]:
    return {item["key"] for b in state.open_batches for item in b["items"].values()}


def golden_ids(golden: GoldenFile) -> set[str]:
    return {r["id"] for r in golden.read()} if golden.exists() else set()


class GoldenAppender:
    """Appends records to the golden set, skipping ids already there, in groups of ``every``
    outcomes (each :meth:`GoldenFile.append` fsyncs and rewrites the manifest; grouping keeps
    that off the per-call path). Safe because the checkpoint is written first: records not yet
    flushed when a run dies are appended by :meth:`reconcile` on the next run."""

    def __init__(self, golden: GoldenFile, every: int = 25) -> None:
        self.golden, self.every = golden, every
        self.present = golden_ids(golden)
        self._buffer: list[dict] = []
        self._outcomes = 0

    def add(self, records: list[dict]) -> tuple[int, int]:
        """Queue the new records of one outcome; return (queued, already present)."""
        queued = dup = 0
        for rec in records:
            if rec["id"] in self.present:
                dup += 1
                continue
            self.present.add(rec["id"])
            self._buffer.append(rec)
            queued += 1
        self._outcomes += 1
        if self._outcomes % self.every == 0:
            self.flush()
        return queued, dup

    def flush(self) -> None:
        if self._buffer:
            self.golden.append(self._buffer)
            self._buffer = []

    def reconcile(self, state: CheckpointState) -> int:
        """Append checkpointed records missing from the golden set (a run that died after
        checkpointing an outcome but before its records were appended)."""
        n = 0
        for e in state.entries:
            if e.get("event") == "item" and e.get("status") == "done" and e.get("records"):
                n += self.add(e["records"])[0]
        self.flush()
        return n


# == generation ================================================================================
@dataclass(frozen=True)
class GenerationPlan:
    golden_path: Path
    checkpoint_path: Path
    model: str
    batch: bool
    sample: SampleResult
    jobs: tuple[Job, ...]  # every sampled chunk
    pending: tuple[Job, ...]  # to be sent (not in the checkpoint, not in an open batch)
    already_done: int
    in_open_batches: int
    estimate: llm.CostEstimate


@dataclass
class GenerationReport:
    sampled: int
    skipped: dict[str, int]
    already_done: int
    processed: int = 0
    api_errors: int = 0
    cases_appended: int = 0
    cases_reconciled: int = 0
    cases_already_present: int = 0
    problems: Counter = field(default_factory=Counter)
    usage: llm.Usage = field(default_factory=llm.Usage)
    batch_usage: llm.Usage = field(default_factory=llm.Usage)
    cost_usd: float | None = None
    batches: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    torn_checkpoint_lines: int = 0


def plan_generation(chunks: Iterable[dict], golden_path: str | Path, *, n: int = 150, seed: int = 13,
                    model: str = llm.DEFAULT_MODEL, batch: bool = False, retry_failed: bool = False,
                    price: llm.Price | None = None) -> GenerationPlan:
    """Sample, read the checkpoint, and estimate the cost of what is left. No API call."""
    sample = stratified_sample(chunks, n, seed)
    for c in sample.chunks:
        check_chunk(c)
    cp_path = checkpoint_path(golden_path, "generate")
    state = read_state(Checkpoint(cp_path))
    jobs = [Job(str(c["chunk_id"]), build_prompt(c), {k: c[k] for k in CHUNK_KEYS}) for c in sample.chunks]
    open_keys = jobs_in_open_batches(state)
    pending = [j for j in pending_jobs(jobs, state, retry_failed) if j.key not in open_keys]
    estimate = llm.estimate_cost(model, [SYSTEM_PROMPT + "\n" + j.prompt for j in pending],
                                 output_tokens_per_request=EXPECTED_OUTPUT_TOKENS, batch=batch, price=price)
    return GenerationPlan(Path(golden_path), cp_path, model, batch, sample, tuple(jobs), tuple(pending),
                          sum(j.key in state.done for j in jobs), len(open_keys), estimate)


def interpret_generation(model: str) -> Interpret:
    def interpret(chunk: dict, text: str) -> dict:
        items, problems = parse_generation(text, chunk["text"])
        cases, notes = build_cases(chunk, items, model)
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
    golden = GoldenFile(plan.golden_path)
    cp = Checkpoint(plan.checkpoint_path)
    state = read_state(cp)
    report = GenerationReport(sampled=len(plan.sample.chunks), skipped=dict(plan.sample.skipped),
                              already_done=plan.already_done, torn_checkpoint_lines=cp.torn_lines)
    appender = GoldenAppender(golden)
    report.cases_reconciled = appender.reconcile(state)

    def record(entry: dict) -> None:
        report.problems.update(entry.get("problems") or {})
        added, dup = appender.add(entry.get("records") or [])
        report.cases_appended += added
        report.cases_already_present += dup

    jobs = list(plan.pending)
    if not jobs and not state.open_batches:
        return report
    if client is None:
        raise GoldenSetError("run_generation needs an API client: chunks are pending")
    runner = JobRunner(client, cp, system=SYSTEM_PROMPT, model=plan.model, prompt_version=PROMPT_VERSION,
                       max_tokens=max_tokens, interpret=interpret_generation(plan.model), record=record,
                       on_progress=on_progress)
    try:
        runner.run(jobs, state, batch=plan.batch, concurrency=concurrency, poll_interval=poll_interval,
                   poll_timeout=poll_timeout)
    finally:
        _fill_usage(report, runner.stats, plan.model, price)
        appender.flush()
    return report


def _fill_usage(report: Any, stats: EngineStats, model: str, price: llm.Price | None) -> None:
    report.processed, report.api_errors = stats.processed, stats.api_errors
    report.usage, report.batch_usage = stats.usage, stats.batch_usage
    report.batches, report.errors = stats.batches, stats.errors
    direct = llm.cost_usd(model, stats.usage.input_tokens, stats.usage.output_tokens, price=price)
    batched = llm.cost_usd(model, stats.batch_usage.input_tokens, stats.batch_usage.output_tokens, batch=True,
                           price=price)
    report.cost_usd = None if direct is None or batched is None else direct + batched
