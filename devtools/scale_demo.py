"""``make scale-demo``: the services a team shares, started on this machine's loopback, and a
sweep on them; or (``--bench-ingest``) the ingest scaling measurement.

    python -m devtools.scale_demo                 # services + the 8-point Ray sweep, then wait
    python -m devtools.scale_demo --corpus mini   # the same on the test suite's mini corpus (fast)
    python -m devtools.scale_demo --bench-ingest  # chunks/s: local vs Ray with 1 and 2 nodes

It starts what ``tests/scale/test_ray_cluster.py`` starts: PostgreSQL (the wheel's binaries)
over TCP with a password, an ``mlflow server`` (sqlite, served artifacts) and a Ray cluster of
two raylets with one CPU each; runs ``python run.py -m hydra/launcher=ray
fusion.rrf_k=10,30,60,90 chunking=heading,paragraph`` against them; prints where to look; and
stops everything on Enter or Ctrl-C. State lives in a temporary folder (printed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rag_experiments.scale.services import MlflowServer, RayCluster, TcpPostgres

ROOT = Path(__file__).resolve().parents[1]  # the repository
SWEEP = ["fusion.rrf_k=10,30,60,90", "chunking=heading,paragraph"]


def _folder() -> Path:
    # PostgreSQL runs as a system user when we are root: its folder's parents must be traversable
    folder = Path(tempfile.mkdtemp(prefix="rag-exp-scale-", dir="/tmp"))
    folder.chmod(0o755)
    return folder


def _mini_golden(project: Path) -> list[str]:
    sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
    sys.path.insert(0, str(ROOT))
    from tests.conftest import build_mini_golden

    from rag_experiments.corpus.loader import load_corpus

    mini = ROOT / "tests" / "fixtures" / "mini_corpus"
    golden = build_mini_golden(project / "mini.jsonl", load_corpus(mini, "mini"))
    return [f"corpus.path={mini}", "corpus.name=mini", f"golden.path={golden}", "chunking.max_tokens=60"]


def run_demo(corpus: str, wait: bool) -> int:
    folder = _folder()
    pg, mlflow_server, cluster = TcpPostgres(folder / "pgdata"), MlflowServer(folder / "mlflow"), RayCluster(workers=1)
    try:
        print(f"state folder: {folder}")
        pg.ensure_running()
        print(f"PostgreSQL over TCP with a password: postgresql://{pg.user}:***@{pg.host}:{pg.port}/rag")
        mlflow_server.start()
        print(f"MLflow server: {mlflow_server.url}")
        cluster.start()
        print(f"Ray cluster: {cluster.address} (nodes {', '.join(cluster.node_ips)}, 1 CPU each; no dashboard)")
        project = folder / "project"
        project.mkdir()
        extra = _mini_golden(project) if corpus == "mini" else [f"golden.path={ROOT / 'experiments/golden/demo.jsonl'}"]
        env = {**os.environ, "DATABASE_URL": pg.url(), "MLFLOW_TRACKING_URI": mlflow_server.url,
               "RAY_ADDRESS": cluster.address, "RAG_EXP_HOME": str(project), "RAY_USAGE_STATS_ENABLED": "0"}
        cmd = [sys.executable, str(ROOT / "run.py"), "-m", "hydra/launcher=ray", *SWEEP, *extra,
               "eval.ann_recall_queries=0"]
        print("$ DATABASE_URL=... MLFLOW_TRACKING_URI=... RAY_ADDRESS=... python run.py -m hydra/launcher=ray "
              + " ".join(SWEEP))
        t0 = time.monotonic()
        code = subprocess.call(cmd, cwd=project, env=env)
        print(f"sweep exit {code} in {time.monotonic() - t0:.0f} s")
        print_run_list(mlflow_server.url)
        print(f"\nLook at: {mlflow_server.url}/#/experiments (experiment rag-experiments: one parent, eight "
              "children, each tagged ray.node_ip)")
        if wait:
            try:
                input("Press Enter to stop the services... ")
            except (EOFError, KeyboardInterrupt):
                pass
        return code
    finally:
        cluster.stop()
        mlflow_server.stop()
        pg.stop()


def print_run_list(uri: str) -> None:
    """The tracking server's runs of the sweep: the parent, then each child with its node."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("rag-experiments")
    if exp is None:
        return
    for parent in client.search_runs([exp.experiment_id], "tags.sweep = 'parent'"):
        t = parent.data.tags
        print(f"\nparent {parent.info.run_id[:12]}  {parent.info.status:8}  {parent.info.run_name}  "
              f"children={t.get('children', '?')} failed={t.get('children_failed', '?')}")
        children = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
        for c in sorted(children, key=lambda r: int(r.data.tags.get("sweep.job_num", 0))):
            ct = c.data.tags
            recall = c.data.metrics.get("recall_at_5")
            print(f"  #{ct.get('sweep.job_num', '?'):>2} {c.info.run_id[:12]}  {c.info.status:8}  "
                  f"node {ct.get('ray.node_ip', '-'):10}  built={ct.get('ingest.built', '-'):5}  "
                  f"r@5={'-' if recall is None else f'{recall:.3f}'}  {c.info.run_name}")


def bench_ingest(n_texts: int) -> None:
    """Embedding throughput into the cache: this process vs Ray tasks on 1 and 2 one-CPU nodes."""
    import psycopg
    import ray

    from rag_experiments.chunking import ChunkingParams, chunk_corpus
    from rag_experiments.corpus.loader import load_corpus
    from rag_experiments.db.connect import connect
    from rag_experiments.embedding import load_embedder
    from rag_experiments.store import embed_with_cache
    from rag_experiments.scale.executors import LocalEmbedding, RayEmbedding

    embedder = load_embedder()
    docs = load_corpus(ROOT / "rag_experiments" / "data" / "demo_corpus", "demo")
    chunks = chunk_corpus(docs, ChunkingParams(name="fixed", max_tokens=128, overlap=32), embedder, "bench")
    texts = [c.indexed_text for c in chunks][:n_texts]
    folder = _folder()
    pg = TcpPostgres(folder / "pgdata")
    pg.ensure_running()
    rows = []
    try:
        for label, workers in (("local (this process, 2 threads)", None), ("Ray, 1 node x 1 CPU", 0),
                               ("Ray, 2 nodes x 1 CPU", 1)):
            db = f"bench_{len(rows)}"
            with psycopg.connect(pg.url("postgres"), autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{db}"')
            cluster = None
            if workers is None:
                executor = LocalEmbedding(embedder)
            else:
                cluster = RayCluster(workers=workers)
                cluster.start()
                executor = RayEmbedding("minilm-onnx", address=cluster.address)
                ray.init(address=cluster.address, logging_level="warning")
                # warm the workers (model load) so the rate is the steady state
                with connect(pg.url(db)) as conn:
                    embed_with_cache(conn, embedder, [f"warm {i}" for i in range(64)], batch_size=16,
                                     executor=executor)
            with connect(pg.url(db)) as conn:
                t0 = time.perf_counter()
                embed_with_cache(conn, embedder, texts, executor=executor, batch_size=64)
                dt = time.perf_counter() - t0
            rows.append((label, len(texts) / dt, dt))
            if cluster:
                ray.shutdown()
                cluster.stop()
    finally:
        pg.stop()
    load = os.getloadavg()[0]
    print(f"\nembedding {len(texts)} demo chunks (fixed, 128 tokens) into the cache; load average {load:.1f}")
    print(f"{'executor':34} {'texts/s':>8} {'seconds':>8}")
    for label, rate, dt in rows:
        print(f"{label:34} {rate:8.1f} {dt:8.1f}")
    per_worker = max(rows[1][1], rows[2][1] / 2)  # the better measured rate of one one-CPU worker
    for n in (1, 8, 32):
        hours = 1_000_000 / (per_worker * n) / 3600
        print(f"projected: 1M chunks with {n:2d} one-CPU workers at {per_worker:.1f} texts/s each: {hours:6.1f} h")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", choices=("demo", "mini"), default="demo",
                    help="demo: the shipped corpus and golden set (first ingest takes minutes); mini: the tests' corpus")
    ap.add_argument("--no-wait", action="store_true", help="stop the services as soon as the sweep ends")
    ap.add_argument("--bench-ingest", action="store_true", help="measure ingest throughput: local vs Ray 1 and 2 nodes")
    ap.add_argument("--texts", type=int, default=600, help="texts to embed per executor in --bench-ingest")
    args = ap.parse_args(argv)
    if args.bench_ingest:
        bench_ingest(args.texts)
        return 0
    return run_demo(args.corpus, wait=not args.no_wait)


if __name__ == "__main__":
    sys.exit(main())
