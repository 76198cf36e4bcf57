"""A new sqlite store copied from ``$RAG_EXP_MLFLOW_STORE_TEMPLATE`` (what the suite sets, in
tests/conftest.py, to skip MLflow's schema migrations per store) is a store of its own: the template
is made on first use and keeps no experiment (MLflow adds each copy's Default experiment, with that
store's artifact location), and each copy holds its own runs."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from mlflow.tracking import MlflowClient

from rag_experiments.tracking import server


def test_new_stores_are_copies_of_the_template_made_on_first_use(tmp_path):
    template = Path(os.environ[server.TEMPLATE_ENV])  # the suite's (made now unless a test made it)
    stores = [tmp_path / name / "mlruns" / "mlflow.db" for name in ("a", "b")]
    server.open_store(f"sqlite:///{stores[0]}")
    assert template.is_file()
    made = template.stat().st_mtime_ns
    with sqlite3.connect(template) as db:  # no experiment: a Default one would name the template's folder
        assert db.execute("SELECT count(*) FROM experiments").fetchone() == (0,)
    server.open_store(f"sqlite:///{stores[1]}")
    assert template.stat().st_mtime_ns == made  # copied, not made again

    for store in stores:
        client = MlflowClient(tracking_uri=f"sqlite:///{store}")
        assert client.get_experiment("0").name == "Default"
        run = client.create_run(client.create_experiment("rag-experiments"))
        client.log_metric(run.info.run_id, "recall_at_5", 0.5)
    for store in stores:  # each store holds its own run only
        client = MlflowClient(tracking_uri=f"sqlite:///{store}")
        exp = client.get_experiment_by_name("rag-experiments")
        assert len(client.search_runs([exp.experiment_id])) == 1
