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

from .config import Settings, project_root
from .corpus.loader import DEMO, corpus_manifest, load_corpus
from .db.connect import connect, resolve_database_url
from .embedding import load_embedder
from .evaluation.evaluate import EvalResult, evaluate
from .golden.anchoring import drift_status, drift_warning
from .golden.resolve import GoldenSet, load_golden
from .retrieval.retriever import Retriever
from .store import IngestReport, ingest, strategy_info
from .types import Hit, RankedList


@dataclass
class ExperimentResult:
    settings: Settings
    eval: EvalResult
    golden: GoldenSet
    ingest: IngestReport
    strategy: dict
    embedding_model: str
    corpus_manifest: dict
    timings: dict[str, float] = field(default_factory=dict)
    cache: dict[str, int] = field(default_factory=dict)
    drift: dict[str, int] = field(default_factory=dict)  # labelled spans whose document changed
    results: dict[str, RankedList] = field(default_factory=dict)


def corpus_path(settings: Settings) -> str | Path:
    if settings.corpus_path == DEMO:
        return DEMO
    p = Path(settings.corpus_path).expanduser()
    return p if p.is_absolute() else project_root() / p


def open_database(settings: Settings) -> psycopg.Connection:
    return connect(resolve_database_url(settings.db_url, settings.pgdata))


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


def run_experiment(settings: Settings, conn: psycopg.Connection | None = None) -> ExperimentResult:
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    own_conn = conn is None
    conn = conn or open_database(settings)
    timings["db_connect_s"] = time.perf_counter() - t0
    try:
        t = time.perf_counter()
        golden = load_golden(settings.golden_path)  # fail fast on a bad golden set, before ingest
        docs = load_corpus(corpus_path(settings), settings.corpus_name)
        manifest = corpus_manifest(docs)
        drift = drift_status(golden, docs)  # read-only: evaluation never writes the golden set
        message = drift_warning(drift, settings.golden_path, settings.corpus_path)
        if message:
            warnings.warn(message, stacklevel=2)
        timings["load_s"] = time.perf_counter() - t

        t = time.perf_counter()
        embedder = load_embedder(settings.embedding_name)
        timings["model_load_s"] = time.perf_counter() - t

        t = time.perf_counter()
        report = ingest(conn, docs, settings.chunking, embedder, settings.hnsw, progress=settings.progress,
                        model_batch_size=settings.embedding_batch_size)
        timings["ingest_s"] = time.perf_counter() - t
        strategy = strategy_info(conn, report.strategy_id)

        retriever = Retriever(conn, strategy, embedder, settings.retrieval)
        cases = golden.scorable
        depth = settings.eval.depth_needed
        if settings.eval_level == "document":
            depth = max(depth, settings.retrieval.fusion.depth * 2)
        t = time.perf_counter()
        ranked = _search_with_progress(retriever, [c.query for c in cases], depth, settings.progress)
        timings["retrieval_s"] = time.perf_counter() - t
        results = {c.case_id: r for c, r in zip(cases, ranked)}
        if settings.eval_level == "document":
            lengths = dict(conn.execute(
                "SELECT doc_id, length(text) FROM documents WHERE corpus = %s", (report.corpus,)).fetchall())
            results = {cid: collapse_to_documents(r, lengths) for cid, r in results.items()}

        t = time.perf_counter()
        ev = evaluate(golden, results, settings.eval)
        timings["evaluate_s"] = time.perf_counter() - t
        if settings.ann_recall_queries > 0 and settings.retrieval.variant != "keyword":
            t = time.perf_counter()
            ev.metrics["ann_recall_at_depth"] = ann_recall(
                conn, strategy, retriever, [c.query for c in cases][: settings.ann_recall_queries])
            timings["ann_recall_s"] = time.perf_counter() - t
        timings["total_s"] = time.perf_counter() - t0
        return ExperimentResult(
            settings=settings, eval=ev, golden=golden, ingest=report, strategy=strategy,
            embedding_model=embedder.model_id, corpus_manifest=manifest, timings=timings,
            cache=vars(retriever.stats).copy(), results=results, drift=drift,
        )
    finally:
        if own_conn:
            conn.close()


_ANN_MEMO: dict[tuple, float] = {}


def ann_recall(conn: psycopg.Connection, strategy: dict, retriever: Retriever, queries: list[str]) -> float:
    """Mean share of the exact top-``depth`` neighbours that the HNSW index returns, so a too-low
    ``ef_search`` (or ``m``/``ef_construction``) shows up in MLflow next to the metrics."""
    from .retrieval.legs import vector_search

    p = retriever.params
    key = (strategy["strategy_id"], strategy["content_digest"], p.fusion.depth, p.ef_search, p.filters, tuple(queries))
    if key in _ANN_MEMO:
        return _ANN_MEMO[key]
    retriever.embed_queries(queries)
    shares = []
    for q in queries:
        qvec = retriever._qvec[q]
        approx = vector_search(conn, strategy["strategy_id"], qvec, p.fusion.depth, strategy["dim"], p.filters,
                               ef_search=p.ef_search)
        exact = vector_search(conn, strategy["strategy_id"], qvec, p.fusion.depth, strategy["dim"], p.filters,
                              exact=True)
        if exact:
            shares.append(len({h.chunk_id for h in approx} & {h.chunk_id for h in exact}) / len(exact))
    value = sum(shares) / len(shares) if shares else float("nan")
    _ANN_MEMO[key] = value
    return value


def _search_with_progress(retriever: Retriever, queries: list[str], limit: int, progress: bool) -> list[RankedList]:
    """Batches of queries (cached work is fetched in bulk); the bar moves after every query, so
    a slow one (a reranker: seconds a query) still shows progress."""
    out: list[RankedList] = []
    batch = 50
    bar = None
    if progress and len(queries) > 1:
        from tqdm import tqdm

        bar = tqdm(total=len(queries), desc=f"retrieval ({retriever.params.variant})", unit="query",
                   mininterval=0.5)
    for lo in range(0, len(queries), batch):
        out.extend(retriever.search_many(queries[lo : lo + batch], limit,
                                         on_query=None if bar is None else bar.update))
    if bar is not None:
        bar.close()
    return out
