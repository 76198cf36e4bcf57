"""compare / promote / the gate pair two runs scored on the same whole-case label sample (real MLflow).

The golden set and runs are tests/evaluation/test_sampled_difference.py's: 4 cases, 2 of the 3 pool
cases drawn and judged. Estimated recall@5 (= @3): run A 0.8125, run B 0.5625; paired B - A = -0.25 with
se sqrt(3/16) and 1 degree of freedom (t 12.706): the interval holds 0, a tie at this sample size,
while the plain recall (unjudged = miss) says B is 0.25 worse.
"""

from __future__ import annotations

import math

import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.evaluation.evaluate import EvalParams, evaluate
from rag_experiments.evaluation.sampled import case_table, sampling_design, table_estimate
from rag_experiments.tracking.mlflow_run import log_files, per_case_for_mlflow
from rag_experiments.tracking.runs import runs_by_ids
from rag_experiments.tracking.sampled_log import log_sampled, sampled_lines
from rag_experiments.types import RankedList

from ..evaluation.test_sampled_difference import T12, tiny  # noqa: F401

P = EvalParams()  # recall@5: the runs return 3 passages, so recall@5 is the hand-worked recall@3


def _logged_run(make_run, g, ids, hits, name: str, table: bool = True) -> str:
    results = {cid: RankedList(c.query, tuple(hits[cid])) for cid, c in ((c.case_id, c) for c in g.cases)}
    ev = evaluate(g, results, P)
    run_id = make_run(per_case_for_mlflow(ev.per_case), name=name, golden=g.digest)
    t = case_table(g, hits, ids, [5], sampling_design(g.records))
    e = table_estimate(t, 5)
    log_sampled(run_id, {"ipw_recall_at_5": e.value, "ipw.population": 3.0}, "sampled labels: 2 of 3 cases drawn",
                t if table else None)
    return run_id


@pytest.fixture(autouse=True)
def _no_ci_noise(monkeypatch):
    monkeypatch.delenv("RAG_EXP_RESAMPLES", raising=False)


def test_compare_promote_and_the_gate_show_the_paired_sampled_difference(store, make_run, tiny):
    from rag_experiments.tracking.champion import Champion
    from rag_experiments.tracking.compare import build_comparison
    from rag_experiments.tracking.promote import decide

    g, ids, run_a, run_b = tiny
    a = _logged_run(make_run, g, ids, run_a, "baseline")
    b = _logged_run(make_run, g, ids, run_b, "candidate")
    runs = runs_by_ids([a, b])
    half = T12 * math.sqrt(3 / 16)  # 5.502
    want = (f"sampled labels candidate vs baseline: recall@5 Δ-0.250 [{-0.25 - half:+.3f}, {-0.25 + half:+.3f}] "
            "(holds 0: a tie at this sample size), scored with unjudged = miss Δ-0.250")
    lines = sampled_lines(runs, ["baseline", "candidate"])
    assert lines[0] == want
    assert lines[-1].startswith("sampled labels: Δ estimates recall with the whole pool judged")
    cmp = build_comparison(runs, metrics=["recall_at_5"], segments=[], primary="recall_at_5",
                           labels=["baseline", "candidate"])
    assert want in cmp.notes and "holds 0: a tie at this sample size" in cmp.to_markdown()
    champ, cand = runs
    for mode in ("beat", "no_loss"):  # promote, the nightly gate
        decision = decide(Champion(champ, None, "registry", "recall_at_5"), cand, "recall_at_5", mode=mode,
                          guard_segment="", n_resamples=200)
        assert any(n.startswith("sampled labels candidate vs champion: recall@5 Δ-0.250") for n in decision.notes)


def test_no_sampled_labels_no_lines_and_a_run_without_the_table_is_said(store, make_run, tiny):
    g, ids, run_a, run_b = tiny
    plain = [make_run(None, name=n, golden=g.digest) for n in ("a", "b")]
    assert sampled_lines(runs_by_ids(plain), ["a", "b"]) == []
    a = _logged_run(make_run, g, ids, run_a, "baseline", table=False)
    b = _logged_run(make_run, g, ids, run_b, "candidate")
    lines = sampled_lines(runs_by_ids([a, b]), ["baseline", "candidate"])
    assert lines[0] == ("sampled labels: the baseline has no per-case estimate (no whole-case sample when it ran): "
                        "no paired estimate against the baseline")


def test_a_damaged_table_is_one_line_naming_the_file(store, make_run, tiny):
    g, ids, run_a, run_b = tiny
    a = _logged_run(make_run, g, ids, run_a, "baseline")
    b = _logged_run(make_run, g, ids, run_b, "candidate", table=False)
    log_files(MlflowClient(), b, {"sampled_labels.json": '{"sample": "s-hand", "cases": {}}'})
    lines = sampled_lines(runs_by_ids([a, b]), ["baseline", "candidate"])
    assert lines[0] == ("sampled labels: candidate's sampled_labels.json cannot be read (no stratum, population, "
                        "sampled, ks): no paired estimate against the baseline")
