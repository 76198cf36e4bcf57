"""A team's own retriever behind the same protocol as the built-in variants
(:class:`rag_experiments.retrieval.protocol.SearchSystem`): ``retrieval=external`` (a Python
target) and ``retrieval=http`` (a search service).

Per query: the system is asked for ``k`` passages (or they come from the cache), each passage is
read (:mod:`.passages`) and placed in the corpus text (:mod:`.placement`), duplicates of an
already placed span are dropped (counted), and the result is a :class:`RankedList` of hits in
the system's own order (ties are its business: nothing is re-sorted). Evaluation, tracking,
compare, promote and the gate then see what they see for a built-in variant.

Caching: the passages a system returned are stored in ``candidate_cache`` (leg ``external``) by
the system's identity (target and version: a declared ``retrieval.external.version``, else the
sha256 of the target module's file, else its package version; for ``http`` the URL), its
params, the query and k, so re-running and rescoring call nothing. ``retrieval.external.cache=
false`` for a system that changes under you.

Failures are loud: a target that cannot be imported or called, an answer that cannot be read,
an HTTP error after its retries, an exception in the system: one line naming the target (or URL)
and the query, exit 2, and no run is logged (a FINISHED run with partial numbers would be a
silently wrong number). Passages that cannot be placed are counted; above
``retrieval.external.max_unplaced`` of all hits the run stops.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..cache_key import cache_key
from ..errors import ConfigError, UserError
from ..types import Document, Hit, RankedList
from .external_params import ExternalParams, HttpParams, StoredParams
from .passages import ExternalResultError, Passage, read_result
from .placement import METHODS, PLACED, Placer, placed_hit

from .retriever import EXTERNAL_VARIANTS  # noqa: E402,F401 - one definition
CODE_VERSION = "1"  # bump when what a cached answer means changes


@dataclass(frozen=True)
class System:
    """A callable ``search(query, k, **params)`` with the identity its cache entries carry."""

    name: str  # the target spec or URL: what error lines name
    search: Callable[..., Any]
    identity: dict
    params: dict
    concurrency: int = 1

    @property
    def key(self) -> str:
        return cache_key("external-system", **self.identity, params=self.params, code=CODE_VERSION)


# -- a Python target ------------------------------------------------------------------------------
def _module_identity(module) -> str:
    path = getattr(module, "__file__", None)
    if path and os.path.isfile(path):
        with open(path, "rb") as f:
            return "file-sha256:" + hashlib.sha256(f.read()).hexdigest()
    top = module.__name__.split(".")[0]
    try:
        from importlib.metadata import version

        return f"package:{top}=={version(top)}"
    except Exception:  # noqa: BLE001 - no file, no distribution: only the name identifies it
        return f"module:{module.__name__}"


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
    identity = {"target": p.target, "version": p.version or _module_identity(module)}
    return System(p.target, search, identity, dict(p.params))


# -- an HTTP service ------------------------------------------------------------------------------
class HttpSearch:
    """POST ``{"query", "k", "params"}`` to the URL; retries connection errors, timeouts, 429 and
    5xx with exponential backoff; any other failure is one line naming the URL."""

    RETRY_STATUS = frozenset((429, 500, 502, 503, 504))

    def __init__(self, p: HttpParams) -> None:
        import httpx

        if not p.url:
            raise ConfigError("retrieval.http.url: not set", hint="retrieval=http retrieval.http.url=http://host/search")
        headers = {}
        if p.auth_env:
            value = os.environ.get(p.auth_env)
            if not value:
                raise ConfigError(f"retrieval.http.auth_env: ${p.auth_env} is not set",
                                  hint=f"export {p.auth_env}=... (its value is sent as the {p.auth_header} header "
                                  "and never logged)")
            headers[p.auth_header] = value
        self.p = p
        self.client = httpx.Client(timeout=p.timeout_s, headers=headers,
                                   limits=httpx.Limits(max_connections=p.concurrency))

    def __call__(self, query: str, k: int, **params: Any) -> Any:
        import httpx

        p = self.p
        wait = p.backoff_s
        body = ({"inputs": [query], "params": {"k": k, **params}} if p.format == "mlflow"
                else {"query": query, "k": k, "params": params})
        for attempt in range(p.retries + 1):
            last = attempt == p.retries
            try:
                r = self.client.post(p.url, json=body)
            except httpx.TransportError as exc:  # connection refused, timeout, reset
                if last:
                    raise ExternalResultError(f"POST {p.url}: {type(exc).__name__} after {p.retries + 1} attempt(s)"
                                              f" ({(str(exc).splitlines() or [''])[0]})",
                                              hint="is the service running? retrieval.http.timeout_s / .retries") from None
            else:
                if r.status_code < 300:
                    try:
                        answer = r.json()
                        if p.format == "mlflow" and isinstance(answer, dict) and "predictions" in answer:
                            return answer["predictions"]  # one row a hit: source_uri, start, end, text, score
                        return answer
                    except ValueError:
                        raise ExternalResultError(f"POST {p.url}: the answer is not JSON "
                                                  f"(HTTP {r.status_code}, {r.text[:80]!r})") from None
                if r.status_code not in self.RETRY_STATUS or last:
                    raise ExternalResultError(f"POST {p.url}: HTTP {r.status_code} ({r.text[:120].strip()!r})")
            time.sleep(wait)
            wait *= 2
        raise AssertionError("unreachable")


def load_http_target(p: HttpParams) -> System:
    return System(p.url or "", HttpSearch(p), {"target": "http", "url": p.url}, dict(p.params), p.concurrency)


def load_stored_run(p: StoredParams, queries_by_case: dict[str, str]) -> System:
    from pathlib import Path

    from ..config import project_path
    from .stored_run import StoredSearch

    if not p.path:
        raise ConfigError("retrieval.stored.path: not set", hint="rag-exp import-run FILE --format trec|jsonl")
    search = StoredSearch(project_path(p.path), p.format, queries_by_case)
    return System(str(p.path), search, {"target": "stored", "sha256": search.digest, "format": p.format}, {})


def load_system(variant: str, external: ExternalParams, http: HttpParams, stored: StoredParams | None = None,
                queries_by_case: dict[str, str] | None = None) -> System:
    if variant == "http":
        return load_http_target(http)
    if variant == "stored":
        if queries_by_case is None:
            raise ConfigError("retrieval=stored: a stored run answers only the golden set's cases it holds; it "
                              "cannot be searched or served", hint="search or serve the system itself "
                              "(retrieval=external or retrieval=http)")
        return load_stored_run(stored or StoredParams(), queries_by_case)
    return load_python_target(external)


# -- the retriever --------------------------------------------------------------------------------
@dataclass
class ExternalStats:
    calls: int = 0  # answers asked of the system
    cached: int = 0  # answers read from the cache
    alignment: Counter = field(default_factory=Counter)  # METHODS + "duplicate"
    failures: list = field(default_factory=list)  # unplaced passages, for alignment_failures.json
    harness_ms: list = field(default_factory=list)  # reading, placing and deduplicating, per query

    def cache_counts(self) -> dict[str, int]:
        return {"external_calls": self.calls, "external_cached": self.cached}

    def metrics(self) -> dict[str, float]:
        out = {f"alignment.{m}": float(self.alignment.get(m, 0)) for m in (*METHODS, "duplicate")}
        # the system's own latency is the run's latency_ms_p50/p95 (each RankedList carries it)
        if self.harness_ms:
            out["retrieval.harness_ms_per_query"] = statistics.fmean(self.harness_ms)
        return out


class ExternalRetriever:
    """The :class:`~.protocol.SearchSystem` of a team's retriever."""

    def __init__(self, system: System, docs: Sequence[Document], variant: str, conn=None, use_cache: bool = True,
                 max_unplaced: float = 0.1, per_query_records: bool = True) -> None:
        self.system = system
        self.variant = variant
        self.conn = conn
        self.use_cache = use_cache and conn is not None
        self.max_unplaced = max_unplaced
        self.placer = Placer(docs)
        self.stats = ExternalStats()
        # the per-query lists (unplaced passages, harness time) are a run's record; a served model
        # answers for the life of its process, so it keeps the counts only (bounded)
        self.per_query_records = per_query_records
        self.reranker = None  # the protocol's: an external system reranks itself
        self._texts: dict[str, str] = {}  # chunk id -> text of the last search's hits (chunk_texts)

    def _key(self, query: str, k: int) -> str:
        return cache_key("external-answer", system=self.system.key, q=query, k=k)

    def _cached(self, keys: list[str]) -> dict[str, tuple[list[Passage], float]]:
        if not self.use_cache or not keys:
            return {}
        rows = self.conn.execute("SELECT cache_key, hits FROM candidate_cache WHERE cache_key = ANY(%s)",
                                 (keys,)).fetchall()
        return {k: ([Passage.from_json(p) for p in v["passages"]], float(v["ms"])) for k, v in rows}

    def _store(self, fresh: list[tuple[str, list[Passage], float]]) -> None:
        if not self.use_cache or not fresh:
            return
        from psycopg.types.json import Jsonb

        sid = "external:" + self.system.key[:16]
        with self.conn.transaction():
            with self.conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO candidate_cache (cache_key, leg, strategy_id, hits) VALUES (%s, 'external', %s, %s)"
                    " ON CONFLICT (cache_key) DO NOTHING",
                    [(key, sid, Jsonb({"passages": [p.to_json() for p in ps], "ms": ms})) for key, ps, ms in fresh])

    def _ask(self, i: int, query: str, k: int) -> tuple[list[Passage], float]:
        where = f"{self.system.name}, query #{i + 1} {query[:60]!r}"
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
        return read_result(answer, k, where), ms

    def search_many(self, queries: Sequence[str], limit: int = 20,
                    on_query: Callable[[int], object] | None = None) -> list[RankedList]:
        done = on_query or (lambda n: None)
        self._texts = {}
        keys = [self._key(q, limit) for q in queries]
        found = self._cached(list(dict.fromkeys(keys)))
        todo = [i for i, key in enumerate(keys) if key not in found]
        answers: dict[int, tuple[list[Passage], float]] = {}
        if todo:
            with ThreadPoolExecutor(max_workers=self.system.concurrency) as pool:
                futures = {i: pool.submit(self._ask, i, queries[i], limit) for i in todo}
                for i in todo:
                    answers[i] = futures[i].result()  # the first failure (in query order) ends the run
            self._store([(keys[i], *answers[i]) for i in todo])
        self.stats.calls += len(todo)
        self.stats.cached += len(queries) - len(todo)
        out = []
        for i, q in enumerate(queries):
            passages, ms = answers[i] if i in answers else found[keys[i]]
            t0 = time.perf_counter()
            hits = self._place(i, q, passages)
            if self.per_query_records:
                self.stats.harness_ms.append((time.perf_counter() - t0) * 1000)
            out.append(RankedList(q, tuple(hits), ms))
            done(1)
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

    def check_unplaced(self) -> None:
        """Stop with one line when too many hits could not be placed: the metrics would then
        measure the placing, not the system."""
        a = self.stats.alignment
        total = sum(a.get(m, 0) for m in METHODS)
        unplaced = a.get("failed", 0) + a.get("unknown_document", 0)
        if total and unplaced / total > self.max_unplaced:
            first = self.stats.failures[0]
            raise ExternalResultError(
                f"{self.system.name}: {unplaced} of {total} passages ({unplaced / total:.0%}) could not be placed in "
                f"the corpus (at most {self.max_unplaced:.0%}: retrieval.external.max_unplaced); "
                f"{a.get('unknown_document', 0)} name no corpus document; the first, for {first['query'][:60]!r} "
                f"at rank {first['rank']}: {first['method']} ({first['note']})",
                hint="does the system index the same corpus (corpus.path) and name documents by their source_uri?")

    def ann_recall(self, queries) -> float:  # the protocol's; no index of ours to measure
        return float("nan")
