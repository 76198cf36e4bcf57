"""An external retriever through the rest of the lifecycle, like a built-in variant: promoted to
champion (its config is the external one), served and searched through the champion (the target
is called), gated against, triaged, and swept by the joblib launcher."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.cli import main as cli
from rag_experiments.config import free_mapping_overrides, settings_from_cfg
from rag_experiments.experiment import run_experiment
from rag_experiments.pipeline import log_result

from ..test_config import _compose
from .test_external import MINI, ROOT, TARGETS, golden_env  # noqa: F401 - the fixture


def _logged(golden, *extra) -> str:
    overrides = free_mapping_overrides([
        f"corpus.path={MINI}", "corpus.name=mini", f"golden.path={golden}", "progress=false",
        "eval.bootstrap_samples=100", "tracking.plots=false", "retrieval=external",
        f"retrieval.external.target={TARGETS}:oracle", *extra])
    cfg = _compose(overrides)
    return log_result(run_experiment(settings_from_cfg(cfg)), cfg, " ".join(extra) or "external")


def test_an_external_champion_is_promoted_served_and_gated(golden_env, capsys):
    from rag_experiments.serving.retriever import Retriever

    champion = _logged(golden_env, "retrieval.external.params.rank=1")
    assert cli(["promote", "--metric", "mrr_at_10"]) == 0
    capsys.readouterr()
    with Retriever.from_champion() as served:  # the champion's config: the external target is called
        hits = served.search("What is work_mem used for?", k=3)
    assert hits[0].text.startswith("Sets the base maximum amount of memory to be used by a query operation")
    assert served.strategy.strategy_id.startswith("external:")

    worse = _logged(golden_env, "retrieval.external.params.rank=4")
    assert cli(["gate", "--run", worse, "--metric", "mrr_at_10"]) == 1
    assert "gate FAIL" in capsys.readouterr().out
    same = _logged(golden_env, "retrieval.external.params.rank=1", "run_name=nightly")
    assert cli(["gate", "--run", same, "--metric", "mrr_at_10"]) == 0
    client = MlflowClient()
    assert client.get_run(champion).data.tags["champion"] == "true"


def test_triage_of_an_external_retriever_ranks_its_own_list(golden_env, capsys):
    from rag_experiments.golden.resolve import load_golden

    case = next(c for c in load_golden(golden_env).scorable if c.query == "What is work_mem used for?")
    span = case.relevant[0].span
    args = ["triage", case.query, "--expected", f"{span.source_uri}:{span.start}-{span.end}", "--context", "2",
            "--add", "no"]
    sets = [f"corpus.path={MINI}", "corpus.name=mini", "retrieval=external",
            f"retrieval.external.target={TARGETS}:oracle"]
    assert cli([*args, *[a for s in sets + ["retrieval.external.params.rank=2"] for a in ("--set", s)]]) == 0
    out = capsys.readouterr().out
    assert out.startswith("GENERATION: chunk was in context") and "external       rank 2" in out
    assert cli([*args, *[a for s in sets + ["retrieval.external.params.rank=5"] for a in ("--set", s)]]) == 0
    assert capsys.readouterr().out.startswith("RETRIEVAL: relevant chunk never reached the context (external: rank 5")


def test_a_joblib_sweep_calls_the_target_in_its_workers(golden_env, tmp_path):
    import os

    env = {**os.environ, "RAG_EXP_TEST_GOLDEN": str(golden_env), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
         f"corpus.path={MINI}", "corpus.name=mini", f"golden.path={golden_env}", "progress=false",
         "eval.bootstrap_samples=100", "tracking.plots=false", "retrieval=external",
         f"retrieval.external.target={TARGETS}:oracle", "retrieval.external.params.rank=1,2"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    client = MlflowClient(f"sqlite:///{golden_env.parent / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("rag-experiments")
    runs = client.search_runs([exp.experiment_id], "tags.variant = 'external'")
    assert sorted(r.data.metrics["mrr_at_10"] for r in runs) == [0.5, 1.0]


def test_an_optuna_search_over_the_systems_own_params(golden_env, tmp_path):
    import os

    env = {**os.environ, "RAG_EXP_TEST_GOLDEN": str(golden_env), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=3",
         "hydra.sweeper.direction=maximize", f"corpus.path={MINI}", "corpus.name=mini", f"golden.path={golden_env}",
         "progress=false", "eval.bootstrap_samples=100", "tracking.plots=false", "objective=mrr_at_10",
         "retrieval=external", f"retrieval.external.target={TARGETS}:oracle",
         "retrieval.external.params.rank=range(1,8)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    client = MlflowClient(f"sqlite:///{golden_env.parent / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("rag-experiments")
    runs = client.search_runs([exp.experiment_id], "tags.variant = 'external'")
    assert len(runs) == 3
    for r in runs:  # each trial's metric is the hand-worked 1/rank of the rank Optuna chose
        assert r.data.metrics["mrr_at_10"] == pytest.approx(1 / int(r.data.params["retrieval.external.params.rank"]))
