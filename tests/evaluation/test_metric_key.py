"""MetricKey: parse and print give the logged MLflow name back byte for byte; one headline list."""

from __future__ import annotations

import pandas as pd
import pytest

from rag_experiments.evaluation.evaluate import EvalParams, aggregate
from rag_experiments.evaluation.metric_key import MetricKey, Segment, headline
from rag_experiments.tracking.configured import headline_names


@pytest.mark.parametrize("name, key, title", [
    ("recall_at_5", MetricKey("recall", 5), "recall@5"),
    ("recall_at_5.exact", MetricKey("recall", 5, Segment("kind", "exact")), "recall@5 (exact)"),
    ("recall_at_5.doc_type.config", MetricKey("recall", 5, Segment("doc_type", "config")),
     "recall@5 (doc_type=config)"),
    ("ndcg_at_10.paraphrase", MetricKey("ndcg", 10, Segment("kind", "paraphrase")), "ndcg@10 (paraphrase)"),
    ("ann_recall_at_depth", MetricKey("ann_recall_at_depth"), "ann_recall@depth"),
    ("n_cases", MetricKey("n_cases"), "n_cases"),
])
def test_parse_and_print_round_trip(name, key, title):
    assert MetricKey.parse(name) == key
    assert key.mlflow_name == name
    assert key.title == title
    assert {key: 1}[MetricKey.parse(name)] == 1  # hashable, equal by value


def test_the_headline_list_and_the_eval_names():
    p = EvalParams(ks=(5, 20), mrr_k=10, ndcg_k=10, judged_k=10)
    assert [k.mlflow_name for k in headline(p.ks, p.mrr_k, p.ndcg_k)] == [
        "recall_at_5", "recall_at_20", "mrr_at_10", "ndcg_at_10"]
    assert p.metric_names() == ["recall_at_5", "recall_at_20", "mrr_at_10", "ndcg_at_10", "hit_at_5", "hit_at_20",
                                "complete_at_5", "complete_at_20", "precision_at_5", "precision_at_20",
                                "judged_at_10"]
    assert headline_names(["ndcg_at_10", "hit_at_5", "recall_at_20", "recall_at_5.exact", "mrr_at_10",
                           "recall_at_5"]) == ["recall_at_5", "recall_at_20", "mrr_at_10", "ndcg_at_10"]


def test_aggregate_names_every_segment_as_before():
    pc = pd.DataFrame({"kind": ["exact", "paraphrase"], "doc_type": ["config", "guide"], "recall_at_5": [1.0, 0.0]})
    assert list(aggregate(pc, ["recall_at_5"])) == [
        "recall_at_5", "recall_at_5.exact", "recall_at_5.paraphrase",
        "recall_at_5.doc_type.config", "recall_at_5.doc_type.guide"]
