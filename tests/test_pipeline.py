"""End to end: real PostgreSQL, real MLflow store in a temp folder, real Hydra composition."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.config import settings_from_cfg
from rag_experiments.evaluation.relevance import credit
from rag_experiments.experiment import run_experiment

from .test_config import _compose

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "tests" / "fixtures" / "mini_corpus"


def _mini_overrides(golden: Path, *extra: str) -> list[str]:
    return [f"corpus.path={MINI}", "corpus.name=mini", f"golden.path={golden}", "chunking.max_tokens=60",
            "progress=false", "eval.bootstrap_samples=200", *extra]


def test_run_logs_metrics_equal_to_an_independent_computation(project, mini_golden):
    import time

    import ranx  # a test dependency: missing means the cross-check fails, never skips
    from rag_experiments.pipeline import log_result

    cfg = _compose(_mini_overrides(mini_golden))
    settings = settings_from_cfg(cfg)
    before = time.time()
    result = run_experiment(settings)
    run_id = log_result(result, cfg, "e2e")
    after = time.time()

    # independent computation: our crediting mapped to pseudo doc ids, scored by ranx
    qrels, run = {}, {}
    for case in result.golden.scorable:
        hits = result.results[case.case_id].hits[:20]
        cr = credit(case, hits)
        qrels[case.case_id] = {e.ref: e.grade for e in case.relevant}
        run[case.case_id] = {(ref or h.chunk_id): float(len(hits) - i) for i, (h, ref) in enumerate(zip(hits, cr.refs))}
    expected = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), ["recall@5", "recall@20", "mrr@10", "ndcg@10"],
                             make_comparable=True)

    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    logged = MlflowClient().get_run(run_id)
    m = logged.data.metrics
    for ours, theirs in (("recall_at_5", "recall@5"), ("recall_at_20", "recall@20"), ("mrr_at_10", "mrr@10"),
                         ("ndcg_at_10", "ndcg@10")):
        assert m[ours] == pytest.approx(expected[theirs], abs=1e-9)
    assert m["n_cases"] == 10
    assert {"recall_at_5.exact", "recall_at_5.paraphrase", "recall_at_5.doc_type.config",
            "recall_at_5.ci_low", "judged_at_10"} <= set(m)
    assert m["recall_at_5.ci_low"] <= m["recall_at_5"] <= m["recall_at_5.ci_high"]
    # a lean list: headline metrics and segments; other intervals and diagnostics are artifacts
    assert not any(k.startswith(("time.", "cache.", "golden.")) or k.endswith(".ci_low") and k != "recall_at_5.ci_low"
                   for k in m), sorted(m)
    intervals = mlflow.load_table("intervals.json", run_ids=[run_id])
    row = intervals[intervals["metric"] == "recall_at_5.exact"].iloc[0]
    assert row["low"] <= m["recall_at_5.exact"] <= row["high"]
    diagnostics = mlflow.artifacts.load_dict(f"runs:/{run_id}/diagnostics.json")
    assert {"time_s", "cache", "golden"} <= set(diagnostics) and "total" in diagnostics["time_s"]
    tags = logged.data.tags
    assert tags["variant"] == "hybrid" and tags["golden_sha256"] == result.golden.digest
    assert tags["strategy"].startswith("heading-") and "git_commit" in tags
    inputs = {d.dataset.name: d.dataset.digest for d in logged.inputs.dataset_inputs}
    assert inputs["golden:mini"] == result.golden.digest[:36]
    artifacts = {a.path for a in MlflowClient().list_artifacts(run_id)}
    assert {"config.yaml", "per_case.json", "intervals.json", "diagnostics.json", "corpus_manifest.json",
            "plots"} <= artifacts
    config_text = mlflow.artifacts.load_text(f"runs:/{run_id}/config.yaml")
    assert "golden" in config_text
    table = mlflow.load_table("per_case.json", run_ids=[run_id])
    assert len(table) == 10 and {"query", "kind", "first_relevant_rank", "top5", "latency_ms"} <= set(table.columns)
    # the run's start and end bracket the work it records (it used to start when logging began)
    info = logged.info
    assert int(before * 1000) <= info.start_time <= result.started_at * 1000 + 1
    assert (info.end_time - info.start_time) / 1000 >= result.timings["total_s"] - 0.01
    assert info.end_time <= after * 1000 + 1
    # failures first: a short table of the cases whose evidence missed recall@5, with where it sat
    failures = mlflow.load_table("failures.json", run_ids=[run_id])
    missed = table[table["recall_at_5"] == 0]
    assert sorted(failures["case_id"]) == sorted(missed["case_id"])
    assert list(failures.columns) == ["case_id", "recall_at_5", "kind", "doc_type", "query", "first_relevant_rank",
                                      "where"]
    for _, row in failures.iterrows():
        rank = row["first_relevant_rank"]
        assert row["where"] == (f"rank {int(rank)}" if rank == rank and rank is not None else "not in the top 20")
    assert "failures.json" in logged.data.tags["mlflow.loggedArtifacts"]


def test_secrets_never_reach_mlflow(project, mini_golden, monkeypatch):
    from rag_experiments.pipeline import log_result

    url = os.environ["DATABASE_URL"]
    cfg = _compose(_mini_overrides(mini_golden, f"db.url='{url}'", "rerank.model=sk-ant-secret"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-do-not-log")
    from rag_experiments.tracking.mlflow_run import redact

    assert redact({"db": {"url": "postgresql://u:hunter2@h/db"}, "api_key": "sk-1"}) == {
        "db": {"url": "postgresql://u:***@h/db"}, "api_key": "***"}
    result = run_experiment(settings_from_cfg(cfg))
    run_id = log_result(result, cfg, "secrets")
    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    run = MlflowClient().get_run(run_id)
    dump = str(run.data.params) + str(run.data.tags) + mlflow.artifacts.load_text(f"runs:/{run_id}/config.yaml")
    assert "sk-ant-do-not-log" not in dump and "hunter2" not in dump


def test_two_chunkings_measured_by_one_golden_set(project, mini_golden):
    scores = {}
    for chunking in ("heading", "fixed"):
        cfg = _compose(_mini_overrides(mini_golden, f"chunking={chunking}", "chunking.max_tokens=48",
                                       "tracking.enabled=false"))
        result = run_experiment(settings_from_cfg(cfg))
        scores[chunking] = result.eval.metrics
    for name, m in scores.items():
        assert 0.3 < m["recall_at_20"] <= 1.0 and m["mrr_at_10"] > 0.2, name
    assert scores["heading"] != scores["fixed"]


def _run_py(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAG_EXP_HOME": str(project), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)


def test_sweep_creates_a_parent_with_one_child_per_point(project, mini_golden):
    proc = _run_py(project, "-m", "fusion.rrf_k=30,90", *_mini_overrides(mini_golden, "tracking.plots=false"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    client = MlflowClient()
    exp = client.get_experiment_by_name("rag-experiments")
    parents = client.search_runs([exp.experiment_id], "tags.sweep = 'parent'")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    children = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parents[0].info.run_id}'")
    assert sorted(c.data.params["fusion.rrf_k"] for c in children) == ["30", "90"]
    assert all(c.info.status == "FINISHED" for c in children)
    # no LLM called (rerank maxsim, no query rewrite): the llm node's knobs are not the run's
    assert not any(k.startswith("llm.") for c in children for k in c.data.params)
    parent = parents[0]
    assert parent.info.run_name == "fusion.rrf_k=30,90" and parent.data.params["fusion.rrf_k"] == "30,90"
    best = max(children, key=lambda c: c.data.metrics["recall_at_5"])
    assert parent.data.metrics["recall_at_5"] == best.data.metrics["recall_at_5"]
    assert parent.data.tags["best_run_id"] in {c.info.run_id for c in children}
    note = parent.data.tags["mlflow.note.content"]
    assert "| run | n |" in note
    # the best point and its rival bounded under their unjudged hits (issue 57: the parent too), Δ from the best
    assert "how far unjudged hits could move recall@5 (each one in the top 5 relevant or not" in note, note
    bounded = [line for line in note.splitlines() if line.startswith("- rrf_k=")]  # the table's names
    assert len(bounded) == 2 and bounded[0].startswith("- rrf_k=30: recall@5 ") and "could be" in bounded[0], note
    assert "recall@5 Δ(rrf_k=90 - rrf_k=30)" in bounded[1], note
    # the parent spans its points
    assert parent.info.start_time <= min(c.info.start_time for c in children)
    assert parent.info.end_time >= max(c.info.end_time for c in children)
    assert f"#/experiments/{exp.experiment_id}/runs/{parent.info.run_id}?workflowType=machine_learning" in proc.stdout


def test_a_crashing_sweep_point_fails_its_child_and_the_parent(project, mini_golden):
    # a failure no up-front check can see (a bad config value or golden set stops the sweep before
    # it starts: tests/test_run_refuses_bad_input.py): the second point's database is unreachable
    unreachable = f"'postgresql:///nodb?host={project / 'no-such-socket-dir'}'"
    proc = _run_py(project, "-m", f"db.url=null,{unreachable}", *_mini_overrides(mini_golden, "tracking.plots=false"))
    assert proc.returncode != 0
    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    client = MlflowClient()
    exp = client.get_experiment_by_name("rag-experiments")
    parent = client.search_runs([exp.experiment_id], "tags.sweep = 'parent'")[0]
    children = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert sorted(c.info.status for c in children) == ["FAILED", "FINISHED"]
    assert parent.info.status == "FAILED"
    assert all(r.info.status != "RUNNING" for r in client.search_runs([exp.experiment_id]))


def test_bad_config_exits_with_one_clear_line(project, mini_golden):
    proc = _run_py(project, *_mini_overrides(mini_golden, "fusion.rrf_k=0"))
    assert proc.returncode == 2
    assert "fusion.rrf_k" in proc.stderr and "Traceback" not in proc.stderr
    proc = _run_py(project, *_mini_overrides(mini_golden, "golden.path=/does/not/exist.jsonl"))
    assert proc.returncode == 2 and "/does/not/exist.jsonl" in proc.stderr and "Traceback" not in proc.stderr


def test_parallel_sweep_with_the_joblib_launcher(project, mini_golden):
    """Two jobs at once, each a new strategy of the same corpus: no double ingest, no MLflow
    write conflict (both log the same golden/corpus datasets), one parent with two children."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    proc = _run_py(project, "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "chunking=heading,fixed",
                   *_mini_overrides(mini_golden, "tracking.plots=false", "chunking.max_tokens=44"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    client = MlflowClient()
    exp = client.get_experiment_by_name("rag-experiments")
    parent = client.search_runs([exp.experiment_id], "tags.sweep = 'parent'")[0]
    children = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert parent.info.status == "FINISHED"
    assert sorted(c.data.params["chunking.name"] for c in children) == ["fixed", "heading"]


def test_a_bad_value_in_a_later_sweep_point_still_stops_the_sweep(project, mini_golden):
    """The basic sweeper here composes each point once (the launcher's composition), validating
    only the first point up front: a bad later value still fails the sweep with Hydra's message."""
    proc = _run_py(project, "-m", "fusion.rrf_k=30,not_a_number", *_mini_overrides(mini_golden, "tracking.plots=false"))
    assert proc.returncode != 0
    assert "not_a_number" in proc.stderr and "fusion.rrf_k" in proc.stderr
    assert "is validated against ConfigStore schema" not in proc.stderr


def test_the_retrieval_bar_shows_only_when_retrieval_takes_a_while(project, mini_golden, capsys, monkeypatch):
    """A run on cached legs (a sweep point: ~0.1 s) prints no bar; one that takes longer than the
    delay does (here the delay is 0, standing for a slow retrieval)."""
    import rag_experiments.experiment as E

    settings = settings_from_cfg(_compose(_mini_overrides(mini_golden, "progress=true", "tracking.enabled=false")))
    run_experiment(settings)  # warms the leg cache
    capsys.readouterr()
    run_experiment(settings)
    assert "retrieval (" not in capsys.readouterr().err
    monkeypatch.setattr(E, "PROGRESS_DELAY_S", 0.0)
    run_experiment(settings)
    assert "retrieval (hybrid)" in capsys.readouterr().err
