"""tracking.uri pointing at MLflow's file store: one line before anything is logged.
Before: MLflow 3.17's 30-line MlflowException traceback (maintenance mode), after the run's work."""

from __future__ import annotations

import pytest

from rag_experiments.errors import UserError
from rag_experiments.tracking.mlflow_run import setup


@pytest.mark.parametrize("uri", ["file:///tmp/rag-exp-file-store", "/tmp/rag-exp-file-store"])
def test_a_file_store_uri_is_one_line_naming_the_fix(uri, monkeypatch):
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    with pytest.raises(UserError) as exc:
        setup(uri, "rag-experiments")
    assert exc.value.message.startswith(f"tracking.uri: {uri} is MLflow's file store")
    assert "sqlite:///" in exc.value.hint
