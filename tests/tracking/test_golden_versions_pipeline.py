"""End to end on the mini corpus (real PostgreSQL, real pipeline, real MLflow store): a run logs
its golden version and ranked lists; rescoring them reproduces the run; after a production case
is appended the gate passes, and a deliberately worse config still fails it."""

from __future__ import annotations

import mlflow
import pandas as pd
from mlflow.tracking import MlflowClient

from rag_experiments.config import settings_from_cfg
from rag_experiments.evaluation.rescore import params_from_flat, rescore
from rag_experiments.evaluation.runfile import parse_run_file
from rag_experiments.experiment import run_experiment
from rag_experiments.golden.add import add_production_case
from rag_experiments.golden.versions import GoldenVersion, locate
from rag_experiments.pipeline import log_result

from ..test_pipeline import _mini_overrides
from ..test_config import _compose
from .conftest import cli

METRICS = ["recall_at_5", "recall_at_20", "mrr_at_10", "ndcg_at_10", "judged_at_10"]


def _run(golden, name, *extra) -> str:
    cfg = _compose(_mini_overrides(golden, f"run_name={name}", *extra))
    result = run_experiment(settings_from_cfg(cfg))
    return log_result(result, cfg, name)


def test_gate_across_a_grown_golden_set_on_the_real_pipeline(project, mini_golden, mini_docs, capsys):
    champion = _run(mini_golden, "champion")
    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    c = MlflowClient()
    run = c.get_run(champion)
    version = GoldenVersion.from_tags(run.data.tags)
    assert version.records == 10 and version.head
    # the stored ranked lists rescore to exactly the logged per-case metrics, no retrieval
    ranked = parse_run_file(mlflow.artifacts.load_text(f"runs:/{champion}/run.trec"))
    again, missing = rescore(locate(mini_golden, version), ranked, params_from_flat(run.data.params))
    logged = mlflow.load_table("per_case.json", run_ids=[champion])
    assert missing == ()
    pd.testing.assert_frame_equal(again.per_case[METRICS].reset_index(drop=True),
                                  logged[METRICS].reset_index(drop=True), check_dtype=False)
    assert cli("promote") == 0

    docs = {d.doc_id: d for d in mini_docs}
    add_production_case(mini_golden, "default size of the shared buffer pool",
                        source_uri="mini/runtime-config-resource.html",
                        quote="The default is typically 128 megabytes",
                        doc_lookup=lambda uri: vars(docs[uri]) | {"content_hash": docs[uri].content_hash},
                        author="oncall")
    nightly = _run(mini_golden, "nightly")
    capsys.readouterr()
    assert cli("gate", "--run", nightly) == 0
    out = capsys.readouterr().out
    assert "gate PASS" in out and "compared on the 10 shared cases" in out and "1 production" in out

    # a deliberately worse config: retrieval restricted to one document of the six
    worse = _run(mini_golden, "nightly", "retrieval.filters.source_uri_prefix=mini/tutorial")
    assert cli("gate", "--run", worse) == 1
    out = capsys.readouterr().out
    assert "gate FAIL" in out and "significantly worse" in out
