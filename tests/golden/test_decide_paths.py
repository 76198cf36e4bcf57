"""`golden label --decide` through its other two paths, end to end through the CLI:

* the LLM judge: the real Anthropic SDK pointed at the local stub (tests/golden/anthropic_stub.py),
  the passages sent in the decide order, the verdicts recorded as the judge's with the decision in
  their provenance, the loop stopping when settled;
* ``--decide --sweep PARENT``: the sweep's best point against the points it is compared with (a
  point max-T cannot tell from the best, else the runner-up), the clearly worse point left out.

Before this change the judge path had no test, and ``--decide`` took exactly two runs: the sweep
test fails on the old code (argparse: expected 2 arguments)."""

from __future__ import annotations

import io
import sys

import pytest

from rag_experiments.golden.golden_file import GoldenFile

from ..tracking.conftest import _template_db, cli, store  # noqa: F401 - fixtures
from ..tracking.golden_runs import log_golden_run
from .anthropic_stub import stub, text  # noqa: F401 - fixture
from .test_decide import two_runs

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


def test_decide_with_the_llm_judge_through_the_stub(store, stub, mini_golden, capsys, monkeypatch):
    run_a, run_b, cases, sets = two_runs(mini_golden)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
    stub.responder = lambda body: text('{"verdict": "NO", "reason": "about something else"}')
    code = cli("golden", "label", "--golden", str(mini_golden), "--decide", "alpha", run_b, "--decide-metric",
               "mrr_at_10", "--concurrency", "2", "--yes", *sets)
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0, out
    assert "labels done 0 (0 before this session), left" in out and "stop: the decision is settled after" in out
    sent = stub.requests()
    got = [r for r in GoldenFile(mini_golden).read() if r["type"] == "judgement"]
    assert sent and len(got) == len(sent) < len(cases)  # settled before the judge saw every passage
    assert {j["verdict"] for j in got} == {"NO"} and {j["judge"]["kind"] for j in got} == {"llm"}
    assert {tuple(j["provenance"]["pool"]["decide"]) for j in got} == {(run_a, run_b)}
    assert f"judgements appended: {len(got)}" in out


def sweep(mini_golden, store):
    """A sweep parent with three points: alpha (each case's evidence first), beta (an unjudged passage
    first, the evidence second) and gamma (the evidence nowhere)."""
    import mlflow

    from ..tracking.golden_runs import bad

    run_a, run_b, cases, sets = two_runs(mini_golden)
    run_c = log_golden_run(mini_golden, bad, name="gamma")
    with mlflow.start_run(run_name="sweep") as parent:
        pass
    client = mlflow.tracking.MlflowClient()
    for i, rid in enumerate((run_a, run_b, run_c)):
        client.set_tag(rid, "mlflow.parentRunId", parent.info.run_id)
        client.set_tag(rid, "sweep.job_num", str(i))
    return parent.info.run_id, (run_a, run_b, run_c), cases, sets


def test_decide_sweep_takes_the_best_point_and_its_rival(store, mini_golden, capsys, monkeypatch):
    parent, (run_a, run_b, run_c), cases, sets = sweep(mini_golden, store)
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n" * len(cases)))
    code = cli("golden", "label", "--golden", str(mini_golden), "--decide", "--sweep", parent, "--decide-metric",
               "mrr_at_10", "--by-hand", "--labeller", "ann", *sets)
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0, out
    assert f"deciding the best point of sweep {parent[:12]} on mrr@10: alpha against beta" in out
    assert "1 of 1 pair(s) open" in out and "stop: the decision is settled after" in out
    got = [r for r in GoldenFile(mini_golden).read() if r["type"] == "judgement"]
    assert got and {j["verdict"] for j in got} == {"NO"}
    assert {tuple(j["provenance"]["pool"]["decide"]) for j in got} == {(run_a, run_b)}  # gamma is out

    assert cli("golden", "label", "--golden", str(mini_golden), "--decide", "alpha", "--sweep", parent) == 2
    assert "give two runs (--decide A B), or none with --sweep PARENT" in " ".join(capsys.readouterr().err.split())

    # the parent given as a run: said to be a sweep's parent, with --decide --sweep (it said "re-run its config")
    assert cli("golden", "label", "--golden", str(mini_golden), "--decide", "alpha", parent, *sets) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"run {parent} (sweep) is a sweep's parent" in err and f"--decide --sweep {parent}" in err, err
    assert cli("golden", "label", "--golden", str(mini_golden), "--decide", "alpha", "no-such-run", *sets) == 2
    assert "rag-exp compare --last-sweep lists" in " ".join(capsys.readouterr().err.split())  # not "history"


@pytest.mark.parametrize("n", ["0", "-3"])
def test_a_budget_below_one_label_is_refused(mini_golden, capsys, n):
    """--max-labels 0 read as no budget and -3 exported all rows but the last 3 ([:-3]): one line now."""
    assert cli("golden", "label", "--golden", str(mini_golden), "--decide", "a", "b", "--max-labels", n) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"--max-labels {n}: a number of labels, 1 or more" in err, err


def test_a_cut_off_past_the_stored_lists_is_said(store, mini_golden, capsys):
    """The runs keep 2 hits a question: recall@50 would silently be recall@2. It is said in one line;
    a cut-off within the lists says nothing."""
    run_a, run_b, _cases, sets = two_runs(mini_golden)
    base = ["golden", "label", "--golden", str(mini_golden), "--decide", run_a, run_b, "--by-hand", "--dry-run", *sets]
    assert cli(*base, "--decide-metric", "recall_at_50") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert ("note: the runs' stored ranked lists hold at most 2 hits a question, so recall@50 is decided on their "
            "top 2") in out, out
    assert cli(*base, "--decide-metric", "recall_at_2") == 0
    assert "stored ranked lists hold at most" not in capsys.readouterr().out
