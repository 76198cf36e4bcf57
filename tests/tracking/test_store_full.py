"""An MLflow store on a full disk is one line and exit 2, not five tracebacks (issue 55 probe 3).

A real full disk: a 4 MiB tmpfs (``mount -t tmpfs``, which CI can do as root; skipped where mount
is not allowed) holding the store's SQLite database, filled up after the store was created; the
run is real (run.py, the mini corpus, the test PostgreSQL)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MINI = ROOT / "tests" / "fixtures" / "mini_corpus"


@pytest.fixture
def full_disk(tmp_path):
    mount = tmp_path / "full"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"mount -t tmpfs is not allowed here: {proc.stderr.strip()[:200]}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_run_on_a_full_store_is_one_line(project, mini_golden, full_disk):
    uri = f"sqlite:///{full_disk}/mlflow.db"
    env = {**os.environ, "RAG_EXP_HOME": str(project), "PYTHONPATH": str(ROOT), "MLFLOW_TRACKING_URI": uri}
    made = subprocess.run([sys.executable, "-c", "import mlflow; mlflow.set_tracking_uri(__import__('sys').argv[1]); "
                           "mlflow.set_experiment('rag-experiments')", uri], env=env, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-2000:]
    with open(full_disk / "filler", "wb") as f:  # fill what is left
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), f"corpus.path={MINI}", "corpus.name=mini",
                           f"golden.path={mini_golden}", "chunking.max_tokens=60", "progress=false",
                           "eval.bootstrap_samples=50", "tracking.plots=false"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: out of disk space writing to the MLflow store ({uri}; artifacts under "
                      f"{(project / 'mlruns' / 'artifacts').as_uri()}): the run was not logged, or stopped as FAILED; "
                      "free space there (or set MLFLOW_TRACKING_URI to a store with room) and run again"]
