"""Sweeps and ingest on a real Ray cluster (two raylets = two nodes, 1 CPU each) with the
services a team shares: PostgreSQL over TCP with a password, and an ``mlflow server`` with
served artifacts. Everything listens on loopback addresses and is started and stopped here.

The tests in this module share one cluster and run in file order; the last one kills the
worker node.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="the [ray] extra is not installed")
if os.environ.get("CI") and not Path(sys.executable).with_name("ray").exists():  # pragma: no cover
    pytest.fail("CI must install the [ray] extra", pytrace=False)

import psycopg  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from rag_experiments.db.migrations import SCHEMA_LOCK_KEY  # noqa: E402
from rag_experiments.tracking.server import copy_template  # noqa: E402

from rag_experiments.scale.services import MlflowServer, RayCluster, TcpPostgres, free_port  # noqa: E402

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
MINI = ROOT / "tests" / "fixtures" / "mini_corpus"


#: Ray's GCS declares a node dead after health_check_failure_threshold failed checks, one per
#: health_check_period_ms: 5 x 3 s by default, the wait for a killed node's lost points; here
#: 3 x 0.5 s (the timeout of one check stays 10 s, so a loaded machine does not lose a live node)
FAST_NODE_DEATH = {"RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "3"}


@pytest.fixture(scope="module")
def services():
    from tests.conftest import server_folder

    folder = server_folder()
    pg = TcpPostgres(folder / "pgdata")
    mlflow_server = MlflowServer(folder / "mlflow")
    cluster = RayCluster(workers=1, cpus_per_node=1, env=FAST_NODE_DEATH)
    # the server's store from the suite's template (tests/conftest.py), not MLflow's migrations
    (folder / "mlflow").mkdir(parents=True)
    copy_template(folder / "mlflow" / "mlflow.db")
    try:
        # the three are independent and each mostly waits (imports, initdb, raylets): started at once
        with ThreadPoolExecutor(3) as pool:
            for started in [pool.submit(pg.ensure_running), pool.submit(mlflow_server.start),
                            pool.submit(cluster.start)]:
                started.result()
        yield {"pg": pg, "mlflow": mlflow_server, "ray": cluster, "folder": folder}
    finally:
        with ThreadPoolExecutor(3) as pool:  # independent too: stopped at once
            for stopped in [pool.submit(cluster.stop), pool.submit(mlflow_server.stop), pool.submit(pg.stop)]:
                stopped.result()


@pytest.fixture(scope="module")
def project(services, tmp_path_factory, mini_docs_module):
    from tests.conftest import build_mini_golden

    project = tmp_path_factory.mktemp("ray-project")
    build_mini_golden(project / "mini.jsonl", mini_docs_module)
    return project


@pytest.fixture(scope="module")
def mini_docs_module():
    from rag_experiments.corpus.loader import load_corpus

    return load_corpus(MINI, "mini")


def _env(services, project: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    env.update({"RAG_EXP_HOME": str(project), "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0",
                "DATABASE_URL": services["pg"].url(), "MLFLOW_TRACKING_URI": services["mlflow"].url,
                "RAY_ADDRESS": services["ray"].address})
    env.update(extra)
    return env


def _overrides(project: Path, *extra: str) -> list[str]:
    return [f"corpus.path={MINI}", "corpus.name=mini", f"golden.path={project / 'mini.jsonl'}",
            "chunking.max_tokens=60", "progress=false", "eval.bootstrap_samples=100",
            "eval.ann_recall_queries=0", "tracking.plots=false", *extra]


def _sweep(services, project, *args: str, env_extra: dict | None = None, popen: bool = False):
    given = {a.partition("=")[0] for a in args}
    defaults = [o for o in _overrides(project) if o.partition("=")[0] not in given]
    cmd = [sys.executable, str(ROOT / "run.py"), "-m", "hydra/launcher=ray", *args, *defaults]
    env = _env(services, project, **(env_extra or {}))
    if popen:
        # files, not pipes: nobody reads a pipe while the test polls, and a full pipe blocks the sweep
        return subprocess.Popen(cmd, cwd=project, env=env, stdout=(project / "sweep.out").open("w"),
                                stderr=(project / "sweep.err").open("w"), text=True)
    return subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=600)


def _runs(services):
    client = MlflowClient(tracking_uri=services["mlflow"].url)
    exp = client.get_experiment_by_name("rag-experiments")
    return client, exp.experiment_id if exp else client.create_experiment("rag-experiments")


def test_a_sweep_runs_on_both_nodes_and_logs_to_the_server(services, project):
    t0 = time.monotonic()
    # 4 points, 2 strategies: both nodes get work, and each strategy is raced for by two points
    proc = _sweep(services, project, "fusion.rrf_k=10,60", "chunking=heading,paragraph")
    wall = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-4000:]
    client, exp_id = _runs(services)
    parents = client.search_runs([exp_id], "tags.sweep = 'parent'")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    parent_id = parents[0].info.run_id
    children = client.search_runs([exp_id], f"tags.mlflow.parentRunId = '{parent_id}'")
    assert len(children) == 4 and all(c.info.status == "FINISHED" for c in children)
    nodes = {c.data.tags["ray.node_ip"] for c in children}
    assert nodes == set(services["ray"].node_ips), nodes  # both raylets ran points
    for chunking in ("heading", "paragraph"):
        built = [c for c in children if c.data.params["chunking.name"] == chunking
                 and c.data.tags["ingest.built"] == "true"]
        assert len(built) == 1, f"{chunking} built {len(built)} times"  # the advisory lock over TCP
    # artifacts went through the server to its artifact store, from both nodes
    assert any(a.path == "per_case.json" for a in client.list_artifacts(children[0].info.run_id))
    assert client.list_artifacts(parent_id), "the sweep's comparison is logged on the parent"
    # the password never reaches the server's records
    password = services["pg"].password
    for run in [*children, parents[0]]:
        dump = str(run.data.params) + str(run.data.tags) + run.info.run_name
        assert password not in dump
    # ... nor Ray's logs (the job environment travels as a task argument, not a runtime_env)
    logs = Path("/tmp/ray/session_latest/logs")
    leaked = [p.name for p in logs.rglob("*") if p.is_file() and password in p.read_text(errors="replace")]
    assert not leaked, leaked
    print(f"\nray sweep of 4 points: {wall:.1f} s wall, nodes {sorted(nodes)}")


def test_a_ray_sweep_calls_an_external_target_on_the_workers(services, project):
    """Issue 27: a team's retriever on the Ray launcher; each point's MRR is the hand-worked 1/rank."""
    proc = _sweep(services, project, "retrieval=external",
                  "retrieval.external.target=tests.retrieval.external_targets:oracle",
                  "retrieval.external.params.rank=1,4", env_extra={"RAG_EXP_TEST_GOLDEN": str(project / "mini.jsonl"),
                             "RAG_EXP_FORWARD_ENV": "RAG_EXP_TEST_GOLDEN"})  # what the target reads
    assert proc.returncode == 0, proc.stderr[-4000:]
    client, exp_id = _runs(services)
    runs = client.search_runs([exp_id], "tags.variant = 'external'")
    assert sorted(r.data.metrics["mrr_at_10"] for r in runs) == [0.25, 1.0]
    assert {r.data.tags["ray.node_ip"] for r in runs} <= set(services["ray"].node_ips)


def test_ray_ingest_writes_the_same_chunks_and_vectors_as_local(services, mini_docs_module):
    import numpy as np
    import psycopg
    import ray

    from rag_experiments.chunking import ChunkingParams
    from rag_experiments.db.connect import connect
    from rag_experiments.embedding import load_embedder
    from rag_experiments.scale.executors import LocalEmbedding, RayEmbedding
    from rag_experiments.chunk_index import ingest

    pg = services["pg"]
    embedder = load_embedder()
    params = ChunkingParams(name="fixed", max_tokens=50, overlap=10, breadcrumbs=True)
    tables = {}
    for name, executor in (("local", LocalEmbedding(embedder)),
                           ("ray", RayEmbedding("minilm-onnx", address=services["ray"].address))):
        db = f"ingest_{name}"
        with psycopg.connect(pg.url("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{db}"')
            admin.execute(f'CREATE DATABASE "{db}"')
        with connect(pg.url(db)) as conn:
            report = ingest(conn, mini_docs_module, params, embedder, executor=executor)
            assert report.texts_embedded == report.chunks_written > 0
            rows = conn.execute("SELECT chunk_id, text, indexed_text, embedding FROM chunks ORDER BY chunk_id").fetchall()
            tables[name] = rows
    ray.shutdown()
    local, remote = tables["local"], tables["ray"]
    assert [r[:3] for r in local] == [r[:3] for r in remote]
    diff = max(float(np.max(np.abs(a[3].to_numpy() - b[3].to_numpy()))) for a, b in zip(local, remote))
    print(f"\n{len(local)} chunks; largest vector difference, Ray vs local: {diff:.2e}")
    assert diff <= 1e-6, diff


def test_unreachable_services_end_in_one_line(services, project):
    dead = f"127.0.0.1:{free_port()}"
    cases = {
        "ray": ({"RAY_ADDRESS": dead}, "cannot connect to the Ray cluster"),
        "db": ({"DATABASE_URL": f"postgresql://rag:pw@{dead}/rag"}, "cannot reach the database"),
        "mlflow": ({"MLFLOW_TRACKING_URI": f"http://{dead}"}, "MLflow tracking server"),
    }
    for what, (env, message) in cases.items():
        proc = _sweep(services, project, "fusion.rrf_k=10,20", env_extra=env)
        assert proc.returncode != 0, what
        assert message in proc.stderr and "Traceback" not in proc.stderr, (what, proc.stderr[-2000:])
        assert "pw@" not in proc.stderr
    client, exp_id = _runs(services)
    assert not client.search_runs([exp_id], "attributes.status = 'RUNNING'")


def test_killing_the_worker_node_fails_only_its_points(services, project):
    cluster = services["ray"]
    worker_ip = cluster.node_ips[1]
    # Deterministic: the test holds the schema lock every point takes when it connects (its
    # migrations check), so the first two points (one per node: 1 CPU each) wait on it. Killing
    # the worker node then loses exactly the point it holds, mid-work; releasing the lock lets
    # the head node finish the rest. (Killing at a moment chosen by polling lost nothing when the
    # point happened to be between steps.)
    args = ("fusion.rrf_k=11,21,31,41", "chunking=fixed", "chunking.overlap=8")
    client, exp_id = _runs(services)
    before = {r.info.run_id for r in client.search_runs([exp_id], "tags.sweep = 'parent'")}
    with psycopg.connect(services["pg"].url(), autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))
        proc = _sweep(services, project, *args, popen=True)
        deadline = time.monotonic() + 240
        waiting = 0
        while time.monotonic() < deadline and proc.poll() is None and waiting < 2:
            time.sleep(0.2)
            waiting = holder.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                                     "AND classid = 0 AND objid = %s", (SCHEMA_LOCK_KEY,)).fetchone()[0]
        assert waiting == 2, f"the two nodes' points never reached the database: {proc.poll()} " \
                             f"{(project / 'sweep.err').read_text()[-3000:]}"
        assert cluster.kill_node(worker_ip) > 0
        holder.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_KEY,))
    proc.wait(timeout=600)
    err = (project / "sweep.err").read_text()
    assert proc.returncode != 0, "a sweep that lost points must not exit 0"
    parents = [r for r in client.search_runs([exp_id], "tags.sweep = 'parent'") if r.info.run_id not in before]
    assert len(parents) == 1 and parents[0].info.status == "FAILED"
    parent = parents[0]
    children = client.search_runs([exp_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    statuses = sorted(c.info.status for c in children)
    assert len(children) == 4 and "RUNNING" not in statuses, statuses
    failed = [c for c in children if c.info.status == "FAILED"]
    assert failed and all("lost" in c.data.tags.get("error", "") for c in failed), [c.data.tags for c in failed]
    assert parent.data.tags["children_failed"] == str(len(failed))
    assert "Traceback" not in err[-3000:] or "lost" in err

    # the same sweep again (on the surviving node): only what was lost is computed
    again = _sweep(services, project, *args)
    assert again.returncode == 0, again.stderr[-3000:]
    parents2 = [r for r in client.search_runs([exp_id], "tags.sweep = 'parent'")
                if r.info.run_id not in before | {parent.info.run_id}]
    children2 = client.search_runs([exp_id], f"tags.mlflow.parentRunId = '{parents2[0].info.run_id}'")
    assert len(children2) == 4 and all(c.info.status == "FINISHED" for c in children2)
    assert all(c.data.tags["ingest.built"] == "false" for c in children2)
    print(f"\nkilled node {worker_ip}: {len(failed)} of 4 points FAILED, the rest FINISHED; re-run: 4 FINISHED")
