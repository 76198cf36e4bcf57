"""The benchmark: where time and memory go. A script that prints numbers, not a test.

    python -m rag_experiments.bench                 # or: make bench / rag-exp bench
    python -m rag_experiments.bench --strategies heading --queries 100
    python -m rag_experiments.bench --corpus /tmp/pgfull/corpus --corpus-name pg15full \
        --strategies heading --skip metrics       # the same table on another corpus

Runs in a throwaway database on the configured server (embedded by default), so "cold" is
really cold (no chunks, no embedding cache, no candidate cache), and drops it afterwards.

Sections (one table, with the machine described):
* ingest: chunks/s per chunking strategy, next to the raw embedding model's passages/s on the
  same texts (their ratio shows how close ingest is to the model's speed limit);
* query latency p50/p95 per variant, next to the bare pgvector KNN and bare full-text queries
  (the database floor); the keyword leg with ts_rank and with BM25, and hybrid with each next to
  bare KNN + bare full-text;
* rerank: the configured reranker's time per query and per pair, cold and from its cache, and the
  pairs a raised ``rerank.cutoff`` scores anew (:mod:`.bench_rerank`);
* BM25 statistics: storage per 10k chunks and the time to write them for the default strategy;
* serving: the default config's ``Retriever.search`` vs the pyfunc model's ``predict`` on warm
  queries, and requests/s of ``mlflow models serve`` with 1 worker;
* evaluation wall time on the demo golden set per variant: cold (caches empty), warm (same
  config again), and a marginal sweep point (only ``rrf_k`` changed);
* a second chunking strategy ingested into a database holding (and having analysed) another one,
  beside the same strategy in a fresh database (``shared``, :mod:`.bench_shared_db`; issue 58:
  the BM25 pack build went from a hash join to a nested loop there); ``--shared-chunks`` sizes it;
  run only when asked for: ``rag-exp bench --only shared``;
* the HNSW noise floor (``noise``): the default strategy's HNSW index built ``--noise-builds`` times,
  the golden set run on each build with ``retrieval.vector.search=hnsw`` (``--noise-variant``), every
  pair of builds compared case by case; the floor (largest |Δ of the mean| per metric and query kind)
  is written to ``experiments/noise_floor.json``, where promote and the gate read it
  (``--only noise`` runs this section alone);
* metric computation against ranx on the same qrels and run;
* peak RSS of a default run (measured in a child process);
* the 100-point sweep ``python run.py -m "fusion.rrf_k=range(5,105,5)"
  fusion.keyword_weight=0.5,0.75,1.0,1.25,1.5``, wall time of each repeat and their median
  (``--sweep-repeats``; the store is a throwaway MLflow store, so nothing lands in ``mlruns/``),
  and the metrics a sweep point logs.

``--corpus`` runs every section on another corpus (e.g. the whole manual imported with
``rag-exp corpus import-html``); the evaluation still uses the configured golden set, which
resolves wherever its documents are part of that corpus.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg

from .bench_rerank import bench_rerank
from .bench_shared_db import bench_shared_db

if TYPE_CHECKING:
    from .retrieval.retriever import RetrievalParams


def _machine() -> str:
    cpu = "unknown cpu"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    import onnxruntime

    return (f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, Python {platform.python_version()}, "
            f"onnxruntime {onnxruntime.__version__}")


def reference_workload_s(repeats: int = 3) -> float:
    """Seconds one core takes for a fixed pure-Python task (median of ``repeats``): a gauge of this
    machine's speed at the moment of the bench, since a shared VM's speed moves with its host's
    load (the same sweep code measured 57-64 s early one morning and 31-44 s a few hours later). Compare benches by
    their times divided by this, not only by their times."""
    import statistics

    def task() -> int:
        acc = 0
        for i in range(6_000_000):
            acc = (acc + i * i) % 1_000_003
        return acc

    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        task()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def cpu_steal_s() -> float:
    """CPU time this VM's host gave to others while this VM wanted it (``/proc/stat`` steal),
    seconds summed over cores since boot; 0 where the kernel does not report it."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK") if fields[0] == "cpu" and len(fields) > 8 else 0.0
    except (OSError, ValueError):
        return 0.0


def _pct(values: list[float], q: float) -> float:
    vs = sorted(values)
    return vs[min(len(vs) - 1, int(round(q * (len(vs) - 1))))]


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str]] = []

    def add(self, section: str, what: str, value: str) -> None:
        self.rows.append((section, what, value))
        print(f"  {section:10s} {what:58s} {value}", flush=True)

    def render(self) -> str:
        w = max(len(r[1]) for r in self.rows)
        out = [f"| section | measurement{' ' * (w - 11)} | value |", f"| --- | {'-' * w} | --- |"]
        out += [f"| {s} | {m}{' ' * (w - len(m))} | {v} |" for s, m, v in self.rows]
        return "\n".join(out)


def bench_ingest(conn, docs, embedder, strategies, table: Table) -> None:
    from .chunking import ChunkingParams, chunk_corpus
    from .chunk_index import ingest

    presets = {"heading": ChunkingParams("heading", 200, 0, True), "fixed": ChunkingParams("fixed", 128, 32, False),
               "paragraph": ChunkingParams("paragraph", 200, 0, False)}
    for name in strategies:
        params = presets[name]
        chunks = chunk_corpus(docs, params, embedder)
        texts = [c.indexed_text for c in chunks]
        sample = texts[:: max(1, len(texts) // 600)]  # a uniform sample: same length mix as the ingest
        t = time.perf_counter()
        embedder.embed(sample)
        raw = len(sample) / (time.perf_counter() - t)
        report = ingest(conn, docs, params, embedder, shipped_vectors=False)  # the model, not the shipped file
        cold = report.n_chunks / report.seconds
        again = ingest(conn, docs, params, embedder, shipped_vectors=False)
        table.add("ingest", f"{name}: raw model passages/s (same texts, {len(sample)} sampled uniformly)", f"{raw:.1f}")
        table.add("ingest", f"{name}: cold ingest chunks/s ({report.n_chunks} chunks, {report.seconds:.1f}s)",
                  f"{cold:.1f} (model/ingest time ratio {raw / cold:.2f}x)")
        table.add("ingest", f"{name}: unchanged re-run", f"{again.seconds:.3f}s")
    size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('chunks'))").fetchone()[0]
    table.add("ingest", "chunks table incl. indexes (all strategies)", size)


def bench_latency(conn, strategy, embedder, queries, table: Table, params: RetrievalParams | None = None) -> None:
    from .retrieval.legs import TSQUERY_MODES, set_vector_session
    from .retrieval.retriever import VARIANTS, Retriever, RetrievalParams

    qvecs = embedder.embed(queries)
    knn = (f"SELECT chunk_id FROM chunks WHERE strategy_id = %(sid)s "
           f"ORDER BY embedding::vector({strategy.dim}) <=> %(q)s::vector({strategy.dim}) LIMIT 50")
    fts = ("SELECT chunk_id FROM chunks WHERE strategy_id = %(sid)s AND tsv @@ plainto_tsquery('english', %(t)s) "
           "ORDER BY ts_rank(tsv, plainto_tsquery('english', %(t)s)) DESC LIMIT 50")
    # the OR tsquery the keyword leg matches with (TSQUERY_MODES["or"]), ranked by ts_rank alone:
    # the floor of a keyword leg that must see every chunk sharing a word with the question
    or_q = TSQUERY_MODES["or"].replace("%(q)s", "%(t)s")
    fts_or = (f"SELECT chunk_id FROM chunks WHERE strategy_id = %(sid)s AND tsv @@ ({or_q}) "
              f"ORDER BY ts_rank(tsv, ({or_q})) DESC LIMIT 50")
    bare: dict[str, float] = {}
    for key, label, sql_text in (("knn", "bare pgvector KNN (depth 50)", knn),
                                 ("fts", "bare full-text query (AND, depth 50)", fts),
                                 ("fts_or", "bare full-text query (OR, depth 50)", fts_or)):
        times = []
        for q, v in zip(queries, qvecs):
            t = time.perf_counter()
            with conn.transaction():
                set_vector_session(conn, 50, False)
                conn.execute(sql_text, {"sid": strategy.strategy_id, "q": v, "t": q}).fetchall()
            times.append((time.perf_counter() - t) * 1000)
        table.add("latency", f"{label} p50 / p95 ms", f"{_pct(times, .5):.1f} / {_pct(times, .95):.1f}")
        bare[key] = _pct(times, .5)
    bench_keyword_ranks(conn, strategy, embedder, queries, table, bare)
    # the configured keyword leg, fusion and rerank (these rows once timed the dataclass default,
    # then ts_rank, under the configured bm25's name; both rank with bm25 now, and the row says which)
    params = params or RetrievalParams()
    rank = params.keyword.rank
    for variant in VARIANTS:
        r = Retriever(conn, strategy, embedder, replace(params, variant=variant, use_cache=False))
        r.embed_queries(queries)  # query embedding is reported separately below
        times = []
        for q in queries:
            t = time.perf_counter()
            r.search(q, 20)
            times.append((time.perf_counter() - t) * 1000)
        what = f"{variant} (uncached legs) p50 / p95 ms" + ("" if variant == "vector" else f", keyword rank={rank}")
        table.add("latency", what, f"{_pct(times, .5):.1f} / {_pct(times, .95):.1f}")
    t = time.perf_counter()
    for q in queries:
        embedder.embed([q])
    table.add("latency", "query embedding, one at a time, mean ms", f"{(time.perf_counter() - t) * 1000 / len(queries):.1f}")


def bench_serving(url: str, queries: list[str], table: Table, overrides: list[str] = (), k: int = 10,
                  repeats: int = 3) -> None:
    """The default config served: ``Retriever.search`` in process vs the pyfunc model's ``predict``
    on the same warm queries (target: within 1.2x), then requests/s of ``mlflow models serve``
    with 1 worker, one sequential client on 127.0.0.1 (so it is latency-bound, not a load test)."""
    import json
    import signal
    import socket
    import tempfile
    import urllib.request

    import mlflow
    from omegaconf import OmegaConf

    from .session import compose_settings
    from .serving import Retriever
    from .serving.model_logging import manifest, model_config, save_model

    previous = os.environ.get("DATABASE_URL")
    os.environ["DATABASE_URL"] = url  # the retriever, the model and the server all use the bench database
    try:
        _, cfg = compose_settings(["progress=false", "tracking.enabled=false", *overrides])
        config = model_config(OmegaConf.to_container(cfg, resolve=True))
        r = Retriever.from_config(config)
        digest = r.strategy.content_digest
        info = manifest(config, {"corpus_digest": digest, "strategy": r.strategy.strategy_id}, name="bench",
                        run_id="", run_name="bench", metric="recall_at_5", metrics={}, forced=False, source="bench")

        def warm_times(fn) -> list[float]:
            for q in queries:
                fn(q)  # warm: embedder loaded, connection open, query embedded once
            out = []
            for _ in range(repeats):
                for q in queries:
                    t = time.perf_counter()
                    fn(q)
                    out.append((time.perf_counter() - t) * 1000)
            return out

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "model"
            save_model(path, config, {**info, "corpus_digest": digest})
            model = mlflow.pyfunc.load_model(str(path))
            # interleaved, query by query, so a load change on a shared machine hits both alike
            search_ms, predict_ms = [], []
            for q in queries:
                r.search(q, k)
                model.predict([q], params={"k": k})
            for _ in range(repeats):
                for q in queries:
                    for fn, out in ((lambda: r.search(q, k), search_ms),
                                    (lambda: model.predict([q], params={"k": k}), predict_ms)):
                        t = time.perf_counter()
                        fn()
                        out.append((time.perf_counter() - t) * 1000)
            table.add("serving", f"Retriever.search, warm query, k={k}: p50 / p95 ms",
                      f"{_pct(search_ms, .5):.1f} / {_pct(search_ms, .95):.1f}")
            table.add("serving", f"pyfunc predict([q]), warm query, k={k}: p50 / p95 ms (ratio of p50s)",
                      f"{_pct(predict_ms, .5):.1f} / {_pct(predict_ms, .95):.1f} "
                      f"({_pct(predict_ms, .5) / _pct(search_ms, .5):.2f}x)")
            r.close()

            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
            proc = subprocess.Popen([sys.executable, "-m", "mlflow", "models", "serve", "-m", str(path),
                                     "--env-manager", "local", "-h", "127.0.0.1", "-p", str(port), "-w", "1"],
                                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True)
            try:
                base = f"http://127.0.0.1:{port}"
                t0 = time.perf_counter()
                while True:
                    try:
                        urllib.request.urlopen(base + "/ping", timeout=2).close()
                        break
                    except OSError:
                        if proc.poll() is not None or time.perf_counter() - t0 > 180:
                            raise RuntimeError("mlflow models serve did not start") from None
                        time.sleep(0.2)
                startup = time.perf_counter() - t0

                def call(q: str) -> None:
                    body = json.dumps({"inputs": [q], "params": {"k": k}}).encode()
                    req = urllib.request.Request(base + "/invocations", data=body,
                                                 headers={"Content-Type": "application/json"})
                    with urllib.request.urlopen(req, timeout=60) as resp:
                        resp.read()

                http_ms = warm_times(call)
                rps = 1000 * len(http_ms) / sum(http_ms)
                table.add("serving", "mlflow models serve (1 worker): startup to /ping, s", f"{startup:.1f}")
                table.add("serving", f"served, warm query over HTTP, k={k}: p50 / p95 ms; requests/s (1 client)",
                          f"{_pct(http_ms, .5):.1f} / {_pct(http_ms, .95):.1f}; {rps:.1f}/s")
            finally:
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.killpg(proc.pid, sig)
                        proc.wait(timeout=20)
                        break
                    except (ProcessLookupError, subprocess.TimeoutExpired):
                        continue
    finally:
        if previous is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = previous


def bench_keyword_ranks(conn, strategy, embedder, queries, table: Table, bare: dict[str, float]) -> None:
    """The keyword leg per rank function (next to the bare full-text query), and hybrid with each
    (next to bare KNN + bare full-text, the database floor of two legs)."""
    from .retrieval.legs import KeywordParams, keyword_search
    from .retrieval.retriever import Retriever, RetrievalParams

    floor = bare["knn"] + bare["fts"]
    floor_or = bare["knn"] + bare["fts_or"]
    for rank in ("ts_rank", "bm25"):
        kw = KeywordParams(rank=rank)
        times = []
        for q in queries:
            t = time.perf_counter()
            keyword_search(conn, strategy.strategy_id, q, 50, kw)
            times.append((time.perf_counter() - t) * 1000)
        table.add("latency", f"keyword leg, rank={rank} (OR, depth 50) p50 / p95 ms",
                  f"{_pct(times, .5):.1f} / {_pct(times, .95):.1f}")
        r = Retriever(conn, strategy, embedder, RetrievalParams(variant="hybrid", keyword=kw, use_cache=False))
        r.embed_queries(queries)
        times = []
        for q in queries:
            t = time.perf_counter()
            r.search(q, 20)
            times.append((time.perf_counter() - t) * 1000)
        table.add("latency", f"hybrid, rank={rank} (uncached legs) p50 ms; / (bare KNN + bare FTS p50 {floor:.1f})",
                  f"{_pct(times, .5):.1f} ({_pct(times, .5) / floor:.2f}x)")
        table.add("latency", f"hybrid, rank={rank}: / (bare KNN + bare OR FTS p50 {floor_or:.1f}), for scale",
                  f"{_pct(times, .5) / floor_or:.2f}x")


def bench_bm25_statistics(conn, strategy, ingest_seconds: float | None, table: Table) -> None:
    """What the BM25 statistics cost: storage per 10k chunks (all strategies of the run) and the
    time to write them for the whole default strategy (in a rolled-back transaction)."""
    from . import bm25_stats

    size, n_chunks = conn.execute(
        "SELECT pg_total_relation_size('bm25_postings') + pg_total_relation_size('bm25_stats')"
        " + pg_total_relation_size('bm25_df'),"
        " (SELECT count(*) FROM chunks)").fetchone()
    table.add("bm25", f"statistics storage (postings + document frequencies + totals, {n_chunks} chunks), MB per 10k chunks",
              f"{size / 2**20 * 10_000 / max(n_chunks, 1):.1f}")
    tsv_size = conn.execute("SELECT pg_total_relation_size('chunks_tsv_gin')").fetchone()[0]
    table.add("bm25", "for scale: the tsvector GIN index, MB per 10k chunks", f"{tsv_size / 2**20 * 10_000 / max(n_chunks, 1):.1f}")
    sid = strategy.strategy_id
    docs = [r[0] for r in conn.execute("SELECT DISTINCT doc_id FROM chunks WHERE strategy_id = %s", (sid,))]
    t = time.perf_counter()
    try:
        with conn.transaction():
            removed = bm25_stats.remove_documents(conn, sid, docs)
            added = bm25_stats.add_documents(conn, sid, docs)
            bm25_stats.update_totals(conn, sid, strategy.n_chunks, removed, added)
            raise _Rollback
    except _Rollback:
        pass
    seconds = time.perf_counter() - t
    share = f" ({100 * seconds / ingest_seconds:.1f}% of its cold ingest)" if ingest_seconds else ""
    table.add("bm25", f"statistics of the default strategy written from scratch ({strategy.n_chunks} chunks), s",
              f"{seconds:.2f}{share}")


class _Rollback(Exception):
    pass


def _forget_in_process_caches() -> None:
    """Cold means cold: also drop the in-process memos a previous variant filled."""
    from .retrieval.retriever import MEMO

    MEMO.clear()


def bench_evaluation(url: str, settings, table: Table) -> None:
    from .experiment import run_experiment

    conn = psycopg.connect(url, autocommit=True)
    for variant in ("vector", "keyword", "hybrid", "hybrid_rerank"):
        s = replace(settings, retrieval=replace(settings.retrieval, variant=variant))
        conn.execute("TRUNCATE candidate_cache, rerank_cache")
        _forget_in_process_caches()
        conn.execute("DELETE FROM embedding_cache WHERE length(text_hash) = 64 AND text_hash NOT IN "
                     "(SELECT text_hash FROM chunks)")  # forget query embeddings, keep chunk ones
        from .db.connect import connect

        c = connect(url)
        t = time.perf_counter()
        cold = run_experiment(s, c)
        cold_s = time.perf_counter() - t
        t = time.perf_counter()
        run_experiment(s, c)
        warm_s = time.perf_counter() - t
        marginal = replace(s, fusion=replace(s.fusion, rrf_k=s.fusion.rrf_k + 17))
        t = time.perf_counter()
        run_experiment(marginal, c)
        marg_s = time.perf_counter() - t
        c.close()
        table.add("eval", f"{variant}: cold / warm / rrf_k-only point, s ({cold.eval.n_cases} cases)",
                  f"{cold_s:.2f} / {warm_s:.2f} ({100 * warm_s / cold_s:.0f}%) / {marg_s:.2f} ({100 * marg_s / cold_s:.0f}%)")
    conn.close()


NOISE_METRICS = ("recall_at_5", "recall_at_20", "mrr_at_10", "ndcg_at_10")


def bench_noise(url: str, settings, table: Table, builds: int = 4, variant: str = "hybrid",
                write: bool = True) -> None:
    """The HNSW noise floor (issue 45): the default strategy's HNSW index dropped and built again
    ``builds`` times (pgvector draws each node's layer at random: every build is another graph), the
    golden set run on each with ``retrieval.vector.search=hnsw``, and every pair of builds compared
    case by case. Rows: cases whose lists moved, per metric the largest |Δ of the mean| (the floor) and
    the most cases that differed. The floor is recorded in ``experiments/noise_floor.json`` of the
    project (tracking.noise_floor), where promote and the gate read it."""
    from datetime import datetime, timezone

    from .chunk_index import ensure_hnsw_index, hnsw_index_name
    from .db.connect import connect
    from .experiment import run_experiment
    from .tracking.noise_floor import NoiseFloor, measure, write_floor

    if builds < 2:
        return
    r = settings.retrieval
    s = replace(settings, retrieval=replace(r, variant=variant, vector=replace(r.vector, search="hnsw")))
    tables, lists, result = [], [], None
    for i in range(builds):
        c = connect(url)
        if result is not None:  # the first run builds it (ingest); then drop it and build it again
            sid, dim = result.strategy.strategy_id, result.strategy.dim
            with c.transaction():
                c.execute(f'DROP INDEX IF EXISTS "{hnsw_index_name(sid, r.hnsw)}"')
                ensure_hnsw_index(c, sid, dim, r.hnsw)
            c.execute("ANALYZE chunks")
        _forget_in_process_caches()
        t = time.perf_counter()
        result = run_experiment(s, c)
        c.close()
        tables.append(result.eval.per_case)
        lists.append({q: tuple(h.chunk_id for h in rl.hits) for q, rl in result.results.items()})
        table.add("noise", f"{variant}, HNSW build {i + 1} of {builds}: recall@5 / MRR@10 / nDCG@10 (run s)",
                  " / ".join(f"{result.eval.per_case[m].mean():.4f}" for m in ("recall_at_5", "mrr_at_10", "ndcg_at_10"))
                  + f" ({time.perf_counter() - t:.1f})")
    metrics = [m for m in NOISE_METRICS if m in tables[0]]
    noise, moved = measure(tables, metrics)
    n = len(tables[0])
    pairs = builds * (builds - 1) // 2
    from itertools import combinations

    changed = max(sum(x.get(q) != y.get(q) for q in x) for x, y in combinations(lists, 2))
    table.add("noise", f"queries whose ranked list (as scored) changed between two builds (most over {pairs} pairs)",
              f"{changed} of {len(lists[0])}")
    table.add("noise", f"cases whose metrics moved between two builds (most over {pairs} pairs)", f"{moved} of {n}")
    for m in metrics:
        mn = noise[m]
        table.add("noise", f"{m}: noise floor = largest |Δ mean| between two builds; mean |Δ|; most cases differing",
                  f"{mn.floor:.4f}; {mn.mean_abs_delta:.4f}; {mn.max_cases_differ}")
    if write:
        hnsw = {"m": r.hnsw.m, "ef_construction": r.hnsw.ef_construction, "ef_search": r.hnsw.ef_search}
        from .golden.versions import GoldenVersion

        golden = GoldenVersion.of(result.golden).tags().get("golden_sha256", "")
        entry = NoiseFloor(result.strategy.strategy_id, variant, hnsw, golden, settings.corpus.name, builds, n,
                           datetime.now(timezone.utc).replace(microsecond=0).isoformat(), noise, moved)
        path = write_floor(entry)
        table.add("noise", "recorded for promote and the gate", str(path))


def bench_metrics(table: Table, n_queries: int = 2000) -> None:
    import random

    import ranx

    from .evaluation import metrics as M

    rng = random.Random(7)
    qrels, run, gains, grades = {}, {}, [], []
    for q in range(n_queries):
        rel = {f"d{rng.randrange(500)}": rng.choice([1, 2]) for _ in range(rng.randint(1, 4))}
        docs = [f"d{rng.randrange(500)}" for _ in range(40)]
        docs = list(dict.fromkeys(docs))[:20]
        qrels[f"q{q}"] = rel
        run[f"q{q}"] = {d: float(20 - i) for i, d in enumerate(docs)}
        gains.append([rel.get(d, 0) for d in docs])
        grades.append(list(rel.values()))
    t = time.perf_counter()
    for g, gr in zip(gains, grades):
        M.recall_at_k(g, gr, 5), M.recall_at_k(g, gr, 20), M.reciprocal_rank(g, gr, 10), M.ndcg_at_k(g, gr, 10)
    ours = time.perf_counter() - t
    qr, rn = ranx.Qrels(qrels), ranx.Run(run)
    ranx.evaluate(qr, rn, ["recall@5"])  # numba JIT warm-up, not counted
    t = time.perf_counter()
    ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), ["recall@5", "recall@20", "mrr@10", "ndcg@10"])
    theirs = time.perf_counter() - t
    table.add("metrics", f"4 metrics x {n_queries} queries: ours / ranx (incl. building Qrels+Run), ms",
              f"{ours * 1000:.1f} / {theirs * 1000:.1f}")


def bench_external(docs, queries: list[str], table: Table, k: int = 20) -> None:
    """The harness's own cost for an external retriever: reading, placing and deduplicating k
    passages a query (the system's time is excluded: its answers are precomputed), per way a
    passage can be given. Passages are real paragraphs of the corpus, k per query."""
    import random
    import re

    from .retrieval.external import ExternalRetriever, System

    rng = random.Random(11)
    paras = [(d, m.start(), m.end()) for d in docs for m in re.finditer(r"[^\n](?:.|\n(?!\n))*", d.text)
             if m.end() - m.start() > 80]

    def passage(mode: str, doc, start: int, end: int) -> dict:
        text = doc.text[start:end]
        if mode == "offsets":
            return {"source_uri": doc.source_uri, "start": start, "end": end}
        if mode == "exact":
            return {"source_uri": doc.source_uri, "text": text}
        if mode == "normalised":  # re-flowed, markup dropped, a breadcrumb in front
            return {"source_uri": doc.source_uri, "text": f"{doc.title} > x\n" + " ".join(text.replace("`", "").split())}
        words = text.split()  # fuzzy: one word in ten replaced
        return {"source_uri": doc.source_uri, "text": " ".join("zzz" if i % 10 == 5 else w for i, w in enumerate(words))}

    picks = {q: [paras[rng.randrange(len(paras))] for _ in range(k)] for q in queries}
    for mode in ("offsets", "exact", "normalised", "fuzzy"):
        answers = {q: [passage(mode, *p) for p in picks[q]] for q in queries}
        system = System("bench", lambda q, k, _a=answers: _a[q], {"target": "bench"}, {})
        r = ExternalRetriever(system, docs, "external", None, False, 1.0)
        r.search_many(queries, k)
        placed = sum(r.stats.alignment.get(m, 0) for m in ("offsets", "exact", "normalised", "fuzzy"))
        table.add("external", f"harness cost a query, {k} passages given as {mode}: ms p50 / p95 "
                  f"(placed {placed}/{len(queries) * k} as {mode}: {r.stats.alignment.get(mode, 0)})",
                  f"{_pct(r.stats.harness_ms, 0.5):.2f} / {_pct(r.stats.harness_ms, 0.95):.2f}")


# The child records its own high-water mark from /proc at exit. ru_maxrss cannot be used: Linux
# carries it across fork + exec, so a child of this (by then ~1.4 GB) process reports the parent's
# size (measured: a child running `python -c pass` read 1,037 MiB under a 1 GiB parent).
_HWM_WRAPPER = """
import atexit, os, runpy, sys
def _hwm():
    with open('/proc/self/status') as fh:
        kb = next(int(line.split()[1]) for line in fh if line.startswith('VmHWM:'))
    with open(os.environ['RAG_EXP_BENCH_HWM'], 'w') as out:
        out.write(str(kb))
atexit.register(_hwm)
sys.argv = ['run.py', *sys.argv[1:]]
runpy.run_path('run.py', run_name='__main__')
"""


def bench_peak_rss(table: Table, url: str, overrides: list[str] = ()) -> None:
    """Peak RSS (VmHWM) of ``python run.py`` with warm caches, as the child itself saw it."""
    import tempfile

    if not Path("/proc/self/status").exists():
        table.add("memory", "default run: peak RSS", "skipped (needs Linux /proc)")
        return
    with tempfile.NamedTemporaryFile("r", suffix=".hwm") as hwm:
        env = {**os.environ, "DATABASE_URL": url, "RAG_EXP_BENCH_HWM": hwm.name}
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", _HWM_WRAPPER, "progress=false", "tracking.enabled=false", *overrides],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        wall = time.perf_counter() - t
        peak = hwm.read().strip()
    for line in proc.stdout.splitlines():
        if line.startswith(("ingest:", "time:")):
            print(f"    (child) {line[:160]}")
    status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
    value = f"{int(peak) / 1024:.0f} MiB" if peak else "not recorded"
    table.add("memory", f"default run (python run.py, warm caches): peak RSS / wall ({status})",
              f"{value} / {wall:.1f}s")


SWEEP_100 = ["fusion.rrf_k=range(5,105,5)", "fusion.keyword_weight=0.5,0.75,1.0,1.25,1.5"]


def bench_sweep(table: Table, url: str, repeats: int, overrides: list[str] = ()) -> None:
    """Wall time of the 100-point sweep, ``repeats`` times (median), each in a child process with
    its own MLflow store and output folders in a temporary directory; plus the number of metrics,
    params and tags one sweep point logs."""
    import statistics
    import tempfile

    from .paths import project_root

    run_py = Path(__file__).resolve().parent.parent / "run.py"
    walls = []
    with tempfile.TemporaryDirectory(prefix="rag_bench_sweep_") as home:
        # the project's golden set and config; MLflow store, artifacts (./mlruns) and Hydra's
        # multirun/ folders in the temporary directory
        env = {**os.environ, "DATABASE_URL": url, "RAG_EXP_HOME": str(project_root()),
               "MLFLOW_TRACKING_URI": f"sqlite:///{home}/mlflow.db"}
        cpus, steals = [], []
        for i in range(repeats):
            gauge = reference_workload_s(1)
            usage, steal = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_steal_s()
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, str(run_py), "-m", *SWEEP_100, *overrides], cwd=home, env=env,
                                  capture_output=True, text=True, check=False)
            walls.append(time.perf_counter() - t)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            # the sweep's process and its forked workers (waited for, so counted as its children)
            cpus.append(after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime)
            steals.append(cpu_steal_s() - steal)
            points = sum(line.startswith("#") for line in proc.stdout.splitlines())
            print(f"    sweep repeat {i + 1}: {walls[-1]:.1f}s wall, {cpus[-1]:.1f}s CPU, {steals[-1]:.1f}s stolen, "
                  f"speed gauge {gauge:.2f}s, {points} points, exit {proc.returncode}")
            if proc.returncode != 0:
                table.add("sweep", "100-point sweep", f"failed (exit {proc.returncode}): "
                          f"{(proc.stderr.strip().splitlines() or [''])[-1][:200]}")
                return
        from mlflow.tracking import MlflowClient

        client = MlflowClient(env["MLFLOW_TRACKING_URI"])
        exp = client.get_experiment_by_name("rag-experiments")
        child = client.search_runs([exp.experiment_id], "tags.mlflow.parentRunId != ''", max_results=1)[0]
        parent = client.search_runs([exp.experiment_id], "tags.sweep = 'parent'", max_results=1)[0]
    cmd = "python run.py -m " + " ".join(f'"{a}"' if "(" in a else a for a in SWEEP_100)
    table.add("sweep", f"{cmd}: wall, median of {repeats} ({', '.join(f'{w:.1f}' for w in walls)})",
              f"{statistics.median(walls):.1f}s")
    table.add("sweep", "its CPU (the sweep's processes, user + system; PostgreSQL's not counted) / CPU time stolen "
              "by the VM's host during it, median s", f"{statistics.median(cpus):.1f} / {statistics.median(steals):.1f}")
    table.add("sweep", "one sweep point logs: metrics / params / tags",
              f"{len(child.data.metrics)} / {len(child.data.params)} / {len(child.data.tags)}")
    table.add("sweep", "the sweep's parent: metrics / params / tags",
              f"{len(parent.data.metrics)} / {len(parent.data.params)} / {len(parent.data.tags)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="rag-exp bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strategies", default="heading,fixed,paragraph", help="chunkings to ingest cold")
    ap.add_argument("--queries", type=int, default=100, help="queries for the latency section")
    ap.add_argument("--skip", default="",
                    help="sections to skip: ingest,shared,bm25,latency,rerank,serving,eval,noise,metrics,external,memory,"
                    "sweep,startup")
    ap.add_argument("--only", default="", help="run only these sections (comma-separated), e.g. noise")
    ap.add_argument("--noise-builds", type=int, default=4,
                    help="HNSW builds for the noise floor (every pair compared; default 4: 6 pairs)")
    ap.add_argument("--noise-variant", default="hybrid", help="variant whose noise floor is measured (default: hybrid)")
    ap.add_argument("--sweep-repeats", type=int, default=3, help="runs of the 100-point sweep (median reported)")
    ap.add_argument("--serving-queries", type=int, default=30, help="queries for the serving section")
    ap.add_argument("--shared-chunks", type=int, default=5000,
                    help="sections of the synthetic corpus of the shared-database case (--only shared: not run by default)")
    ap.add_argument("--corpus", default="demo", help="corpus folder of .md files (default: the shipped demo)")
    ap.add_argument("--corpus-name", default=None, help="its corpus name (default: the folder name)")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    sections = {"ingest", "shared", "bm25", "latency", "rerank", "serving", "eval", "noise", "metrics", "external", "memory", "sweep", "startup"}
    only = set(filter(None, args.only.split(",")))
    if only - sections:
        from .errors import UserError

        raise UserError(f"--only: unknown section {', '.join(sorted(only - sections))}",
                        hint="sections: " + ",".join(sorted(sections)))
    if only:
        skip |= sections - only
    else:  # minutes of a synthetic corpus of its own: run when asked for (--only shared,...)
        skip.add("shared")

    from .session import compose_settings
    from .corpus.loader import load_corpus
    from .db.connect import connect, resolve_database_url
    from .embedding import load_embedder
    from .golden.resolve import load_golden
    from .limits import query_problem
    from .chunk_index import hnsw_index_name, ingest, strategy_info

    corpus_overrides = []
    if args.corpus != "demo":
        corpus_name = args.corpus_name or Path(args.corpus).resolve().name
        corpus_overrides = [f"corpus.path={Path(args.corpus).resolve()}", f"corpus.name={corpus_name}"]
    settings, _ = compose_settings(["progress=false", "tracking.enabled=false", *corpus_overrides])
    admin = resolve_database_url(settings.db.url, settings.db.pgdata_dir)
    name = f"rag_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    url = make_conninfo(**{**conninfo_to_dict(admin), "dbname": name})
    table = Table()
    print(f"machine: {_machine()}\nthrowaway database: {name}\ncorpus: {args.corpus}\n")
    try:
        conn = connect(url)
        table.add("machine", "PostgreSQL", conn.execute("SHOW server_version").fetchone()[0])
        table.add("machine", "corpus", settings.corpus.name)
        table.add("machine", "speed gauge: a fixed pure-Python task on one core, s (median of 3; lower is faster)",
                  f"{reference_workload_s():.2f}")
        docs = load_corpus(settings.corpus.path, settings.corpus.name)
        embedder = load_embedder()
        if "ingest" not in skip:
            bench_ingest(conn, docs, embedder, [s for s in args.strategies.split(",") if s], table)
        if "shared" not in skip:  # a second strategy into an analysed database vs a fresh one (issue 58)
            bench_shared_db(table.add, admin, args.shared_chunks)
        if only == {"shared"}:
            conn.close()
            return _finish(table)
        if only == {"noise"}:  # the noise floor alone: its runs ingest the default strategy themselves
            conn.close()
            bench_noise(url, settings, table, args.noise_builds, args.noise_variant)
            return _finish(table)
        rep = ingest(conn, docs, settings.chunking, embedder, settings.retrieval.hnsw, shipped_vectors=False)
        strategy = strategy_info(conn, rep.strategy_id, settings.retrieval.hnsw)
        if "bm25" not in skip:
            bench_bm25_statistics(conn, strategy, None if rep.unchanged else rep.seconds, table)
            if not rep.unchanged:
                table.add("bm25", "settling after the cold ingest (GIN pending lists merged, BM25 tables vacuumed,"
                          " ANALYZE), s", f"{rep.settle_seconds:.2f} ({100 * rep.settle_seconds / rep.seconds:.1f}%"
                          " of that ingest)")
        hnsw_size = conn.execute("SELECT pg_size_pretty(pg_relation_size(%s::regclass))",
                                 (hnsw_index_name(rep.strategy_id, settings.retrieval.hnsw),)).fetchone()[0]
        table.add("ingest", f"default strategy: {len(docs)} documents, {rep.n_chunks} chunks; HNSW index", str(hnsw_size))
        golden = load_golden(settings.golden.file)
        # a case no run can search (see limits.py) would time nothing but its own failure
        queries = [c.query for c in golden.scorable if not query_problem(c.query)][: args.queries]
        if "latency" not in skip:
            bench_latency(conn, strategy, embedder, queries, table, settings.retriever_params)
        if "rerank" not in skip:  # the hybrid_rerank point's reranker: per query, per pair, a cutoff raised
            bench_rerank(table.add, conn, strategy, embedder, queries[:20], settings.retriever_params)
        conn.close()
        if "serving" not in skip:
            bench_serving(url, queries[: args.serving_queries], table, corpus_overrides)
        if "eval" not in skip:
            bench_evaluation(url, settings, table)
        if "noise" not in skip:
            bench_noise(url, settings, table, args.noise_builds, args.noise_variant)
        if "metrics" not in skip:
            bench_metrics(table)
        if "external" not in skip:
            bench_external(docs, queries, table)
        if "memory" not in skip:
            bench_peak_rss(table, url, corpus_overrides)
        if "sweep" not in skip and args.sweep_repeats > 0:
            bench_sweep(table, url, args.sweep_repeats, corpus_overrides)
        if "startup" not in skip and not corpus_overrides:  # the demo's: each --help, a warm run's wall - work
            from .bench_startup import bench_startup

            bench_startup(table.add, url)
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return _finish(table)


def _finish(table: Table) -> int:
    print("\n" + f"machine: {_machine()}\n\n" + table.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
