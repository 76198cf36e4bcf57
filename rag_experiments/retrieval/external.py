"""A team's own retriever behind the same protocol as the built-in variants
(:class:`rag_experiments.retrieval.protocol.SearchSystem`): ``retrieval=external`` (a Python
target) and ``retrieval=http`` (a search service).

Per query: the system is asked for ``k`` passages (or they come from the cache), each passage is
read (:mod:`.passages`) and placed in the corpus text (:mod:`.placement`), a repeat of an
already placed span keeps its rank (counted; evaluation credits only the first), and the result is a :class:`RankedList` of hits in
the system's own order (ties are its business: nothing is re-sorted). Evaluation, tracking,
compare, promote and the gate then see what they see for a built-in variant.

Caching: the passages a system returned are stored in ``candidate_cache`` (leg ``external``)
under a key that holds every input that can change them (:attr:`System.key`, then the query and
k), so re-running and rescoring call nothing:

* a Python target: the target spec, ``retrieval.external.init`` (a class's constructor kwargs),
  ``retrieval.external.params``, the declared ``retrieval.external.version`` (if any) and the
  code: the sha256 of the target module's file and of every project-local module it imports,
  transitively, and the versions of the installed packages it imports
  (:mod:`.code_identity`); a change in a helper module is a new key;
* ``http``: the URL, the wire format and ``retrieval.http.params``;
* the query and k (the depth asked for).

What the code does not show (an index rebuilt on disk, a remote model) is the user's to declare
with ``retrieval.external.version``, or ``retrieval.external.cache=false`` for a system that
changes under you. ``rag-exp audit-cache`` lists the runs logged before init was in the key
whose answers may have come from another init.

Failures are loud: a target that cannot be imported or called, an answer that cannot be read
(a score of inf or NaN, text JSON or PostgreSQL cannot hold, a passage or an HTTP body above its
bound), an HTTP error after its retries or past its deadline, an exception in the system: one
line naming the target (or URL) and the query, exit 2, and no run is logged (a FINISHED run with
partial numbers would be a silently wrong number). Passages that cannot be placed are counted;
the run stops as soon as more than ``retrieval.external.max_unplaced`` of all the hits it can
have are certain to be unplaced (checked after every query's answer).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..cache_key import cache_key
from ..errors import ConfigError, UserError
from ..paths import project_path
from ..types import Document, Hit, RankedList
from .answer_check import Answer, CacheCheck, check_answers, check_off, sample_size, say
from .code_identity import code_digest
from .deadline import Deadlined
from .external_params import ExternalParams, HttpParams, StoredParams
from .http_search import HttpSearch
from .passages import ExternalResultError, Passage, read_result
from .placement import METHODS, PLACED, Placer, placed_hit
from .protocol import CacheCounts, ChunkTexts
from .stored_run import StoredSearch

CODE_VERSION = "2"  # bump when what a cached answer means changes (2: init and the code digests in the key)


@dataclass(frozen=True)
class System:
    """A callable ``search(query, k, **params)`` with the identity its cache entries carry."""

    name: str  # the target spec or URL: what error lines name
    search: Callable[..., Any]
    identity: dict  # everything but params that can change its answers (see the module docstring)
    params: dict
    concurrency: int = 1
    offsets: str = "auto"  # what passage offsets count from (retrieval.external.offsets)
    max_passage_chars: int | None = None  # a passage's text longer than this is refused
    bound: str = "retrieval.http.max_passage_chars"  # the key that sets max_passage_chars (error lines name it)
    whole_documents: bool = False  # a passage may name a document only (a stored run's bare docno)

    @property
    def key(self) -> str:
        return cache_key("external-system", **self.identity, params=self.params, code=CODE_VERSION)


# -- a Python target ------------------------------------------------------------------------------


_INSTANCES: dict[tuple, Any] = {}  # a class target is constructed once per process and init


def load_python_target(p: ExternalParams) -> System:
    """Import ``p.target``; a class is constructed once per process with ``p.init``."""
    if not p.target:
        raise ConfigError("retrieval.external.target: not set",
                          hint="retrieval=external retrieval.external.target=package.module:attribute")
    mod_name, attr = p.target.split(":", 1)
    for folder in (os.getcwd(),):  # a console script does not put the working folder on sys.path
        if folder not in sys.path:
            sys.path.append(folder)
    try:
        module = importlib.import_module(mod_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to fix
        raise ConfigError(f"retrieval.external.target: cannot import {mod_name!r} "
                          f"({type(exc).__name__}: {(str(exc).splitlines() or [''])[0]})",
                          hint="is the module on PYTHONPATH (or in the folder you run from)?") from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"retrieval.external.target: {p.target}: {mod_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if inspect.isclass(obj):
        key = (p.target, repr(sorted(p.init.items())))
        if key not in _INSTANCES:
            try:
                _INSTANCES[key] = obj(**p.init)
            except TypeError as exc:
                raise ConfigError(f"retrieval.external.init: {p.target} cannot be constructed with "
                                  f"{sorted(p.init) or 'no arguments'} ({exc})") from exc
        search = getattr(_INSTANCES[key], "search", None)
        if not callable(search):
            raise ConfigError(f"retrieval.external.target: {p.target} is a class without a search(query, k, "
                              "**params) method")
    elif callable(obj):
        if p.init:
            raise ConfigError(f"retrieval.external.init: {p.target} is a function; init is for a class target")
        search = obj
    else:
        raise ConfigError(f"retrieval.external.target: {p.target} is a {type(obj).__name__}, not a function "
                          "or a class")
    try:
        inspect.signature(search).bind("query", 1, **p.params)
    except TypeError as exc:
        raise ConfigError(f"retrieval.external.target: {p.target} cannot be called as f(query, k"
                          f"{''.join(', ' + k + '=...' for k in p.params)}) ({exc})",
                          hint="the target takes (query: str, k: int, **params)") from None
    except ValueError:  # a builtin without a signature: the first call will tell
        pass

    # init is in the key: a class's constructor kwargs change its answers (issue 49, B1), and so
    # does any project-local module the target imports (B2)
    identity = {"target": p.target, "version": p.version, "init": dict(p.init), "code_digest": code_digest(module)}
    # bounded like an HTTP answer: a call past deadline_s stops the run (in a worker thread, see
    # .deadline), a passage text above max_passage_chars is refused before it is placed or cached
    return System(p.target, Deadlined(search, p.deadline_s, p.target), identity, dict(p.params), offsets=p.offsets,
                  max_passage_chars=p.max_passage_chars, bound="retrieval.external.max_passage_chars")


# -- an HTTP service ------------------------------------------------------------------------------
def load_http_target(p: HttpParams, offsets: str = "auto", version: str | None = None) -> System:
    # the wire format is in the identity: the same URL asked another way answers another way; so is
    # the declared version (retrieval.external.version): a model redeployed behind the same URL
    return System(p.url or "", HttpSearch(p), {"target": "http", "url": p.url, "format": p.format,
                                               "version": version},
                  dict(p.params), p.concurrency, offsets=offsets, max_passage_chars=p.max_passage_chars)


def load_stored_run(p: StoredParams, queries_by_case: dict[str, str]) -> System:
    if not p.path:
        raise ConfigError("retrieval.stored.path: not set", hint="rag-exp import-run FILE --format trec|jsonl")
    search = StoredSearch(project_path(p.path), p.format, queries_by_case)
    return System(str(p.path), search, {"target": "stored", "sha256": search.digest, "format": p.format}, {},
                  whole_documents=True)


# -- the retriever --------------------------------------------------------------------------------
@dataclass
class ExternalStats:
    calls: int = 0  # answers asked of the system
    cached: int = 0  # answers read from the cache
    alignment: Counter = field(default_factory=Counter)  # METHODS + "duplicate"
    failures: list = field(default_factory=list)  # unplaced passages, for alignment_failures.json
    harness_ms: list = field(default_factory=list)  # reading, placing and deduplicating, per query
    latencies: list = field(default_factory=list)  # (ms, asked live this run) per query, in query order

    def cache_counts(self) -> dict[str, int]:
        return {"external_calls": self.calls, "external_cached": self.cached}

    def metrics(self) -> dict[str, float]:
        out = {f"alignment.{m}": float(self.alignment.get(m, 0)) for m in (*METHODS, "duplicate")}
        # the system's own latency is the run's latency_ms_p50/p95 (each RankedList carries it; a
        # cached answer the time it took when it was asked). A percentile hides its slowest queries
        # (p95 of 230 ignores the 11 slowest): the maximum is logged beside it, and the queries asked
        # live this run apart from those whose time is a cached one
        if self.latencies:
            live = sorted(ms for ms, fresh in self.latencies if fresh)
            out["external.latency_ms_max"] = max(ms for ms, _ in self.latencies)
            out["external.latency_cached_queries"] = float(len(self.latencies) - len(live))
            if live:
                out.update({"external.live_latency_ms_p50": _quantile(live, 0.5),
                            "external.live_latency_ms_p95": _quantile(live, 0.95),
                            "external.live_latency_ms_max": live[-1]})
        if self.harness_ms:
            out["retrieval.harness_ms_per_query"] = statistics.fmean(self.harness_ms)
        return out


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (pandas' and numpy's default), as the run's
    latency_ms_p50/p95 are computed."""
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


class ExternalRetriever:
    """The :class:`~.protocol.SearchSystem` of a team's retriever."""

    def __init__(self, system: System, docs: Sequence[Document], variant: str, conn=None, use_cache: bool = True,
                 max_unplaced: float = 0.1, per_query_records: bool = True,
                 verify: tuple[int, float, int | None] = (0, 0.0, None)) -> None:
        self.system = system
        self.variant = variant
        self.conn = conn
        self.use_cache = use_cache and conn is not None
        # the answer cache proves itself (.answer_check): check_cache() decides what the run may read
        # and write; until it runs, both (a served model, the API: the key alone, as before)
        self.verify = verify  # (at least this many queries, this share of them, the seed or None)
        self.cache_check = CacheCheck("unused")
        self._read = self._write = self.use_cache
        self._replace = False  # a stale cache: fresh answers replace the entries
        self._prefilled: dict[str, Answer] = {}  # cache key -> the check's live answer (the run's answer)
        self.case_ids: dict[str, str] = {}  # query -> case id, for error lines (set by the caller)
        self.max_unplaced = max_unplaced
        self.placer = Placer(docs, offsets=system.offsets)
        self.stats = ExternalStats()
        # the number of queries the run will ask (set by the caller that knows it): with it the run
        # stops as soon as the unplaced share is certain to end above max_unplaced
        self.planned_queries: int | None = None
        self._queries_placed = 0
        # the per-query lists (unplaced passages, harness time) are a run's record; a served model
        # answers for the life of its process, so it keeps the counts only (bounded)
        self.per_query_records = per_query_records
        self._texts: dict[str, str] = {}  # chunk id -> text of the last search's hits (chunk_texts)

    def _key(self, query: str, k: int) -> str:
        return cache_key("external-answer", system=self.system.key, q=query, k=k)

    def check_cache(self, queries: Sequence[str], k: int) -> CacheCheck:
        """Re-ask a sample of ``queries`` live and compare with their cached answers (see
        :mod:`.answer_check`); prints its line, sets what the run reads and writes, and keeps the
        live answers as the run's. Nothing to check without a cache."""
        if not self.use_cache or not queries:
            return self.cache_check
        unique = list(dict.fromkeys(queries))
        n = sample_size(len(unique), self.verify[0], self.verify[1])
        if n == 0:
            self.cache_check = check_off(self.system.name)
            say(self.cache_check.line)
            return self.cache_check
        keys = [self._key(q, k) for q in unique]
        found = self._read_rows(keys)
        cached = {i: found[key] for i, key in enumerate(keys) if key in found}
        labels = [self.case_ids.get(q, f"#{i + 1}") for i, q in enumerate(unique)]
        check, live = check_answers(self.system.name, unique, labels, cached, lambda i: self._ask(i, unique[i], k),
                                    n, self.verify[2], len(queries))
        if check.line:
            say(check.line)
        self.cache_check = check
        self._read, self._write, self._replace = check.reads_cache, check.writes_cache, check.status == "stale"
        self._prefilled = {keys[i]: answer for i, answer in live.items()}
        return check

    def _cached(self, keys: list[str]) -> dict[str, Answer]:
        return self._read_rows(keys) if self._read else {}

    def _read_rows(self, keys: list[str]) -> dict[str, Answer]:
        if not self.use_cache or not keys:
            return {}
        rows = self.conn.execute("SELECT cache_key, hits FROM candidate_cache WHERE cache_key = ANY(%s)",
                                 (keys,)).fetchall()
        return {k: ([Passage.from_json(p) for p in v["passages"]], float(v["ms"])) for k, v in rows}

    def _store(self, fresh: list[tuple[str, list[Passage], float]]) -> None:
        if not self.use_cache or not self._write or not fresh:
            return
        from psycopg.types.json import Jsonb

        rows = []
        for key, ps, ms in fresh:
            value = {"passages": [p.to_json() for p in ps], "ms": ms}
            try:  # read_result refuses what JSON cannot hold; this is the last guard, never a per-query failure
                json.dumps(value, allow_nan=False)
            except ValueError as exc:
                raise ExternalResultError(f"{self.system.name}: an answer cannot be stored as JSON ({exc})") from None
            rows.append((key, "external:" + self.system.key[:16], Jsonb(value)))
        with self.conn.transaction():
            with self.conn.cursor() as cur:
                # a stale cache (check_cache): the system's answers today replace the entries
                conflict = ("DO UPDATE SET hits = EXCLUDED.hits, created_at = now()" if self._replace
                            else "DO NOTHING")
                cur.executemany(
                    "INSERT INTO candidate_cache (cache_key, leg, strategy_id, hits) VALUES (%s, 'external', %s, %s)"
                    f" ON CONFLICT (cache_key) {conflict}", rows)

    def _ask(self, i: int, query: str, k: int) -> Answer:
        case = self.case_ids.get(query)
        where = f"{self.system.name}, {f'case {case}, ' if case else ''}query #{i + 1} {query[:60]!r}"
        t0 = time.perf_counter()
        try:
            answer = self.system.search(query, k, **self.system.params)
        except UserError as exc:
            raise type(exc)(f"{where}: {exc.message}", hint=exc.hint) from exc
        except Exception as exc:  # noqa: BLE001 - the system's own failure: one line, not a traceback
            raise ExternalResultError(f"{where}: the system raised {type(exc).__name__}: "
                                      f"{(str(exc).splitlines() or [''])[0][:200]}",
                                      hint="rerun with --debug (or HYDRA_FULL_ERROR=1) for its traceback") from exc
        ms = (time.perf_counter() - t0) * 1000
        return (read_result(answer, k, where, self.system.max_passage_chars, self.system.whole_documents,
                            self.system.bound), ms)

    def search_many(self, queries: Sequence[str], limit: int = 20,
                    on_query: Callable[[int], object] | None = None) -> list[RankedList]:
        """Answers in query order, each placed as soon as it is in; ``concurrency`` calls are in
        flight at a time, ahead of the placing. The first failure, in query order, ends the search
        at once: no further call is made (a service that never answers fails within one deadline,
        not one deadline per query of the batch), and so does an unplaced share certain to end
        above ``max_unplaced`` (see :meth:`check_unplaced`)."""
        done = on_query or (lambda n: None)
        self._texts = {}
        keys = [self._key(q, limit) for q in queries]
        found = self._cached(list(dict.fromkeys(keys)))
        todo = [i for i, key in enumerate(keys) if key not in found and key not in self._prefilled]
        pool = ThreadPoolExecutor(max_workers=self.system.concurrency) if todo else None
        futures: dict[int, Future] = {}
        pending = iter(todo)

        def submit(n: int) -> None:  # keep n more calls in flight (at most `concurrency`, in query order)
            for j in pending:
                futures[j] = pool.submit(self._ask, j, queries[j], limit)
                n -= 1
                if n <= 0:
                    return

        if pool is not None:
            submit(self.system.concurrency)
        fresh: list[tuple[str, list[Passage], float]] = []
        out = []
        try:
            for i, q in enumerate(queries):
                if i in futures:
                    passages, ms = futures.pop(i).result()  # the first failure (in query order) ends the run
                    submit(1)  # the next call runs while this answer is placed
                    fresh.append((keys[i], passages, ms))
                    self.stats.calls += 1
                    live = True
                elif keys[i] in found:
                    passages, ms = found[keys[i]]
                    self.stats.cached += 1
                    live = False
                else:  # asked live by check_cache: the run's answer
                    passages, ms = self._prefilled[keys[i]]
                    fresh.append((keys[i], passages, ms))
                    self.stats.calls += 1
                    live = True
                t0 = time.perf_counter()
                hits = self._place(i, q, passages)
                if self.per_query_records:
                    self.stats.harness_ms.append((time.perf_counter() - t0) * 1000)
                    self.stats.latencies.append((ms, live))
                self._queries_placed += 1
                out.append(RankedList(q, tuple(hits), ms))
                done(1)
                self.check_unplaced(limit)
        except ExternalResultError:
            if fresh:  # the answers in so far are good answers: a rerun need not ask for them again
                self._store(fresh)
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._store(fresh)
        return out

    def search(self, query: str, limit: int = 20) -> RankedList:
        return self.search_many([query], limit)[0]

    def _place(self, i: int, query: str, passages: list[Passage]) -> list[Hit]:
        hits: list[Hit] = []
        seen: set[tuple[str, int, int]] = set()
        for n, p in enumerate(passages, start=1):
            placement = self.placer.place(p, f"{self.system.name}, query #{i + 1} {query[:60]!r}, passage {n}")
            if placement.method in PLACED:
                span = (placement.doc.doc_id, placement.start, placement.end)
                # a fusion system returning one chunk twice: the repeat keeps its rank (the user sees
                # it there) and earns nothing (evaluation credits the first occurrence); counted here
                # besides its placement method
                if span in seen:
                    self.stats.alignment["duplicate"] += 1
                seen.add(span)
            elif self.per_query_records or not self.stats.failures:  # serving keeps the first, for check_unplaced
                self.stats.failures.append({"query": query, "rank": n, "document": p.document,
                                            "method": placement.method, "note": placement.note,
                                            "text": (p.text or "")[:300]})
            self.stats.alignment[placement.method] += 1
            hit = placed_hit(p, placement, len(hits) + 1)
            hits.append(hit)
            self._texts[hit.chunk_id] = (placement.doc.text[placement.start:placement.end]
                                         if placement.method in PLACED else (p.text or ""))
        return hits

    def chunk_texts(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        """The text of hits of the last search (what serving shows beside each hit)."""
        return {c: self._texts.get(c, "") for c in chunk_ids}

    def check_unplaced(self, limit: int | None = None) -> None:
        """Stop with one line when too many hits could not be placed: the metrics would then
        measure the placing, not the system. Called with the depth ``limit`` after each query (and
        with :attr:`planned_queries` known), it stops as soon as the share is certain to end above
        ``max_unplaced`` whatever the remaining queries bring (each at most ``limit`` hits, all
        placed); called without, it checks the share of the hits so far (the end of a run)."""
        a = self.stats.alignment
        total = sum(a.get(m, 0) for m in METHODS)
        unplaced = sum(a.get(m, 0) for m in METHODS if m not in PLACED)
        if not total or not unplaced:
            return
        if limit is None:
            if unplaced / total <= self.max_unplaced:
                return
            share = f"{unplaced} of {total} passages ({unplaced / total:.0%}) could not be placed in the corpus"
        else:
            if self.planned_queries is None:
                return
            most = total + max(self.planned_queries - self._queries_placed, 0) * limit  # the hits the run can have
            if unplaced / most <= self.max_unplaced:
                return
            share = (f"{unplaced} of the {total} passages of the first {self._queries_placed} queries could not be "
                     f"placed in the corpus: at least {unplaced / most:.0%} of the run's hits, whatever the other "
                     f"{max(self.planned_queries - self._queries_placed, 0)} queries return")
        missing_doc = a.get("unknown_document", 0)
        not_found = unplaced - missing_doc
        first_doc = next((f for f in self.stats.failures if f["method"] == "unknown_document"), None)
        first_text = next((f for f in self.stats.failures if f["method"] != "unknown_document"), None)
        causes = []
        if not_found:
            causes.append(f"{not_found} name a corpus document that does not hold them"
                          + (f" (the first, for {first_text['query'][:60]!r} at rank {first_text['rank']}: "
                             f"{first_text['method']}, {first_text['note']})" if first_text else ""))
        if missing_doc:
            causes.append(f"{missing_doc} name no corpus document"
                          + (f" (the first: {first_doc['document'][:80]!r})" if first_doc else ""))
        if missing_doc >= not_found:
            hint = ("does the system index the same corpus (corpus.path) and name documents by their source_uri "
                    "(or file name)?")
        else:
            hint = ("the documents are found but not the passages in them: does the system put metadata or headers "
                    "into the text (LlamaIndex metadata_mode='all', front matter), or count offsets from another "
                    "start (retrieval.external.offsets=raw|text)? Or index another version of the corpus?")
        raise ExternalResultError(
            f"{self.system.name}: {share} (at most {self.max_unplaced:.0%}: retrieval.external.max_unplaced); "
            + "; ".join(causes), hint=hint)

    def capability(self, kind: type) -> object | None:
        """The text of hits and the answer-cache counts (.protocol); no index of ours, no usage."""
        return self if kind in (ChunkTexts, CacheCounts) else None

    def cache_counts(self) -> dict[str, int]:
        return self.stats.cache_counts()
