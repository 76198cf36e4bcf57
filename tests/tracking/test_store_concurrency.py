"""Two runs started at once on a fresh MLflow store both log (issue 49, P4).

Before: both processes found no tables, both ran MLflow's schema migrations, and one died with a
traceback (``duplicate column name: step``, ``table ... already exists``, a circular-dependency
error): 3 of 3 tries without a start line, 2 of 2 stores with it (:func:`test_...` below, old
code). Now the first opening of a sqlite store is serialised by a lock file beside it
(:func:`rag_experiments.tracking.server.open_store`).

Real processes (each imports everything first, then waits for a common start line, so the two
openings overlap), the project's own store initialisation (``setup``: the default store
``sqlite:///<RAG_EXP_HOME>/mlruns/mlflow.db``) and a logged run each, on two fresh stores.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import sys, time
from pathlib import Path
import mlflow.store.tracking.sqlalchemy_store  # noqa: F401 - imported before the start line
from mlflow.tracking import MlflowClient
from rag_experiments.tracking import mlflow_run

folder, me = Path(sys.argv[1]), sys.argv[2]
(folder / f"ready-{me}").touch()
while not (folder / "go").exists():
    time.sleep(0.002)
exp = mlflow_run.setup(None, "rag-experiments")
client = MlflowClient()
run_id = mlflow_run.create_run(client, exp, f"first-{me}", {"who": me})
mlflow_run.log_batch(client, run_id, metrics={"recall_at_5": 0.5}, params={"who": me})
client.set_terminated(run_id, status="FINISHED")
print(run_id)
"""

STORES = 2  # fresh stores raced at once, two processes each


def test_two_first_runs_on_a_fresh_store_both_log(tmp_path):
    # without the suite's store template (tests/conftest.py): each store is made by MLflow's migrations
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_TRACKING_URI", "RAG_EXP_PARENT_RUN_ID", "RAG_EXP_MLFLOW_STORE_TEMPLATE")}
    env["PYTHONPATH"] = str(ROOT)
    procs = []
    folders = []
    for s in range(STORES):
        folder = tmp_path / f"project{s}"
        folder.mkdir()
        folders.append(folder)
        for me in ("a", "b"):
            procs.append((folder, me, subprocess.Popen(
                [sys.executable, "-c", CHILD, str(folder), me], cwd=folder, env={**env, "RAG_EXP_HOME": str(folder)},
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if all((f / f"ready-{me}").exists() or p.poll() is not None for f, me, p in procs):
            break
        time.sleep(0.05)
    for folder in folders:
        (folder / "go").touch()
    outcomes = []
    for folder, me, p in procs:
        out, err = p.communicate(timeout=180)
        outcomes.append((folder.name, me, p.returncode, err))
    failed = [(name, me, rc, err[-2500:]) for name, me, rc, err in outcomes if rc != 0 or "Traceback" in err]
    assert not failed, failed
    for folder in folders:
        client = MlflowClient(tracking_uri=f"sqlite:///{folder / 'mlruns' / 'mlflow.db'}")
        exp = client.get_experiment_by_name("rag-experiments")
        runs = client.search_runs([exp.experiment_id])
        assert sorted(r.data.params["who"] for r in runs) == ["a", "b"]
        assert {r.info.status for r in runs} == {"FINISHED"}
        assert (folder / "mlruns" / "mlflow.db.init-lock").exists()  # the lock beside the store
