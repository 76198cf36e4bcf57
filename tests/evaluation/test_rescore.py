"""Stored ranked lists rescored against a golden version: the same numbers as the run, the
older version's labels when asked, no retrieval."""

from __future__ import annotations

import pandas as pd
import pytest

from rag_experiments.evaluation.evaluate import EvalParams, evaluate
from rag_experiments.evaluation.rescore import params_from_flat, rescore
from rag_experiments.evaluation.runfile import parse_run_file, run_file_text
from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.golden.versions import current_version, locate

from ..tracking.golden_runs import good, ranked

METRICS = ["recall_at_5", "recall_at_20", "mrr_at_10", "ndcg_at_10", "hit_at_5", "judged_at_10"]


def test_run_file_round_trips_spans_and_ranks(mini_golden):
    _, results = ranked(mini_golden, good)
    text = run_file_text(results, "my run")
    first = text.splitlines()[0].split()
    assert first[1] == "Q0" and first[3] == "1" and first[5] == "my_run" and ":" in first[2]
    back = parse_run_file(text)
    assert set(back) == set(results)
    for cid, rl in results.items():
        assert [(h.doc_id, h.start, h.end, h.rank) for h in back[cid].hits] == \
               [(h.doc_id, h.start, h.end, h.rank) for h in rl.hits]


def test_rescoring_the_stored_lists_reproduces_the_run(mini_golden):
    golden, results = ranked(mini_golden, good)
    logged = evaluate(golden, results).per_case
    again, missing = rescore(golden, parse_run_file(run_file_text(results)))
    assert missing == ()
    pd.testing.assert_frame_equal(again.per_case[METRICS], logged[METRICS])


def test_rescoring_uses_the_older_versions_labels(mini_golden):
    v1 = current_version(mini_golden)
    golden, results = ranked(mini_golden, good)
    case = golden.cases[0]
    span = case.relevant[0].span
    # v2: a human re-grades the case's own evidence as PART
    GoldenFile(mini_golden).append([{
        "type": "judgement", "id": "j-part", "case_id": case.case_id, "span": span.to_json(), "verdict": "PART",
        "judge": {"kind": "human", "name": "tests"}, "reason": "only half the answer"}])
    stored = parse_run_file(run_file_text(results))
    on_v2, _ = rescore(locate(mini_golden, current_version(mini_golden)), stored)
    on_v1, _ = rescore(locate(mini_golden, v1), stored)
    row = lambda ev: ev.per_case.set_index("case_id").loc[case.case_id]  # noqa: E731
    assert row(on_v1)["grades"] == [2] and row(on_v2)["grades"] == [1]


def test_cases_without_a_stored_list_are_returned_not_scored(mini_golden):
    golden, results = ranked(mini_golden, good)
    dropped = golden.cases[0].case_id
    del results[dropped]
    ev, missing = rescore(golden, results)
    assert missing == (dropped,) and len(ev.per_case) == 9


def test_eval_params_come_from_the_runs_flattened_params():
    p = params_from_flat({"eval.ks": "[3, 10]", "eval.mrr_k": "5", "eval.min_coverage": "0.25"})
    assert p == EvalParams(ks=(3, 10), mrr_k=5, min_coverage=0.25)
    assert params_from_flat({}) == EvalParams()


def test_a_malformed_run_file_names_the_line():
    from rag_experiments.errors import UserError

    with pytest.raises(UserError, match=r"run.trec:2: docno 'nospan' is not DOC_ID:START-END"):
        parse_run_file("c1 Q0 d:0-5 1 1.0 t\nc1 Q0 nospan 2 0.5 t\n")
