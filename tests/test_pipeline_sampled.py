"""Sampled labels end to end, as a user meets them: two real runs (run.py, real PostgreSQL and
MLflow), a whole-case sample of their pool labelled by hand through the blind CSV (golden label
--sample --by-hand --export/--import), the two configs run again, then rag-exp compare. The runs
log the estimates (ipw_recall_at_k) and the per-case table (sampled_labels.json), and compare
prints the paired estimate of their difference with its interval."""

from __future__ import annotations

import csv

import mlflow
from mlflow.tracking import MlflowClient

from rag_experiments.cli import main as cli
from rag_experiments.golden.golden_file import GoldenFile

from .test_pipeline import MINI, _mini_overrides, _run_py

SECRET = "sk-ant-api03-do-not-print-me"  # an override that carries a key (it changes nothing for pooling)


def _runs(project) -> list:
    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    client = MlflowClient()
    exp = client.get_experiment_by_name("rag-experiments")
    return client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])


def test_a_case_sample_labelled_by_hand_gives_estimates_and_a_paired_difference(project, mini_golden, tmp_path,
                                                                                   capsys):
    variants = ("hybrid", "keyword")
    for v in variants:
        proc = _run_py(project, *_mini_overrides(mini_golden, f"retrieval={v}", "tracking.plots=false"))
        assert proc.returncode == 0, proc.stderr[-3000:]
    first = [r.info.run_id for r in _runs(project)]
    assert len(first) == 2

    sheet = tmp_path / "sample.csv"
    label = ["golden", "label", "--golden", str(mini_golden), "--pool", *first, "-k", "5", "--sample", "12",
             "--seed", "7", "--by-hand", "--labeller", "ann", "--set", f"corpus.path={MINI}",
             "--set", "corpus.name=mini", "--set", "chunking.max_tokens=60", "--set", f"rerank.model={SECRET}"]
    capsys.readouterr()
    assert cli([*label, "--export", str(sheet)]) == 0
    # the command it prints to import the sheet carries the corpus and the labeller the export was given
    printed = capsys.readouterr().out
    assert SECRET not in printed and "rerank.model=***" in printed  # a secret in an override is masked
    assert "(a --set with a secret is masked as ***: put the value back)" in printed
    then = printed.split("then: rag-exp ")[1].split(" (a --set")[0].split()
    masked = then.index("'rerank.model=***'")
    then[masked - 1:masked + 1] = []  # the user puts the value back; this test leaves that override out
    assert then[-2:] == ["--import", str(sheet)] and "corpus.path=" + str(MINI) in then and "ann" in then
    with sheet.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows and len({r["case_id"] for r in rows}) < 10  # whole cases, not all of them
    for i, r in enumerate(rows):
        r["verdict"] = "YES" if i % 3 == 0 else "NO"
    with sheet.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert cli(then) == 0  # the command the export printed: the sheet carries its design
    assert {r["judge"]["name"] for r in GoldenFile(mini_golden).read() if r["type"] == "judgement"} == {"ann"}
    sampled = [r for r in GoldenFile(mini_golden).read() if r["type"] == "judgement" and "sample" in r]
    assert len(sampled) == len(rows) and {r["sample"]["unit"] for r in sampled} == {"case"}
    drawn = {r["case_id"] for r in sampled}

    for v in variants:
        proc = _run_py(project, *_mini_overrides(mini_golden, f"retrieval={v}", "tracking.plots=false"))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "sampled labels: " in proc.stdout and "recall@5 " in proc.stdout
    second = [r for r in _runs(project) if r.info.run_id not in first]
    assert len(second) == 2
    for run in second:
        m = run.data.metrics
        assert m["ipw.sampled_units"] == len(drawn)
        assert m["ipw_recall_at_5.ci_low"] <= m["ipw_recall_at_5"] <= m["ipw_recall_at_5.ci_high"]
        table = mlflow.artifacts.load_dict(f"runs:/{run.info.run_id}/sampled_labels.json")
        assert table["sampled"] == len(drawn) and {c for c, row in table["cases"].items() if "delta" in row} == drawn
        assert len(table["cases"]) == m["n_cases"]

    capsys.readouterr()
    assert cli(["compare", *(r.info.run_id for r in second), "--metrics", "recall_at_5"]) == 0
    out = capsys.readouterr().out
    # coverage is checked at the depth of the metric compared: the top 5 of these runs are judged alike,
    # their top 20 are not; a label sample's coverage differs by design, and the warning says which note counts
    assert "LABEL COVERAGE" not in out
    assert cli(["compare", *(r.info.run_id for r in second), "--metrics", "recall_at_5", "--primary", "recall_at_20"]) == 0
    deep = " ".join(capsys.readouterr().out.replace("│", " ").split())  # the warning panel wraps
    assert "judged@20" in deep and "the sampled-labels note below is the unbiased comparison" in deep
    line = next(x for x in out.splitlines() if "sampled labels" in x and " vs " in x)
    assert "recall@5 Δ" in line and ("holds 0" in line or "excludes 0" in line), line
    # its value is the difference of the two runs' logged estimates
    a, b = (r.data.metrics["ipw_recall_at_5"] for r in second)
    assert f"Δ{b - a:+.3f}" in line, (line, a, b)
