"""`rag-exp history`: the objective over time across three golden versions."""

from __future__ import annotations

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.golden.resolve import load_golden
from rag_experiments.golden.golden_file import GoldenFile
from rag_experiments.tracking.history import build_history

from .conftest import cli
from .golden_runs import log_golden_run
from .test_golden_versions import golden, golden_add  # noqa: F401 - fixtures


def _three_versions(path, exp, golden_add):
    cases = [c.case_id for c in load_golden(path).cases]
    log_golden_run(path, name="champion", exp_id=exp, miss={cases[0]})  # v1: 9 of 10
    assert cli("promote") == 0
    night1 = log_golden_run(path, name="nightly", exp_id=exp, miss={cases[0]})
    assert cli("gate", "--run", night1) == 0
    golden_add(path)  # v2: + 1 production case
    night2 = log_golden_run(path, name="nightly", exp_id=exp, miss={cases[0]})
    assert cli("gate", "--run", night2) == 0
    golden_add(path, query="What caps the temporary disk space of one process?",
               quote="Specifies the maximum amount of disk space that a process can use for temporary files")
    GoldenFile(path).append([{"type": "retire", "id": "r-1", "target": cases[5], "reason": "dup", "who": "qa"}])
    night3 = log_golden_run(path, name="nightly", exp_id=exp, miss={cases[0], cases[1]})  # v3: one more miss
    assert cli("gate", "--run", night3) == 0  # one case lost: not significant
    return night1, night2, night3


def test_history_across_three_golden_versions(golden, golden_add, tmp_path, capsys):  # noqa: F811
    path, exp = golden
    night1, night2, night3 = _three_versions(path, exp, golden_add)
    points = build_history("default", "recall_at_5")
    assert [p.kind for p in points] == ["promotion", "nightly", "nightly", "nightly"]
    assert [p.run.id for p in points[1:]] == [night1, night2, night3]
    assert [p.records for p in points] == ["10", "10", "11", "13"]
    assert points[1].delta == 0 and points[1].shared == 10
    # v1 -> v2: the new production case is not in the common cases; nothing moved on the 10 shared
    assert points[2].shared == 10 and points[2].delta == pytest.approx(0.0)
    assert points[2].value == pytest.approx(10 / 11)  # as logged: it includes the new case
    # v2 -> v3: v2's 11 cases minus the retired one are common; one more miss on them
    assert points[3].shared == 10 and points[3].delta == pytest.approx(8 / 10 - 9 / 10)
    assert points[3].chained == pytest.approx(0.9 + 0 + 0 - 0.1)
    assert "1 retired" in points[3].note

    summary = tmp_path / "summary.md"
    assert cli("history", "--markdown-summary", str(summary)) == 0
    out = capsys.readouterr().out
    assert "recall_at_5 over time" in out and "logged history/table.md" in out
    md = summary.read_text()
    assert "**Latest:**" in md and "**Trend:** -0.100 over the last 4 points" in md
    runs = MlflowClient().search_runs([exp], "tags.history = 'true'")
    assert len(runs) == 1
    arts = {a.path for a in MlflowClient().list_artifacts(runs[0].info.run_id, "history")}
    assert {"history/table.md", "history/recall_at_5.png", "history/points.csv"} <= arts
    series = MlflowClient().get_metric_history(runs[0].info.run_id, "history.recall_at_5.chained")
    assert [m.step for m in series] == [0, 1, 2, 3]
    # the history run is no candidate for promotion or the gate
    assert cli("promote", "--dry-run") in (0, 1)
    mlflow.end_run()


def test_history_without_points_says_so(store, capsys):
    summary = store[0] / "summary.md"
    assert cli("history", "--markdown-summary", str(summary)) == 0
    assert "no nightly gate run and no promotion" in capsys.readouterr().out
    assert "No nightly gate run or promotion yet" in summary.read_text()


def _fresh_store_with_the_record(path, exp):
    """A promoted champion whose run and registry entry are gone (a fresh clone's store): only the
    committed record knows it, with an experiment id this store does not have."""
    import json

    from rag_experiments.tracking.champion import model_name, record_path

    cases = [c.case_id for c in load_golden(path).cases]
    champion = log_golden_run(path, name="champion", exp_id=exp, miss={cases[0]})
    assert cli("promote") == 0
    c = MlflowClient()
    c.delete_registered_model(model_name("default"))
    c.delete_run(champion)
    record = json.loads(record_path("default").read_text())
    record["experiment_id"] = "999"
    record_path("default").write_text(json.dumps(record))
    return cases


def test_history_on_a_fresh_store_with_the_committed_record(golden, capsys):  # noqa: F811
    """Issue 33: it printed its table, then `No Experiment with id=1 exists` (a traceback)."""
    path, exp = golden
    _fresh_store_with_the_record(path, exp)
    assert cli("history") == 0
    out = capsys.readouterr().out
    assert "recall_at_5 over time" in out and "logged history/table.md" in out
    mlflow.end_run()


def test_the_record_stand_in_chains_with_the_next_nightly_run(golden, capsys):  # noqa: F811
    """Issue 33: once the registry was re-populated from the record, history called the stand-in and
    the next nightly run "another corpus: chain restarted" (the stand-in carried the digest as
    record.corpus_digest) and listed the same champion twice as a promotion."""
    from rag_experiments.serving.model_logging import sync_with_record

    path, exp = golden
    cases = _fresh_store_with_the_record(path, exp)
    assert sync_with_record("default", MlflowClient()) is not None  # the stand-in run and version
    night = log_golden_run(path, name="nightly", exp_id=exp, miss={cases[0]})
    assert cli("gate", "--run", night) == 0
    points = build_history("default", "recall_at_5")
    assert [p.kind for p in points] == ["promotion", "nightly"]
    assert "chain restarted" not in points[1].note and points[1].delta == 0 and points[1].shared == 10
    mlflow.end_run()


def test_history_of_a_metric_no_point_logged_names_the_logged_ones(golden, capsys):  # noqa: F811
    path, exp = golden
    log_golden_run(path, name="champion", exp_id=exp)
    assert cli("promote") == 0
    capsys.readouterr()
    assert cli("history", "--metric", "recall_at_7") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --metric recall_at_7: no point of the history logged it; metrics they logged: ")
    assert "recall_at_5" in err
    mlflow.end_run()


def test_a_gate_run_made_with_overrides_is_no_point_of_the_trend(store, make_run, capsys):
    """`gate --run-now --set ...` runs another config than the promoted one: history drew it as a nightly
    point (a new user's trial: 0.546 -> 0.473 -> 0.037 from two such runs). It is tagged and left out,
    and history says so."""
    from rag_experiments.tracking.history import collect, runs_with_overrides

    from .conftest import per_case_frame

    plain = make_run(per_case_frame([1.0, 0.0, 1.0, 1.0]), name="nightly", tags={"gate": "PASS"})
    other = make_run(per_case_frame([0.0, 0.0, 0.0, 1.0]), name="nightly",
                     tags={"gate": "FAIL", "gate_overrides": "retrieval.variant=keyword"})
    assert [r.id for _, _, r in collect("default", "recall_at_5")] == [plain]
    assert [r.id for r in runs_with_overrides("default")] == [other]
    capsys.readouterr()
    assert cli("history", "--no-log") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"left out 1 gate run(s) made with --set overrides (not the promoted config): {other[:12]} " \
           "(retrieval.variant=keyword)" in out, out
