"""The gate's exact-identifier guard on a golden set written by hand (issue 44, item 1): cases
added with ``rag-exp golden add --kind`` fill the exact and paraphrase segments, so a config that
loses the exact questions fails the nightly gate even when the overall drop is not significant.

Real golden file (added through the CLI from the mini corpus's files, no database), real
evaluation of ranked lists, real MLflow store (see golden_runs.py).
"""

from __future__ import annotations

import pytest
from mini_golden_spec import MINI_CASES
from mlflow.tracking import MlflowClient

from rag_experiments.golden.resolve import load_golden

from ..conftest import FIXTURES
from .conftest import cli
from .golden_runs import log_golden_run

# more exact questions on the same pages, written as a person would (stem, quote, question, identifier)
MORE_EXACT = [
    ("errcodes-appendix", "| 40001 | serialization_failure |", "What does SQLSTATE 40001 mean?", None),
    ("errcodes-appendix", "| 23503 | foreign_key_violation |", "When is error 23503 raised?", None),
    ("functions-json", "`jsonb_array_length` returns the number of elements", "What does jsonb_array_length return?",
     None),
    ("functions-json", "converts any SQL value to jsonb", "What does to_jsonb accept?", None),
]


@pytest.fixture
def hand_written(store, mini_docs):
    """The mini golden set's questions plus four more, each added with `golden add --kind`."""
    root, exp = store
    path = root / "experiments" / "golden" / "ours.jsonl"
    uri = {d.doc_id.split("/")[-1].removesuffix(".html"): d.source_uri for d in mini_docs}
    cases = [(stem, quote, query, kind, ident) for stem, quote, query, kind, ident in MINI_CASES]
    cases += [(stem, quote, query, "exact", ident) for stem, quote, query, ident in MORE_EXACT]
    for stem, quote, query, kind, ident in cases:
        argv = ["golden", "add", "--golden", str(path), "--corpus", str(FIXTURES / "mini_corpus"), "--query", query,
                "--source-uri", uri[stem], "--quote", quote, "--kind", kind, "--author", "ana"]
        assert cli(*argv, *(["--identifier", ident] if ident else [])) == 0, query
    return path, exp


def test_the_exact_guard_fails_the_gate_on_a_hand_written_set(hand_written, capsys):
    path, exp = hand_written
    golden = load_golden(path)
    exact = [c.case_id for c in golden.cases if c.kind == "exact"]
    paraphrase = [c.case_id for c in golden.cases if c.kind == "paraphrase"]
    assert (len(exact), len(paraphrase), len(golden.cases)) == (9, 5, 14)
    # the champion misses three paraphrases; tonight's config finds them but loses six exact questions:
    # overall 3 wins and 6 losses (not significant), on the exact segment 6 losses of 9 (p = 2/64)
    log_golden_run(path, name="champion", exp_id=exp, miss=set(paraphrase[:3]))
    assert cli("promote") == 0
    now = log_golden_run(path, name="nightly", exp_id=exp, miss=set(exact[:6]))
    capsys.readouterr()
    assert cli("gate", "--run", now) == 1
    out = capsys.readouterr().out
    assert "gate FAIL" in out and "recall@5 (exact): significantly worse" in out
    assert "recall@5: significantly worse" not in out  # the overall drop alone would have passed
    assert "no cases in this segment" not in out
    tags = MlflowClient().get_run(now).data.tags
    assert tags["gate"] == "fail" and "exact" in tags["gate_reason"]
