"""promote and the gate log the case explorer of the candidate against the champion (issue 59 deliver 1)
and print its link in one line."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.golden.resolve import load_golden

from ..conftest import build_mini_golden
from .conftest import cli
from .golden_runs import bad, good
from .test_explorer import log_mini_run


pytestmark = pytest.mark.usefixtures("fewer_flips")  # every decision here is far from alpha


def _page(run_id: str, champion: str, tmp_path) -> str:
    name = f"explorer/cases_vs_{champion[:8]}.html"
    return open(MlflowClient().download_artifacts(run_id, name, str(tmp_path)), encoding="utf-8").read()


def test_promote_and_the_gate_log_the_explorer_for_candidate_vs_champion(store, mini_docs, capsys, tmp_path):
    root, exp_id = store
    path = build_mini_golden(root / "mini.jsonl", mini_docs)
    cases = load_golden(path).scorable
    lost, won = cases[0].case_id, cases[1].case_id
    champion = log_mini_run(path, lambda c: bad(c) if c.case_id in (won, cases[2].case_id) else good(c), "hybrid")
    assert cli("promote", "--metric", "recall_at_5") == 0
    candidate = log_mini_run(path, lambda c: bad(c) if c.case_id == lost else good(c), "vector")
    capsys.readouterr()
    assert cli("promote", "--metric", "recall_at_5", "--dry-run") == 1  # a dry run logs nothing, names the command
    out = capsys.readouterr().out
    assert f"the cases side by side: rag-exp explore {champion} {candidate} --out FILE (this dry run logs nothing)" \
        in out, out
    assert not MlflowClient().list_artifacts(candidate, "explorer")
    assert cli("promote", "--metric", "recall_at_5") == 1  # one case better: refused, the page still logged
    out = capsys.readouterr().out
    link = [ln for ln in out.splitlines() if "the cases behind" in ln]
    assert len(link) == 1 and link[0].startswith("MLflow UI, the cases behind W/T/L 2/"), out
    assert "of the candidate vs the champion (lost first)" in link[0], link
    name = f"explorer/cases_vs_{champion[:8]}.html"
    assert f"#/experiments/{exp_id}/runs/{candidate}/artifacts/{name}?workflowType=machine_learning" in link[0]
    page = _page(candidate, champion, tmp_path)
    assert f"champion {champion[:8]}" in page and f"candidate {candidate[:8]}" in page and lost in page

    # the gate logs the same page (its labels: champion / current) to the run it checks
    summary = tmp_path / "summary.md"
    assert cli("gate", "--run", candidate, "--markdown-summary", str(summary)) == 0
    out = capsys.readouterr().out
    link = [ln for ln in out.splitlines() if "the cases behind" in ln]
    assert len(link) == 1 and f"runs/{candidate}/artifacts/{name}" in link[0], out
    assert f"- {link[0]}" in summary.read_text()  # the job summary links the page too
    page = _page(candidate, champion, tmp_path / "gate")
    assert f"champion {champion[:8]}" in page and f"current {candidate[:8]}" in page
    # no dev/test split in this golden set: --decide-on test is one line and exit 2, not a verdict on all cases
    capsys.readouterr()
    assert cli("gate", "--run", candidate, "--decide-on", "test") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--decide-on test: the golden set of these runs has no dev/test split (no split record)" in err, err
    assert "rag-exp golden split freezes one" in err and "Traceback" not in err, err
