"""Finding runs and reading them back from a real (temporary) MLflow sqlite store."""

from __future__ import annotations

import pandas as pd
import pytest

from rag_experiments.errors import UserError
from rag_experiments.tracking import runs as R

from .conftest import GOLDEN, per_case_frame


def test_run_view_round_trips_per_case_table(make_run):
    pc = per_case_frame([1, 0, 1, 1])
    rid = make_run(pc, name="vector only")
    view = R.get_run(rid)
    assert view.id == rid and view.name == "vector only" and view.label == "vector only"
    assert view.golden == GOLDEN and view.tags["variant"] == "hybrid"
    assert view.metrics["recall_at_5"] == pytest.approx(0.75)
    assert view.interval("recall_at_5") is not None
    assert view.params["fusion.rrf_k"] == "60"
    assert list(view.per_case["case_id"]) == list(pc["case_id"])
    assert view.per_case["recall_curve"].iloc[0] == pytest.approx(list(pc["recall_curve"].iloc[0]))
    pd.testing.assert_series_equal(view.per_case["recall_at_5"], pc["recall_at_5"])


def test_run_without_per_case_table(make_run):
    rid = make_run(None, metrics={"recall_at_5": 0.5})
    assert R.get_run(rid).per_case is None


def test_select_by_ids_sweep_tag_and_last_sweep(make_run, make_parent):
    old_parent = make_parent("old sweep")
    make_run(per_case_frame([1, 1]), name="old child", parent=old_parent)
    parent = make_parent("new sweep")
    c1 = make_run(per_case_frame([1, 0]), name="rrf_k=30", parent=parent, tags={"variant": "hybrid"})
    c2 = make_run(per_case_frame([0, 0]), name="rrf_k=60", parent=parent, tags={"variant": "vector"})
    lone = make_run(per_case_frame([1, 1]), name="lone", tags={"variant": "vector"})

    runs, p = R.select_runs(sweep=parent)
    assert [r.id for r in runs] == [c1, c2] and p.id == parent
    runs, p = R.select_runs(last_sweep=True)
    assert [r.id for r in runs] == [c1, c2] and p.id == parent
    runs, p = R.select_runs(tag="variant=vector")
    assert [r.id for r in runs] == [c2, lone] and p is None
    runs, _ = R.select_runs([lone, c1])
    assert [r.id for r in runs] == [lone, c1]
    runs, _ = R.select_runs([lone], sweep=parent)  # ids first, then the sweep; no duplicates
    assert [r.id for r in runs] == [lone, c1, c2]


def test_selection_errors(make_run, make_parent):
    parent = make_parent()
    with pytest.raises(UserError, match="no child runs"):
        R.select_runs(sweep=parent)
    with pytest.raises(UserError, match="sweep parent"):
        R.select_runs([parent])
    with pytest.raises(UserError, match="not an MLflow run id"):
        R.select_runs(["nope"])
    with pytest.raises(UserError, match="not found"):
        R.select_runs(["0" * 32])
    with pytest.raises(UserError, match="KEY=VALUE"):
        R.select_runs(tag="variant")
    with pytest.raises(UserError, match="at most one"):
        R.select_runs(sweep=parent, tag="a=b")


def test_no_sweep_at_all(store):
    with pytest.raises(UserError, match="no sweep parent"):
        R.last_sweep_parent()


def test_respects_mlflow_tracking_uri(store, make_run, monkeypatch, tmp_path_factory, _template_db):
    import shutil

    make_run(per_case_frame([1]), name="in the project store")
    other = tmp_path_factory.mktemp("other") / "mlflow.db"
    shutil.copy(_template_db, other)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{other}")
    assert R.client().tracking_uri == f"sqlite:///{other}"
    assert R.search() == []


def test_per_case_tables_parse_the_same_with_nan_and_huge_integers():
    """orjson reads the tables; what it refuses (NaN / Infinity tokens, integers beyond 64 bits,
    which json.dumps writes) falls back to the json module: the same frame either way."""
    import json

    import pandas as pd

    from rag_experiments.tracking.runs import parse_per_case

    plain = {"columns": ["case_id", "recall_at_5", "ranked_ids"], "data": [["a", 1.0, ["x", "y"]], ["b", 0.5, []]]}
    odd = {"columns": ["case_id", "first_relevant_rank", "n"], "data": [["a", float("nan"), 2**70], ["b", float("inf"), 1]]}
    for table in (plain, odd):
        text = json.dumps(table)
        expected = pd.DataFrame(table["data"], columns=table["columns"])
        for payload in (text, text.encode(), table):
            pd.testing.assert_frame_equal(parse_per_case(payload), expected)
