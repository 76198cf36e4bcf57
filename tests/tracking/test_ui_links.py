"""How a printed MLflow UI link says to serve the local store."""

from __future__ import annotations

import pytest

from rag_experiments.tracking.ui_links import line


@pytest.fixture
def project(tmp_path, monkeypatch):
    for var in ("RAG_EXP_UI_URL", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))
    return tmp_path


def test_a_project_without_a_makefile_is_told_the_mlflow_ui_command(project):
    out = line("this run", "#/experiments/1/runs/abc")
    assert out.startswith("MLflow UI, this run: http://127.0.0.1:5000/#/experiments/1/runs/abc")
    assert f"mlflow ui --backend-store-uri sqlite:///{project}/mlruns/mlflow.db --port 5000" in out
    assert "make ui" not in out


def test_this_repository_is_told_make_ui(project):
    (project / "Makefile").write_text("run:\n\tpython run.py\n\nui: setup\n\tmlflow ui\n")
    assert line("this run", "#/x").endswith("(serve it with `make ui`)")


def test_a_password_in_the_store_uri_is_masked_and_a_server_needs_no_hint(project, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "postgresql://mlflow:s3cret@db.internal/mlflow")
    out = line("this run", "#/x")
    assert "s3cret" not in out and "mlflow ui --backend-store-uri postgresql://mlflow:" in out
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.internal:5000")
    assert line("this run", "#/x") == "MLflow UI, this run: http://mlflow.internal:5000/#/x"
