"""Paid LLM jobs that never pay twice: the checkpoint, the runner, and the golden-set appender.

Shared by :mod:`.generate` (one job per sampled chunk) and :mod:`.label` (one job per (case,
span) pair). Every outcome (raw answer, parsed records, usage, error) is appended to a JSONL
checkpoint beside the golden file (``<golden stem>.<task>.log.jsonl``) *before* its records go
to the golden set. A rerun skips every job already in the checkpoint (no API call) and first
appends any checkpointed record missing from the golden set (a crash between the two writes).
With Message Batches the batch id (and everything needed to read its results) is checkpointed
as soon as the batch exists, so a rerun resumes polling instead of submitting again.

Providers (:data:`rag_experiments.llm.PROVIDERS`): a plan names its provider; direct calls go
through :func:`rag_experiments.llm.complete` whichever SDK the client is. Message Batches are
Anthropic's: a batch plan with another provider is refused, and so is a run with another
provider while the checkpoint holds an open batch (it is collected with ``--provider anthropic``).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from .. import llm
from ..errors import GoldenSetError
from .records import now_iso
from .golden_file import GoldenFile


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
                 on_progress: Callable[[dict], None] | None = None, provider: str = llm.DEFAULT_PROVIDER) -> None:
        self.client, self.cp, self.system, self.model = client, checkpoint, system, model
        self.provider = provider
        self.prompt_version, self.max_tokens = prompt_version, max_tokens
        self.interpret, self.record, self.on_progress = interpret, record, on_progress
        self.stats = EngineStats()
        self._recorded: set[str] = set()

    # -- one outcome --------------------------------------------------------------------------
    def _outcome(self, job_key: str, payload: dict, text: str | None, usage: llm.Usage, error: str | None,
                 via: str) -> dict:
        entry: dict[str, Any] = {"event": "item", "key": job_key, "provider": self.provider, "model": self.model,
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
        try:
            text, usage = llm.complete(self.client, job.prompt, model=self.model, system=self.system,
                                       max_tokens=self.max_tokens)
        except Exception as exc:  # noqa: BLE001 - either SDK's API errors; anything else is a bug
            if not llm.is_api_error(exc):
                raise
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
    return {r.id for r in golden.read_records()} if golden.exists() else set()


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


# == one run of a task ==========================================================================
@dataclass(kw_only=True)
class JobReport:
    """What a run did and cost; the task reports add their own counts."""

    already_done: int
    processed: int = 0
    api_errors: int = 0
    problems: Counter = field(default_factory=Counter)
    usage: llm.Usage = field(default_factory=llm.Usage)
    batch_usage: llm.Usage = field(default_factory=llm.Usage)
    cost_usd: float | None = None
    batches: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    torn_checkpoint_lines: int = 0  # lines of a run killed mid-write, ignored

    def fill_usage(self, stats: EngineStats, model: str, price: llm.Price | None,
                   provider: str = llm.DEFAULT_PROVIDER) -> None:
        self.processed, self.api_errors = stats.processed, stats.api_errors
        self.usage, self.batch_usage = stats.usage, stats.batch_usage
        self.batches, self.errors = stats.batches, stats.errors
        direct = llm.cost_usd(model, stats.usage.input_tokens, stats.usage.output_tokens, price=price,
                              provider=provider)
        batched = llm.cost_usd(model, stats.batch_usage.input_tokens, stats.batch_usage.output_tokens, batch=True,
                               price=price, provider=provider)
        self.cost_usd = None if direct is None or batched is None else direct + batched


@dataclass(frozen=True, kw_only=True)
class JobPlan:
    """A task's jobs, worked out before any call: which are left to send, and what they cost."""

    golden_path: Path
    checkpoint_path: Path
    model: str
    batch: bool
    jobs: tuple[Job, ...]  # every job of the task
    pending: tuple[Job, ...]  # to be sent (not in the checkpoint, not in an open batch)
    already_done: int
    in_open_batches: int
    estimate: llm.CostEstimate
    provider: str = llm.DEFAULT_PROVIDER  # who answers: golden records name it with the model


def check_batch_provider(batch: bool, provider: str) -> None:
    """Message Batches are Anthropic's API: refused for any other provider."""
    llm.check_provider(provider, "provider")
    if batch and provider != "anthropic":
        from ..errors import ConfigError

        raise ConfigError(f"--batch: the Message Batches API is Anthropic's; provider {provider} has none here",
                          hint="drop --batch: requests go one by one (--concurrency of them at a time)")


def plan_fields(jobs: list[Job], state: CheckpointState, *, golden_path: str | Path, checkpoint_path: Path,
                system: str, model: str, batch: bool, retry_failed: bool, output_tokens_per_request: int,
                price: llm.Price | None, provider: str = llm.DEFAULT_PROVIDER) -> dict[str, Any]:
    """The :class:`JobPlan` fields for ``jobs`` given the checkpoint ``state`` (no API call)."""
    check_batch_provider(batch, provider)
    open_keys = jobs_in_open_batches(state)
    pending = [j for j in pending_jobs(jobs, state, retry_failed) if j.key not in open_keys]
    estimate = llm.estimate_cost(model, [system + "\n" + j.prompt for j in pending],
                                 output_tokens_per_request=output_tokens_per_request, batch=batch, price=price,
                                 provider=provider)
    return {"golden_path": Path(golden_path), "checkpoint_path": checkpoint_path, "model": model, "batch": batch,
            "provider": provider,
            "jobs": tuple(jobs), "pending": tuple(pending), "already_done": sum(j.key in state.done for j in jobs),
            "in_open_batches": len(open_keys), "estimate": estimate}


@dataclass(frozen=True)
class Task:
    """What differs between generating and labelling: the prompt and how to read an answer."""

    name: str  # for errors: "generation", "labelling"
    system: str
    prompt_version: str
    interpret: Interpret


def run_jobs(task: Task, plan: JobPlan, client: Any, report: JobReport, *,
             counted: Callable[[int, int], None], max_tokens: int, concurrency: int = 4,
             on_progress: Callable[[dict], None] | None = None, poll_interval: float = 30.0,
             poll_timeout: float | None = None, price: llm.Price | None = None) -> int:
    """Reconcile, resume open batches, then run the plan's pending jobs; return the number of
    records reconciled. ``counted(appended, already_present)`` is called per outcome.
    ``client`` may be None when nothing is pending and no batch is open."""
    cp = Checkpoint(plan.checkpoint_path)
    state = read_state(cp)
    report.torn_checkpoint_lines = cp.torn_lines
    appender = GoldenAppender(GoldenFile(plan.golden_path))
    reconciled = appender.reconcile(state)

    def record(entry: dict) -> None:
        report.problems.update(entry.get("problems") or {})
        counted(*appender.add(entry.get("records") or []))

    if not plan.pending and not state.open_batches:
        return reconciled
    if state.open_batches and plan.provider != "anthropic":
        ids = ", ".join(b["batch_id"] for b in state.open_batches)
        raise GoldenSetError(f"{plan.checkpoint_path}: holds open Message Batch(es) {ids}, submitted to Anthropic "
                             f"and paid for; provider {plan.provider} cannot collect them",
                             hint="rerun once with --provider anthropic to collect them, then switch providers")
    if client is None:
        raise GoldenSetError(f"{task.name} needs an API client: {len(plan.pending)} jobs are pending",
                             hint="set ANTHROPIC_API_KEY" if plan.provider == "anthropic" else
                             "pass --base-url (and OPENAI_API_KEY if the server needs one)")
    if llm.provider_of(client) != plan.provider:
        raise ValueError(f"the plan is for provider {plan.provider} but the client speaks {llm.provider_of(client)}")
    runner = JobRunner(client, cp, system=task.system, model=plan.model, prompt_version=task.prompt_version,
                       max_tokens=max_tokens, interpret=task.interpret, record=record, on_progress=on_progress,
                       provider=plan.provider)
    try:
        runner.run(list(plan.pending), state, batch=plan.batch, concurrency=concurrency,
                   poll_interval=poll_interval, poll_timeout=poll_timeout)
    finally:
        report.fill_usage(runner.stats, plan.model, price, plan.provider)
        appender.flush()
    return reconciled
