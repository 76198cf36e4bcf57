"""One experiment, end to end, from typed settings: ingest if needed, retrieve, evaluate.

No hydra, omegaconf or mlflow here (the pipeline layer adds those); this is what tests and the
benchmark drive directly.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import psycopg

from .chunk_index import IngestReport, StrategyInfo, check_language, ingest, strategy_info
from .collector import collector_paused
from .config import Settings
from .corpus.copies import indexed_documents
from .corpus.loader import DEMO, corpus_manifest, load_corpus
from .db.connect import connect, resolve_database_url
from .embedding.api import api_key
from .embedding.base import load_configured
from .embedding.cost import CostGate, usage_metrics
from .embedding.options import API_PROVIDERS
from .errors import DatabaseError
from .evaluation.evaluate import EvalResult, evaluate
from .golden.anchoring import drift_status, drift_warning
from .golden.copies_evidence import relocate_to_kept
from .golden.evidence_check import require_cases, require_same_corpus, require_scorable
from .golden.quality import quality_of
from .golden.resolve import GoldenSet, load_golden
from .paths import project_path
from .retrieval.external import ExternalRetriever, System
from .retrieval.failures import SearchOutcome, search_degrading
from .retrieval.filter_check import check_filters
from .retrieval.protocol import AnnIndex, CacheCounts, SearchSystem, Usage, capability
from .retrieval.systems import BuildInputs, build_system, system_type
from .scale.executors import embedding_executor
from .types import Hit, RankedList


@dataclass
class ExperimentResult:
    settings: Settings
    eval: EvalResult
    golden: GoldenSet
    ingest: IngestReport
    strategy: StrategyInfo
    embedding_model: str
    corpus_manifest: dict
    timings: dict[str, float] = field(default_factory=dict)
    cache: dict[str, int] = field(default_factory=dict)
    drift: dict[str, int] = field(default_factory=dict)  # labelled spans whose document changed
    results: dict[str, RankedList] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)  # paid API usage and cost (estimated and real)
    failed: dict[str, str] = field(default_factory=dict)  # case id -> why its query could not be searched
    external: dict[str, float] = field(default_factory=dict)  # a team's system: alignment counts, its latency
    external_tags: dict[str, str] = field(default_factory=dict)  # a team's system: its answer cache's check
    alignment_failures: list = field(default_factory=list)  # its passages that could not be placed
    golden_quality: dict = field(default_factory=dict)  # rag_experiments.golden.quality, for diagnostics.json
    started_at: float | None = None  # time.time() when the work began: the MLflow run's start time


def corpus_path(settings: Settings) -> str | Path:
    return DEMO if settings.corpus.path == DEMO else project_path(settings.corpus.path)


def open_database(settings: Settings) -> psycopg.Connection:
    return connect(resolve_database_url(settings.db.url, settings.db.pgdata_dir))


def collapse_to_documents(ranked: RankedList, doc_lengths: dict[str, int]) -> RankedList:
    """Document-level ranking: each document once, at its best chunk's rank, spanning the whole
    document (so a whole-document judgement matches it). Used for BEIR/TREC comparability."""
    seen: set[str] = set()
    hits: list[Hit] = []
    for h in ranked.hits:
        if h.doc_id in seen:
            continue
        seen.add(h.doc_id)
        hits.append(replace(h, start=0, end=doc_lengths[h.doc_id], rank=len(hits) + 1))
    return RankedList(ranked.query, tuple(hits), ranked.latency_ms)


def check_credentials(settings: Settings) -> None:
    """Every API key this run will need, before any work: a missing one names its variable."""
    if settings.embedding.name in API_PROVIDERS:
        api_key(settings.embedding.name, f"embedding={settings.embedding.name}")
    rerank = settings.rerank
    if system_type(settings.retrieval.variant).rerank and rerank.name in ("voyage", "cohere"):
        api_key(rerank.name, f"rerank={rerank.name}")


def load_settings_embedder(settings: Settings):
    return load_configured(settings.embedding.name, settings.embedding)


def load_checked_golden(settings: Settings) -> tuple[GoldenSet, list]:
    """The golden set (chain and manifest verified), with cases to score and every labelled span
    resolvable in the corpus, and the corpus documents. Raises GoldenSetError naming file:line."""
    golden = load_golden(settings.golden.file)
    require_cases(golden)
    docs = load_corpus(corpus_path(settings), settings.corpus.name)
    require_same_corpus(golden.path, golden.records, docs, str(settings.corpus.path))
    require_scorable(golden.path, golden.records, docs)  # a span that points at nothing is an error
    return golden, docs


def run_experiment(settings: Settings, conn: psycopg.Connection | None = None) -> ExperimentResult:
    """Load, ingest, retrieve, evaluate; the result carries when the work started (wall clock),
    so the MLflow run that records it starts there too, not when logging began."""
    started = time.time()
    result = _run_experiment(settings, conn)
    result.started_at = started
    return result


def _run_experiment(settings: Settings, conn: psycopg.Connection | None = None) -> ExperimentResult:
    timings: dict[str, float] = {}
    check_credentials(settings)
    t0 = time.perf_counter()
    # the golden set and the corpus first: a bad golden set stops the run before any other work
    golden, docs = load_checked_golden(settings)
    check_filters(settings.retrieval.filters, docs, str(settings.corpus.path))  # a filter matching nothing
    # corpus.copies: the documents indexed (all, or all but the copies) and the copies found, logged
    indexed, copies = indexed_documents(docs, settings.corpus.copies, settings.corpus.copy_threshold)
    builtin = system_type(settings.retrieval.variant).kind != "team"  # a team's system indexes itself
    manifest = corpus_manifest(indexed if builtin else docs)
    if copies is not None:
        manifest["copies"] = {"mode": settings.corpus.copies, **copies.to_json()}
        if settings.corpus.copies == "exclude" and builtin:
            if copies.exclusion_loss():  # a copy's own part (a template page's directives) goes with it
                warnings.warn(copies.exclusion_loss(), stacklevel=2)
            # labelled spans in the copies are scored on the same text in the documents kept
            moved = relocate_to_kept(golden, docs, copies.doc_ids, {c.doc_id: c.source for c in copies.copies})
            golden = moved.golden
            manifest["copies"].update(evidence_moved=moved.moved, evidence_unreachable=moved.unreachable)
            if moved.unreachable:
                warnings.warn(f"corpus.copies=exclude: {moved.unreachable} labelled span(s) of {settings.golden.file} "
                              f"lie in the {len(copies.copies)} excluded copies and no kept document has their text: "
                              "they cannot be retrieved (label the kept text, or run with corpus.copies=report)",
                              stacklevel=2)
    drift = drift_status(golden, docs)  # read-only: evaluation never writes the golden set
    message = drift_warning(drift, settings.golden.file, settings.corpus.path)
    if message:
        warnings.warn(message, stacklevel=2)
    quality = quality_of(golden, docs).to_json()
    timings["load_s"] = time.perf_counter() - t0
    if system_type(settings.retrieval.variant).kind == "team":  # a team's system: nothing of ours to ingest
        result = _run_external(settings, golden, docs, manifest, drift, timings, t0, conn)
        result.golden_quality = quality
        return result
    t = time.perf_counter()
    own_conn = conn is None
    conn = conn or open_database(settings)
    timings["db_connect_s"] = time.perf_counter() - t
    try:
        check_language(conn, settings.corpus.language)  # a language PostgreSQL lacks: before the model loads
        t = time.perf_counter()
        embedder = load_settings_embedder(settings)
        timings["model_load_s"] = time.perf_counter() - t
        gate = CostGate(embedder, confirm=settings.embedding.confirm)
        usage_before = getattr(embedder, "usage", None)

        t = time.perf_counter()
        executor = embedding_executor(settings.ingest, embedder, settings.embedding)
        report = ingest(conn, indexed, settings.chunking, embedder, settings.retrieval.hnsw, progress=settings.progress,
                        model_batch_size=settings.embedding.batch_size, before_paying=gate, executor=executor,
                        language=settings.corpus.language)
        timings["ingest_s"] = time.perf_counter() - t
        # the index the vector leg searches is part of its cache keys (a sweep over hnsw.m rebuilds it)
        strategy = strategy_info(conn, report.strategy_id, settings.retrieval.hnsw)

        retriever = build_system(BuildInputs(settings, conn, docs, strategy, embedder))
        cases = golden.scorable
        depth = settings.eval.depth_needed
        if settings.eval.level == "document":
            depth = max(depth, settings.fusion.depth * 2)

        def stored_lengths(_results) -> dict[str, int]:
            return dict(conn.execute(
                "SELECT doc_id, length(text) FROM documents WHERE corpus = %s", (report.corpus,)).fetchall())

        results, failed, ev = _search_and_score(retriever, golden, settings, depth, conn, timings, stored_lengths)
        ann = capability(retriever, AnnIndex)  # a vector leg's HNSW index
        if settings.eval.ann_recall_queries > 0 and ann is not None:
            t = time.perf_counter()
            ev.metrics["ann_recall_at_depth"] = ann.ann_recall(
                [c.query for c in cases if c.case_id not in failed][: settings.eval.ann_recall_queries])
            timings["ann_recall_s"] = time.perf_counter() - t
        timings["total_s"] = time.perf_counter() - t0
        usage = {**gate.metrics(), **usage_metrics(embedder, usage_before)}
        paid = capability(retriever, Usage)  # a paid reranker; query.rewrite: requests, cached, tokens, cost
        if paid is not None:
            usage.update(paid.usage())
        counts = capability(retriever, CacheCounts)
        return ExperimentResult(
            settings=settings, eval=ev, golden=golden, ingest=report, strategy=strategy,
            embedding_model=embedder.model_id, corpus_manifest=manifest, timings=timings,
            cache=counts.cache_counts() if counts is not None else {}, results=results, drift=drift, usage=usage,
            failed=failed,
            golden_quality=quality,
        )
    except psycopg.Error as exc:
        if conn.broken or conn.closed:  # the server went away mid-run: one line, not a traceback
            raise DatabaseError(f"the database connection was lost during the run "
                                f"({type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]})",
                                hint="is the server still running? `rag-exp db status`; then rerun") from exc
        raise
    finally:
        if own_conn:
            conn.close()


def _search_and_score(retriever, golden: GoldenSet, settings: Settings, depth: int, conn, timings: dict[str, float],
                      doc_lengths, after_search=None) -> tuple[dict[str, RankedList], dict[str, str], EvalResult]:
    """The part of a run every system shares, built-in or a team's: search every scorable case
    (a query that fails is counted apart, never scored as a miss), at ``eval.level=document`` each
    document once at its best rank (``doc_lengths(results)``: its length, so a whole-document
    judgement matches), then evaluate. ``after_search``: a check between the two (a team's
    unplaced share)."""
    cases = golden.scorable
    t = time.perf_counter()
    outcome = _search_with_progress(retriever, [c.query for c in cases], depth, settings.progress, conn)
    timings["retrieval_s"] = time.perf_counter() - t
    if after_search is not None:
        after_search()
    results = {c.case_id: r for c, r in zip(cases, outcome.ranked) if r is not None}
    failed = {cases[i].case_id: why for i, why in sorted(outcome.failed.items())}
    if settings.eval.level == "document":
        lengths = doc_lengths(results)
        results = {cid: collapse_to_documents(r, lengths) for cid, r in results.items()}
    t = time.perf_counter()
    with collector_paused():
        ev = evaluate(golden, results, settings.eval, failed=tuple(failed))
    timings["evaluate_s"] = time.perf_counter() - t
    return results, failed, ev


def _run_external(settings: Settings, golden: GoldenSet, docs: list, manifest: dict, drift: dict,
                  timings: dict[str, float], t0: float, conn: psycopg.Connection | None) -> ExperimentResult:
    """A team's own system through the same protocol: its passages placed in the corpus, then the
    same search loop, evaluation and result as a built-in variant. The database is opened only
    for the answer cache; nothing is ingested (the system indexes its documents itself)."""
    use_cache = system_type(settings.retrieval.variant).needs_database(settings)  # its answer cache
    own_conn = conn is None and use_cache
    if own_conn:
        t = time.perf_counter()
        conn = open_database(settings)
        timings["db_connect_s"] = time.perf_counter() - t
    try:
        t = time.perf_counter()
        retriever = build_system(BuildInputs(settings, conn if use_cache else None, docs,  # import/URL/auth problems
                                             queries_by_case={c.case_id: c.query for c in golden.scorable}))
        timings["model_load_s"] = time.perf_counter() - t
        if not isinstance(retriever, ExternalRetriever):
            raise TypeError(f"retrieval.variant={settings.retrieval.variant}: a team system builds an ExternalRetriever")
        system = retriever.system
        retriever.planned_queries = len(golden.scorable)  # the run stops once its unplaced share is certain
        retriever.case_ids = {c.query: c.case_id for c in golden.scorable}
        # cached answers prove themselves: a sample re-asked live first (retrieval.answer_check)
        check = retriever.check_cache([c.query for c in golden.scorable], settings.eval.depth_needed)

        def corpus_lengths(results) -> dict[str, int]:  # a whole document it names that is not ours: length 0
            lengths = {d.doc_id: len(d.text) for d in docs}
            return {**{h.doc_id: 0 for rl in results.values() for h in rl.hits if h.doc_id not in lengths}, **lengths}

        results, failed, ev = _search_and_score(retriever, golden, settings, settings.eval.depth_needed,
                                                conn if use_cache else None, timings, corpus_lengths,
                                                after_search=retriever.check_unplaced)
        timings["total_s"] = time.perf_counter() - t0
        strategy, report = external_index(settings, system, docs)
        extra = {**retriever.stats.metrics(), **check.metrics()}
        from .retrieval.stored_run import StoredSearch

        if isinstance(system.search, StoredSearch):  # a stored run: cases it holds no list for (scored as empty)
            extra["alignment.missing_queries"] = float(system.search.missing)
        return ExperimentResult(
            settings=settings, eval=ev, golden=golden, ingest=report, strategy=strategy,
            embedding_model=f"external:{system.identity.get('version') or system.name}"[:250],
            corpus_manifest=manifest, timings=timings, cache=retriever.cache_counts(), results=results,
            drift=drift, failed=failed, external=extra, external_tags=check.tags(),
            alignment_failures=list(retriever.stats.failures),
        )
    finally:
        if own_conn:
            conn.close()


class ExternalIndex(IngestReport):
    """What stands where a built-in run reports its ingest: the system indexes its documents itself."""

    def summary(self) -> str:
        return f"{self.strategy_id}: nothing ingested here (the system indexes the {self.n_documents} documents itself)"


def external_index(settings: Settings, system: System, docs: list) -> tuple[StrategyInfo, IngestReport]:
    """The external system as a strategy (its id is the system's identity): the run's `strategy`
    tag tells two systems, or two versions of one, apart."""
    sid = "external:" + system.key[:16]
    corpus = settings.corpus.name or str(settings.corpus.path)
    info = StrategyInfo(sid, corpus, settings.retrieval.variant, {**system.identity, "params": system.params},
                        "external", 0, system.key, 0)
    return info, ExternalIndex(sid, corpus, len(docs), 0, 0, 0, 0, 0, 0.0, True)


#: seconds of retrieval before its progress bar shows (tqdm's ``delay``)
PROGRESS_DELAY_S = 1.0


def _search_with_progress(retriever: SearchSystem, queries: list[str], limit: int, progress: bool,
                          conn: psycopg.Connection | None) -> SearchOutcome:
    """Batches of queries (cached work is fetched in bulk); the bar moves after every query, so a
    slow one (a reranker: seconds a query) still shows progress, and appears only once the
    retrieval has taken a second: a sweep point on cached legs (~0.1 s) printed a finished bar,
    100 of them in a 100-point sweep's log. A query that fails on its own is counted, not fatal
    (see :mod:`rag_experiments.retrieval.failures`)."""
    bar = None
    if progress and len(queries) > 1:
        from tqdm import tqdm

        bar = tqdm(total=len(queries), desc=f"retrieval ({retriever.variant})", unit="query",
                   mininterval=0.5, delay=PROGRESS_DELAY_S)
    on_query = None if bar is None else bar.update
    try:
        with collector_paused():  # the memo of candidate lists grows here (rag_experiments/collector.py)
            return search_degrading(lambda qs: retriever.search_many(qs, limit, on_query=on_query), queries,
                                    conn, batch=50)
    finally:
        if bar is not None:
            bar.close()
