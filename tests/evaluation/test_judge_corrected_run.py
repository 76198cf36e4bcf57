"""A real run (PostgreSQL, MLflow, Hydra) logs judge-corrected metrics when a case sample exists.

The mini golden set gets a machine judge's YES on each case's two highest-ranked hits that are
not its evidence; people check every one of them (all cases: the sample is the golden set) and
say NO to the hits of half the cases. With every case checked, the corrected estimate must equal
the metric of a run scored on the people's verdicts written into the golden set as human
judgements, which is computed by the ordinary evaluation and is independent of the estimator.
"""

from __future__ import annotations

import json

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.config import settings_from_cfg
from rag_experiments.experiment import run_experiment
from rag_experiments.golden import GoldenFile
from rag_experiments.golden import spotcheck as sc
from rag_experiments.golden.build import span_json
from rag_experiments.golden.records import new_id

from ..test_config import _compose
from ..test_pipeline import _mini_overrides

HEADLINE = ("recall_at_5", "recall_at_20", "mrr_at_10", "ndcg_at_10")


def test_a_run_logs_the_judge_corrected_metrics_beside_its_own(project, mini_golden, mini_docs, monkeypatch, capsys):
    from rag_experiments.evaluation import judge_corrected as jc_module
    from rag_experiments.pipeline import log_result
    from rag_experiments.tracking.judge_corrected_log import read_judge_corrected

    monkeypatch.setattr(jc_module, "MIN_CASES", 5)  # the mini set has 10 cases
    cfg = _compose(_mini_overrides(mini_golden))
    first = run_experiment(settings_from_cfg(cfg))
    docs = {d.doc_id: d for d in mini_docs}
    machine, spot, people = [], [], []
    for i, case in enumerate(first.golden.scorable):
        evidence = {(e.span.doc_id, e.span.start, e.span.end) for e in case.evidence}
        hits = [h for h in first.results[case.case_id].hits if (h.doc_id, h.start, h.end) not in evidence][:2]
        for h in hits:
            span = span_json(docs[h.doc_id], h.start, h.end)
            jid = new_id("j", case.case_id, h.doc_id, h.start, h.end)
            verdict = "NO" if i % 2 == 0 else "YES"
            machine.append({"type": "judgement", "id": jid, "case_id": case.case_id, "span": span, "verdict": "YES",
                            "judge": {"kind": "llm", "model": "m", "prompt_version": "v1"}})
            spot.append({"type": "spotcheck", "id": f"s-{jid}", "judgement_id": jid, "case_id": case.case_id,
                         "human_verdict": verdict, "llm_verdict": "YES",
                         "judge": {"kind": "llm", "model": "m", "prompt_version": "v1"}})
            people.append({"type": "judgement", "id": f"p-{jid}", "case_id": case.case_id, "span": span,
                           "verdict": verdict, "judge": {"kind": "human", "name": "ann"}})
    GoldenFile(mini_golden).append(machine)
    for rec in spot:
        sc.append_spotcheck(sc.spotcheck_path(mini_golden), rec)

    result = run_experiment(settings_from_cfg(cfg))
    capsys.readouterr()
    run_id = log_result(result, cfg, "corrected")
    out = capsys.readouterr().out
    assert "judge-corrected (people's labels on every machine pair of 10 random cases of 10, PPI):" in out

    GoldenFile(mini_golden).append(people)  # the truth: people's verdicts as the golden set's labels
    truth = run_experiment(settings_from_cfg(cfg)).eval.metrics

    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    m = MlflowClient().get_run(run_id).data.metrics
    assert any(abs(m[n] - truth[n]) > 1e-9 for n in HEADLINE)  # the machine's YES changed something
    for name in HEADLINE:
        assert m[f"judge_corrected_{name}"] == pytest.approx(truth[name], abs=1e-9), name
        assert m[f"judge_corrected_{name}.ci_low"] <= truth[name] <= m[f"judge_corrected_{name}.ci_high"]
    assert m["judge_corrected.cases"] == 10
    from devtools import docs_reference as D

    undocumented = [n for n in m if n.startswith("judge_corrected") and D.metric_family(n) is None]
    assert not undocumented, undocumented  # docs/reference/metrics.md names them
    art = read_judge_corrected(run_id)
    assert len(art["cases"]) == 10 and set(art["human_per_case"]) == set(art["cases"])
    assert art["estimates"]["mrr_at_10"]["uncorrected"] == pytest.approx(m["mrr_at_10"])
    json.dumps(art)  # plain JSON
