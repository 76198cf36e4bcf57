"""Metric columns and the objective come from the runs' own config, never hard-coded names."""

from __future__ import annotations

import pytest

from rag_experiments.errors import UserError
from rag_experiments.tracking.configured import comparison_defaults, configured_objective, headline_metrics
from rag_experiments.tracking.runs import RunView


def _run(params: dict, metrics: dict, rid: str = "a" * 32) -> RunView:
    return RunView(id=rid, name="r", status="FINISHED", experiment_id="1", start_time=0, tags={},
                   metrics=metrics, params=params)


BEIR = {"eval.ks": "[10, 100]", "eval.mrr_k": "10", "eval.ndcg_k": "10", "objective": "ndcg_at_10"}
BEIR_METRICS = {"recall_at_10": 0.5, "recall_at_100": 0.8, "mrr_at_10": 0.4, "ndcg_at_10": 0.45,
                "hit_at_10": 0.6, "ndcg_at_10.exact": 0.5}


def test_a_beir_preset_is_compared_on_its_own_cutoffs_and_objective():
    runs = [_run(BEIR, BEIR_METRICS), _run(BEIR, BEIR_METRICS, "b" * 32)]
    assert headline_metrics(runs[0]) == ["recall_at_10", "recall_at_100", "mrr_at_10", "ndcg_at_10"]
    assert comparison_defaults(runs) == (["recall_at_10", "recall_at_100", "mrr_at_10", "ndcg_at_10"], "ndcg_at_10")


def test_runs_without_eval_params_fall_back_to_what_they_logged():
    run = _run({"objective": "recall_at_5.exact"}, {"recall_at_20": 1, "recall_at_5": 1, "ndcg_at_10": 1,
                                                     "recall_at_5.exact": 1, "hit_at_5": 1})
    assert headline_metrics(run) == ["recall_at_5", "recall_at_20", "ndcg_at_10"]
    assert comparison_defaults([run])[1] == "recall_at_5"  # a segment objective: its metric


def test_different_objectives_need_an_explicit_choice():
    runs = [_run({"objective": "recall_at_5"}, {}), _run({"objective": "ndcg_at_10"}, {}, "b" * 32)]
    with pytest.raises(UserError, match="different objectives"):
        configured_objective(runs)
    with pytest.raises(UserError, match="no run states its objective"):
        configured_objective([_run({}, {})])
