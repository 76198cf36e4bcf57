"""Stored runs (retrieval=stored, `rag-exp import-run`): a run file of a system that cannot be
called here is scored like a called one. Real Hydra, PostgreSQL-free (the file is its own
cache), real MLflow store; the expected values come from the in-process run of the same system."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.cli import main as cli
from rag_experiments.errors import UserError
from rag_experiments.evaluation.runfile import run_file_text
from rag_experiments.experiment import run_experiment

from .test_external import MINI, golden_env, settings  # noqa: F401 - the fixture


def _stored(golden, path, fmt="trec", *extra):
    return settings(golden, "oracle", "retrieval=stored", f"retrieval.stored.path={path}",
                    f"retrieval.stored.format={fmt}", *extra)


def _store_runs(golden):
    client = MlflowClient(f"sqlite:///{golden.parent / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("rag-experiments")
    return client, client.search_runs([exp.experiment_id]) if exp else []


def test_a_trec_file_of_a_run_scores_what_the_run_scored(golden_env, tmp_path):
    called = run_experiment(settings(golden_env, "oracle", "retrieval.external.params.rank=3"))
    path = tmp_path / "their.trec"
    path.write_text(run_file_text(called.results, "theirs"))
    sets = [f"corpus.path={MINI}", "corpus.name=mini", f"golden.path={golden_env}", "progress=false",
            "eval.bootstrap_samples=100", "tracking.plots=false"]
    assert cli(["import-run", str(path), "--name", "theirs", *[a for s in sets for a in ("--set", s)]]) == 0
    client, runs = _store_runs(golden_env)
    (run,) = [r for r in runs if r.info.run_name == "theirs"]
    assert run.data.tags["variant"] == "stored" and run.data.params["retrieval.stored.format"] == "trec"
    assert run.data.metrics["mrr_at_10"] == pytest.approx(called.eval.metrics["mrr_at_10"]) == pytest.approx(1 / 3)
    assert run.data.metrics["alignment.offsets"] == 200 and run.data.metrics["alignment.missing_queries"] == 0
    assert not any(k.startswith("retrieval.external.target") for k in run.data.params)


def test_jsonl_with_text_passages_by_query_and_a_missing_case(golden_env, tmp_path):
    from rag_experiments.golden.resolve import load_golden

    from . import external_targets

    cases = load_golden(golden_env).scorable
    path = tmp_path / "their.jsonl"
    path.write_text("".join(json.dumps({"query": c.query, "passages": external_targets.oracle(c.query, 20, mode="text")})
                            + "\n" for c in cases[1:]))  # the first case has no list
    result = run_experiment(_stored(golden_env, path, "jsonl"))
    assert result.external["alignment.missing_queries"] == 1 and result.external["alignment.exact"] == 9
    assert result.eval.metrics["recall_at_5"] == pytest.approx(9 / 10)  # the missing case scores 0 (TREC)


def test_a_bare_docno_is_the_whole_document(golden_env, tmp_path):
    from rag_experiments.golden.resolve import load_golden

    lines = [f"{c.case_id} Q0 {c.relevant[0].span.doc_id} 1 1.0 t\n" for c in load_golden(golden_env).scorable]
    path = tmp_path / "docs.trec"
    path.write_text("".join(lines))
    result = run_experiment(_stored(golden_env, path, "trec", "eval.level=document"))
    assert result.eval.metrics["recall_at_5"] == 1.0


@pytest.mark.parametrize("content, message", [
    ("c1 Q0 doc 1 1.0\n", "their.trec:1: expected 'QID Q0 DOCNO RANK SCORE TAG' (6 fields)"),
    ("c1 Q0 doc one 1.0 t\n", "their.trec:1: rank 'one' / score '1.0' are not numbers"),
    ("c1 Q0 doc 1 nan t\n", "their.trec:1: score is NaN"),
    ("nobody Q0 doc 1 1.0 t\n", "none of its 1 lists is for a case of the golden set"),
    ("", "holds no ranked list"),
])
def test_a_bad_run_file_is_one_line_naming_file_and_line(golden_env, tmp_path, content, message):
    path = tmp_path / "their.trec"
    path.write_text(content)
    with pytest.raises(UserError) as exc:
        run_experiment(_stored(golden_env, path))
    assert message in exc.value.message


def test_a_stored_run_cannot_be_searched_or_served(golden_env, tmp_path):
    from rag_experiments.serving.retriever import Retriever

    with pytest.raises(UserError, match="a stored run answers only the golden set's cases"):
        Retriever.from_config([f"corpus.path={MINI}", "corpus.name=mini", "retrieval=stored",
                               f"retrieval.stored.path={tmp_path / 'x.trec'}"])
