"""Runs and sweeps refuse bad input before any MLflow run exists (issue 12).

* a bad value in one sweep point (``-m fusion.rrf_k=60,0``): before, the first point ran and the
  second died with a traceback and an empty FAILED child; now every point is validated up front
  (basic and joblib launchers, points from the command line or a preset's sweeper.params);
* a golden set without cases: before, a FINISHED run with n_cases=0, then a KeyError traceback;
* a labelled span outside its unchanged document: before, scored 0 with exit 0."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.golden import GoldenFile
from rag_experiments.golden.records import new_id

from .test_pipeline import _mini_overrides, _run_py


def _no_runs(project) -> bool:
    db = project / "mlruns" / "mlflow.db"
    if not db.exists():
        return True
    client = MlflowClient(f"sqlite:///{db}")
    return all(not client.search_runs([e.experiment_id]) for e in client.search_experiments())


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize("launcher", [[], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]],
                         ids=["basic", "joblib"])
def test_a_bad_value_in_one_sweep_point_stops_the_sweep_before_it_starts(project, mini_golden, launcher):
    if launcher:
        pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    proc = _run_py(project, "-m", *launcher, "fusion.rrf_k=60,0", *_mini_overrides(mini_golden))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert _error_lines(proc.stderr) == ["error: sweep point fusion.rrf_k=0: fusion.rrf_k: must be > 0, got 0"]
    assert "Traceback" not in proc.stderr
    assert _no_runs(project) and not (project / "multirun").exists()


@pytest.mark.parametrize("value, message", [
    ("abc", "error: hydra.launcher.n_jobs: a number of workers or 'auto', got 'abc'"),
    ("0", "error: hydra.launcher.n_jobs: must be >= 1, got 0"),
])
def test_a_bad_n_jobs_is_one_line_before_any_run(project, mini_golden, value, message):
    """Before, Hydra instantiated the launcher after the MLflow parent existed: a FAILED empty
    parent per attempt and Hydra's four-line instantiation error, exit 1."""
    proc = _run_py(project, "-m", f"hydra.launcher.n_jobs={value}", "fusion.rrf_k=60,30", *_mini_overrides(mini_golden))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert _error_lines(proc.stderr) == [message]
    assert "Traceback" not in proc.stderr
    assert _no_runs(project)


def test_points_from_a_preset_are_checked_too(project, mini_golden):
    proc = _run_py(project, "experiment=rrf_sweep", "fusion.depth=10", *_mini_overrides(mini_golden))
    assert proc.returncode == 2
    assert "fusion.depth: 10 is below the largest eval k" in proc.stderr and _no_runs(project)


def test_an_unknown_choice_in_one_point_is_one_line(project, mini_golden):
    proc = _run_py(project, "-m", "retrieval=vector,bm25", *_mini_overrides(mini_golden))
    assert proc.returncode == 2
    assert _error_lines(proc.stderr) == ["error: retrieval=bm25: no such option (did you mean bm25s? options of retrieval: bm25s, external, http, hybrid, hybrid_rerank, keyword, stored, vector)"]
    assert _no_runs(project)


def _caseless(path):
    ids = [r["id"] for r in GoldenFile(path).read()]
    GoldenFile(path).append([{"type": "retire", "id": f"r-{i}", "target": c, "reason": "t", "who": "t"}
                             for i, c in enumerate(ids)])
    return path


@pytest.mark.parametrize("sweep", [False, True], ids=["run", "sweep"])
def test_a_golden_set_without_cases_stops_before_any_run(project, mini_golden, sweep):
    _caseless(mini_golden)
    args = (["-m", "fusion.rrf_k=30,60"] if sweep else []) + _mini_overrides(mini_golden)
    proc = _run_py(project, *args)
    assert proc.returncode == 2, proc.stderr[-2000:]
    [line] = _error_lines(proc.stderr)
    assert "nothing to evaluate: none of its 10 cases" in line and "Traceback" not in proc.stderr
    assert _no_runs(project)


@pytest.mark.parametrize("sweep", [False, True], ids=["run", "sweep"])
def test_a_span_past_the_end_of_its_document_stops_the_run(project, mini_golden, mini_docs, sweep):
    doc = mini_docs[0]
    bad = {"type": "case", "id": new_id("c", "bad"), "query": "a question about nothing?", "kind": "paraphrase",
           "doc_type": doc.doc_type, "provenance": {"method": "human", "author": "t"},
           "evidence": [{"doc_id": doc.doc_id, "source_uri": doc.source_uri, "start": 9_000_000, "end": 9_000_004,
                         "quote": "abcd", "doc_hash": doc.content_hash, "grade": 2}]}
    GoldenFile(mini_golden).append([bad])
    line = len(GoldenFile(mini_golden).read())
    args = (["-m", "fusion.rrf_k=30,60"] if sweep else []) + _mini_overrides(mini_golden)
    proc = _run_py(project, *args)
    assert proc.returncode == 2, proc.stderr[-2000:]
    [err] = _error_lines(proc.stderr)
    assert f"{mini_golden}:{line}: case {bad['id']}" in err and "lies outside document" in err
    assert _no_runs(project)


@pytest.mark.parametrize("override, message", [
    ("retrieval.filters.doc_types=['errcodes,indexes']",
     "error: retrieval.filters.doc_types: 'errcodes,indexes' is not a doc type of corpus"),
    ("retrieval.filters.doc_types=[errcodes,nosuch]",
     "error: retrieval.filters.doc_types: 'nosuch' is not a doc type of corpus"),
    ("retrieval.filters.source_uri_prefix=nowhere/", "error: retrieval.filters.source_uri_prefix: no document"),
])
def test_a_filter_that_matches_nothing_is_an_error_before_any_work(project, mini_golden, override, message):
    """Issue 33: before, recall@5 0.000 and exit 0 (every leg returned nothing)."""
    proc = _run_py(project, override, *_mini_overrides(mini_golden))
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = _error_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith(message), proc.stderr[-2000:]
    if "doc_types" in override:
        assert "known doc types: config, errcodes, fulltext, functions, reference, tutorial" in lines[0]
    assert "Traceback" not in proc.stderr and _no_runs(project)
