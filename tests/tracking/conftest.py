"""Fake runs in a throwaway MLflow sqlite store (no database, no Hydra subprocess).

``store`` points RAG_EXP_HOME at a temp folder and unsets MLFLOW_TRACKING_URI (like the shared
``project`` fixture, without starting PostgreSQL); ``make_run`` logs a run the way
:func:`rag_experiments.tracking.mlflow_run.log_experiment` does: tags, flattened params, the
config.yaml artifact, segment metrics with bootstrap intervals and the per_case.json table.
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

GOLDEN = "a" * 64
CORPUS = "c" * 64
METRICS = ("recall_at_5", "recall_at_20", "mrr_at_10", "ndcg_at_10")


def base_config(**changes) -> dict:
    cfg = {
        "corpus": {"path": "demo", "name": None},
        "chunking": {"name": "heading", "max_tokens": 200, "overlap": 0, "breadcrumbs": True},
        "retrieval": {"variant": "hybrid"},
        "fusion": {"rrf_k": 60, "vector_weight": 1.0, "keyword_weight": 1.0, "depth": 50, "engine": "python"},
        "golden": {"path": "experiments/golden/demo.jsonl"},
        "db": {"url": None, "pgdata": None},
        "tracking": {"enabled": True, "uri": None, "experiment": "rag-experiments"},
        "objective": "recall_at_5", "run_name": None, "progress": True,
    }
    for dotted, value in changes.items():
        node = cfg
        *path, last = dotted.split(".")
        for p in path:
            node = node[p]
        node[last] = value
    return cfg


def per_case_frame(recall_at_5, kinds=None, doc_types=None, seed: int = 0, **other) -> pd.DataFrame:
    """A per-case table with the logged columns; ``recall_at_5`` drives recall_curve and others."""
    r5 = np.asarray(recall_at_5, dtype=float)
    n = len(r5)
    kinds = list(kinds) if kinds is not None else ["exact" if i % 2 else "paraphrase" for i in range(n)]
    doc_types = list(doc_types) if doc_types is not None else ["config" if i % 3 else "reference" for i in range(n)]
    rng = np.random.default_rng(seed)
    cols = {
        "case_id": [f"c-{i:04d}" for i in range(n)], "query": [f"question {i}" for i in range(n)],
        "kind": kinds, "doc_type": doc_types, "n_relevant": [1] * n,
        "first_relevant_rank": [1 if v > 0 else None for v in r5],
        "recall_at_5": r5,
        "recall_at_20": other.pop("recall_at_20", np.maximum(r5, (rng.random(n) < 0.5).astype(float))),
        "mrr_at_10": other.pop("mrr_at_10", r5 * 0.8),
        "ndcg_at_10": other.pop("ndcg_at_10", r5 * 0.9),
        "hit_at_5": r5, "judged_at_10": [0.5] * n,
    }
    cols.update(other)
    df = pd.DataFrame(cols)
    df["recall_curve"] = [[float(v) * min(1.0, k / 5) for k in range(1, 21)] for v in r5]
    df["top5"] = [[f"chunk{i}"] for i in range(n)]
    df["latency_ms"] = 1.0
    return df


EVIDENCE_TEXT = "The work_mem setting bounds the memory of each sort or hash operation."


def golden_cases(root: Path, n: int, *, name: str = "demo.jsonl", split: bool = True) -> tuple[str, np.ndarray | None]:
    """``experiments/golden/<name>`` under ``root`` with cases c-0000..c-<n-1> (the per-case tables' ids), then
    with ``split`` its frozen dev/test split (seed 13, 30% test). Returns the version the runs were measured
    on (the file before the split was appended) and which cases are on dev (None without a split)."""
    from rag_experiments.golden import GoldenFile
    from rag_experiments.golden.split import DEV, current_split, freeze

    g = GoldenFile(root / "experiments" / "golden" / name)
    g.append([{"type": "case", "id": f"c-{i:04d}", "query": f"question {i}?",
               "kind": "exact" if i % 2 else "paraphrase", "doc_type": "config" if i % 3 else "reference",
               "provenance": {"method": "human", "author": "t"},
               "evidence": [{"doc_id": "d1", "source_uri": "mini/d1.html", "start": 4, "end": 12,
                             "quote": EVIDENCE_TEXT[4:12], "doc_hash": "h", "grade": 2}]} for i in range(n)])
    version = g.digest()
    if not split:
        return version, None
    freeze(g.path, seed=13, test_fraction=0.3, who="t")
    sides = current_split(g.read_records()).sides([f"c-{i:04d}" for i in range(n)])
    return version, np.array(sides) == DEV


def sweep_callback_config(sweep_dir: Path):
    """The Hydra config the sweep callback sees for ``run.py -m fusion.rrf_k=10,30,60 progress=false``
    (basic sweeper and launcher, objective recall_at_5, the sweep summary on)."""
    from omegaconf import OmegaConf

    return OmegaConf.create({
        "tracking": {"enabled": True, "uri": None, "experiment": "rag-experiments", "sweep_summary": True},
        "objective": "recall_at_5",
        "hydra": {
            "overrides": {"task": ["fusion.rrf_k=10,30,60", "progress=false"]},
            "sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper", "params": None},
            "launcher": {"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"},
            "sweep": {"dir": str(sweep_dir)},
        },
    })


def aggregate(per_case: pd.DataFrame, names=METRICS) -> dict[str, float]:
    from rag_experiments.evaluation.evaluate import aggregate as agg
    from rag_experiments.evaluation.intervals import ci_metrics

    out = agg(per_case, list(names))
    out["n_cases"] = float(len(per_case))
    out.update(ci_metrics(per_case, list(names), samples=200, seed=13))
    return out


@pytest.fixture(scope="session")
def _template_db(tmp_path_factory) -> Path:
    """An initialised MLflow sqlite database (creating the tables takes ~5 s; copying it, ms).

    Created from inside its own folder: the store resolves the Default experiment's relative
    ``./mlruns`` against the working directory, which must never be the repository.
    """
    import os

    from mlflow.tracking import MlflowClient

    folder = tmp_path_factory.mktemp("mlflow_template")
    db = folder / "mlflow.db"
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()
    finally:
        os.chdir(cwd)
    return db


@pytest.fixture
def store(tmp_path, monkeypatch, _template_db):
    """(project folder, experiment id): a fresh store under RAG_EXP_HOME/mlruns.

    ``mlflow.set_tracking_uri`` exports MLFLOW_TRACKING_URI into the process environment; the
    setenv-then-delenv below makes monkeypatch restore the variable's absence afterwards, so no
    later test inherits this temporary store. Artifacts go under the temp folder: the experiment
    is created with an explicit location and the working directory is the temp folder.
    """
    import shutil

    import mlflow

    (tmp_path / "mlruns").mkdir()
    shutil.copy(_template_db, tmp_path / "mlruns" / "mlflow.db")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "unset")
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.delenv("RAG_EXP_PARENT_RUN_ID", raising=False)
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    from rag_experiments.paths import artifact_root, tracking_uri

    mlflow.set_tracking_uri(tracking_uri())
    exp_id = mlflow.create_experiment("rag-experiments", artifact_location=artifact_root())
    mlflow.set_experiment(experiment_id=exp_id)
    yield tmp_path, exp_id
    assert mlflow.active_run() is None


def log_run(exp_id: str, per_case: pd.DataFrame | None, *, name: str = "run", golden: str = GOLDEN,
            corpus: str = CORPUS, config: dict | None = None, tags: dict | None = None, parent: str | None = None,
            status: str = "FINISHED", metrics: dict | None = None) -> str:
    """Log a run in ``exp_id`` of the current tracking store as log_experiment does (see the module)."""
    import mlflow
    import yaml

    from rag_experiments.tracking.mlflow_run import flatten

    config = config or base_config()
    all_tags = {"variant": config.get("retrieval", {}).get("variant", "hybrid"), "golden_sha256": golden,
                "corpus_digest": corpus, "labels_validated": "false", **(tags or {})}
    if parent:
        all_tags["mlflow.parentRunId"] = parent
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mlflow.start_run(experiment_id=exp_id, run_name=name, tags=all_tags) as run:
            mlflow.log_params(flatten(config))
            mlflow.log_text(yaml.safe_dump(config, sort_keys=False), "config.yaml")
            if per_case is not None:
                mlflow.log_metrics(aggregate(per_case))
                mlflow.log_table(per_case, artifact_file="per_case.json")
            if metrics:
                mlflow.log_metrics(metrics)
            if status != "FINISHED":
                mlflow.end_run(status=status)
    return run.info.run_id


@pytest.fixture
def make_run(store):
    _, exp_id = store
    return functools.partial(log_run, exp_id)


@pytest.fixture
def make_parent(store):
    from mlflow.tracking import MlflowClient

    _, exp_id = store

    def make(name: str = "sweep") -> str:
        c = MlflowClient()
        run = c.create_run(exp_id, run_name=name, tags={"sweep": "parent", "sweep_params": "{}"})
        c.set_terminated(run.info.run_id, status="FINISHED")
        return run.info.run_id

    return make


def cli(*argv: str) -> int:
    from rag_experiments.cli import main

    return main(list(argv))


@pytest.fixture
def repo_conf(store) -> Path:
    """A copy of the repo's conf/ inside the temp project (for composing promoted presets)."""
    import shutil

    root, _ = store
    src = Path(__file__).resolve().parents[2] / "conf"
    shutil.copytree(src, root / "conf", dirs_exist_ok=True, ignore=shutil.ignore_patterns("promoted*.yaml"))
    return root / "conf"


@pytest.fixture
def small_sweep(store, tmp_path):
    """A three-point ``fusion.rrf_k`` sweep logged through the real Hydra sweep callback: its
    parent as the callback makes it, its children as :func:`make_run` logs runs.

    Returns ``(parent_id, child_ids, experiment_id)``; the best child is ``rrf_k=30``.
    """
    _, exp_id = store
    return log_small_sweep(exp_id, tmp_path / "multirun")


def log_small_sweep(exp_id: str, sweep_dir: Path) -> tuple[str, list[str], str]:
    """The :func:`small_sweep` fixture's sweep in ``exp_id`` of the current tracking store."""
    import os

    from rag_experiments.tracking.hydra_callback import MlflowSweepCallback
    from rag_experiments.tracking.mlflow_run import PARENT_ENV

    cfg = sweep_callback_config(sweep_dir)
    callback = MlflowSweepCallback()
    callback.on_multirun_start(cfg)
    parent = os.environ[PARENT_ENV]
    n = 40
    scores = {10: [1.0 if i % 4 else 0.0 for i in range(n)],   # 0.75
              30: [1.0 if i % 8 else 0.0 for i in range(n)],   # 0.875: the best
              60: [1.0 if i % 2 else 0.0 for i in range(n)]}   # 0.5
    children = []
    for k, r5 in scores.items():
        children.append(log_run(exp_id, per_case_frame(r5, seed=k), name=f"fusion.rrf_k={k} progress=false",
                                config=base_config(**{"fusion.rrf_k": k}), parent=parent))
        callback.on_job_end(cfg, None)
    callback.on_multirun_end(cfg)
    assert PARENT_ENV not in os.environ
    return parent, children, exp_id


@pytest.fixture
def fewer_flips(monkeypatch):
    """2,000 sign flips per paired test in commands (the default is 10,000), for tests whose decisions are
    far from alpha: ``pytestmark = pytest.mark.usefixtures("fewer_flips")``."""
    monkeypatch.setenv("RAG_EXP_RESAMPLES", "2000")
