"""``rag-exp ingest --dry-run`` with the bundled local model: its help promises an estimate and a stop;
a local model costs nothing, so it says so in one line and ingests nothing (it used to run the whole
ingest: 4 minutes on Debian git-doc, found by the issue-57 transcript)."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg

from tests.conftest import FIXTURES

MINI = FIXTURES / "mini_corpus"


def test_a_dry_run_with_the_local_model_says_it_costs_nothing_and_ingests_nothing(project, fresh_db_url):
    env = {**os.environ, "RAG_EXP_HOME": str(project), "DATABASE_URL": fresh_db_url}
    argv = [sys.executable, "-m", "rag_experiments.cli", "ingest", "--dry-run", "--set", f"corpus.path={MINI}",
            "--set", "corpus.name=mini-dry-run"]
    done = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "minilm-onnx runs on this machine, so embedding costs nothing; nothing was ingested" in done.stderr
    assert "Traceback" not in done.stderr
    with psycopg.connect(fresh_db_url) as conn:
        built = conn.execute("SELECT count(*) FROM strategies WHERE corpus = 'mini-dry-run'").fetchone()[0]
    assert built == 0
