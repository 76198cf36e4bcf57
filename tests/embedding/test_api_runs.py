"""API embedders end to end: run.py / rag-exp against the local provider stub, real PostgreSQL,
real MLflow store. A killed ingest resumes without repeating a paid call; a sweep over two
stub-served models gives two strategies and a side-by-side compare; keys never leak."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

pytest.importorskip("voyageai")
pytest.importorskip("openai")
pytest.importorskip("cohere")

ROOT = Path(__file__).resolve().parents[2]
MINI = ROOT / "tests" / "fixtures" / "mini_corpus"


def _mini(golden: Path | None = None, *extra: str) -> list[str]:
    out = [f"corpus.path={MINI}", "corpus.name=mini", "chunking.max_tokens=60", "progress=false",
           "eval.bootstrap_samples=50", "eval.ann_recall_queries=0", "tracking.plots=false"]
    if golden:
        out.append(f"golden.path={golden}")
    return [*out, *extra]


def _env(project: Path, keys: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VOYAGE_API_KEY", "OPENAI_API_KEY", "CO_API_KEY")}
    env.update(keys or {})
    env.update({"RAG_EXP_HOME": str(project), "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
    return env


def run_py(project: Path, *args: str, keys: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=project, env=_env(project, keys),
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


RAG_EXP = [sys.executable, "-m", "rag_experiments.cli"]


def test_missing_key_is_one_line_naming_the_variable_before_any_work(project, mini_golden, api_stub):
    proc = run_py(project, "embedding=voyage", f"embedding.base_url={api_stub.url('voyage')}", *_mini(mini_golden))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("error: VOYAGE_API_KEY is not set") and "Traceback" not in proc.stderr
    proc = run_py(project, "retrieval=hybrid_rerank", "rerank=cohere", *_mini(mini_golden, "tracking.enabled=false"))
    assert proc.returncode == 2 and proc.stderr.startswith("error: CO_API_KEY is not set")
    assert api_stub.log == []  # nothing was sent...
    assert not (project / "mlruns" / "mlflow.db").exists()  # ...nor logged


def test_killed_ingest_resumes_without_repeating_a_paid_call(project, api_stub, api_keys, pg_url):
    """Kill -9 the ingest while its 4th request is in flight; the rerun sends none of the texts
    the first three answers paid for (they were committed as each answer arrived)."""
    args = RAG_EXP + ["ingest", "--yes", "--set", "embedding=voyage", "--set", "embedding.model=stub-crash",
                      "--set", f"embedding.base_url={api_stub.url('voyage')}", "--set", "embedding.max_batch_texts=4"]
    for o in _mini():
        args += ["--set", o]
    proc = subprocess.Popen(args, cwd=project, env=_env(project, api_keys), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)

    def kill_on_fourth(entry):
        if len(api_stub.requests("voyage/embeddings")) == 4:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)  # dead before the stub answers: the 4th answer never arrives

    api_stub.on_request = kill_on_fourth
    proc.wait(timeout=300)
    assert proc.returncode == -signal.SIGKILL
    first = api_stub.requests("voyage/embeddings")
    assert len(first) == 4
    paid = [t for r in first[:3] for t in r["texts"]]
    assert len(paid) == 12

    api_stub.on_request = None
    done = subprocess.run(args, cwd=project, env=_env(project, api_keys), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    second = api_stub.requests("voyage/embeddings")[4:]
    resent = [t for r in second for t in r["texts"]]
    assert not set(paid) & set(resent)  # no paid text is asked for again
    assert set(first[3]["texts"]) <= set(resent)  # the unanswered request is sent again
    assert "12 embedding cache hits" in done.stdout
    assert "embedding" in done.stderr and "(estimated)" in done.stderr  # the estimate before paying
    # and a third run pays nothing at all
    again = subprocess.run(args, cwd=project, env=_env(project, api_keys), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and len(api_stub.requests("voyage/embeddings")) == 4 + len(second)
    assert "unchanged" in again.stdout


def test_sweep_over_two_stub_models_gives_two_strategies_and_a_comparison(project, mini_golden, api_stub, api_keys):
    proc = run_py(project, "-m", "embedding=openai", "embedding.model=stub-a,stub-b",
                  f"embedding.base_url={api_stub.url('openai')}", "embedding.confirm=false",
                  "embedding.price_per_mtok=0.02", *_mini(mini_golden), keys=api_keys)
    assert proc.returncode == 0, proc.stderr[-3000:]
    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    client = MlflowClient()
    exp = client.get_experiment_by_name("rag-experiments")
    parent = client.search_runs([exp.experiment_id], "tags.sweep = 'parent'")[0]
    children = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    by_model = {c.data.params["embedding.model"]: c for c in children}
    assert sorted(by_model) == ["stub-a", "stub-b"]
    assert by_model["stub-a"].data.tags["strategy"] != by_model["stub-b"].data.tags["strategy"]
    assert by_model["stub-a"].data.tags["embedding_model"] == "openai:stub-a"
    for model, run in by_model.items():
        billed = sum(len(t.split()) for r in api_stub.requests("openai/embeddings") if r["body"]["model"] == model
                     for t in r["texts"])
        m = run.data.metrics
        assert m["embedding.tokens"] == billed > 0  # the usage the provider reported, logged
        assert m["embedding.cost_usd"] == pytest.approx(billed * 0.02 / 1e6)
        assert m["embedding.estimated_tokens"] > 0 and "embedding.estimated_cost_usd" in m
    cmp = subprocess.run([*RAG_EXP, "compare", "--last-sweep", "--markdown"],
                         cwd=project, env=_env(project, None), capture_output=True, text=True, timeout=300)
    assert cmp.returncode == 0, cmp.stderr[-3000:]
    rows = [line for line in cmp.stdout.splitlines() if line.startswith("|") and "stub-" in line]
    assert len(rows) == 2 and "stub-a" in rows[0] and "stub-b" in rows[1], cmp.stdout


def test_keys_never_reach_mlflow_hydra_outputs_or_error_messages(project, mini_golden, api_stub, api_keys):
    proc = run_py(project, "embedding=openai", "embedding.model=stub-a", f"embedding.base_url={api_stub.url('openai')}",
                  "embedding.confirm=false", "retrieval=hybrid_rerank", "rerank=voyage",
                  f"rerank.base_url={api_stub.url('voyage')}", "rerank.cutoff=5", *_mini(mini_golden), keys=api_keys)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all(r["auth"] for r in api_stub.log)  # the keys were used...
    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    client = MlflowClient()
    exp = client.get_experiment_by_name("rag-experiments")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.data.metrics["rerank.tokens"] > 0 and run.data.metrics["rerank.cost_usd"] > 0
    dump = [str(run.data.params), str(run.data.tags), proc.stdout, proc.stderr]
    local = Path(mlflow.artifacts.download_artifacts(run_id=run.info.run_id, dst_path=str(project / "dl")))
    files = [p for p in local.rglob("*") if p.is_file()] + [p for p in (project / "outputs").rglob("*") if p.is_file()]
    assert any(".hydra" in str(p) for p in files)
    dump += [p.read_text(errors="replace") for p in files]
    # an API error (the key refused) names the variable, never the value
    from .provider_stub import status

    api_stub.queue(status(401), status(401))
    failed = run_py(project, "embedding=openai", "embedding.model=stub-401", f"embedding.base_url={api_stub.url('openai')}",
                    "embedding.confirm=false", *_mini(mini_golden, "tracking.enabled=false"), keys=api_keys)
    assert failed.returncode == 2 and "OPENAI_API_KEY" in failed.stderr and "Traceback" not in failed.stderr
    dump += [failed.stdout, failed.stderr]
    text = "\n".join(dump)
    for key in api_keys.values():
        assert key not in text  # ...and never written anywhere
