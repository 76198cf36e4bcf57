"""``MLFLOW_TRACKING_URI`` naming a PostgreSQL-backed MLflow store with a wrong password (issue 49,
P7): one line naming the store with the password masked, exit 2, at once.

Before: MLflow's engine creation retried ten times (nine warnings, ~100 s of back-off: 105 s
measured for ``rag-exp compare``), then ``compare`` ended in a 185-line SQLAlchemy traceback with
exit 1. Now :func:`rag_experiments.tracking.server.check_store` opens one connection first, as it
already asked an HTTP tracking server's ``/health``.

A real PostgreSQL with scram password authentication on 127.0.0.1 (the wheel's server run
standalone, :class:`rag_experiments.scale.services.TcpPostgres`), the real CLI and ``run.py`` in
subprocesses.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag_experiments.errors import UserError
from rag_experiments.tracking import server

ROOT = Path(__file__).resolve().parents[2]
MINI = ROOT / "tests" / "fixtures" / "mini_corpus"
RIGHT = "Right-Store-S3cret"
WRONG = "Wrong-Store-S3cret"


@pytest.fixture(scope="module")
def pg_with_password():
    from rag_experiments.scale.services import TcpPostgres
    from tests.conftest import server_folder

    folder = server_folder()
    pg = TcpPostgres(folder / "pgdata", password=RIGHT)
    pg.ensure_running()
    yield pg
    pg.stop()
    shutil.rmtree(folder, ignore_errors=True)


def _wrong_uri(pg) -> str:
    return f"postgresql://{pg.user}:{WRONG}@{pg.host}:{pg.port}/rag"


def _env(project: Path, uri: str) -> dict:
    return {**os.environ, "RAG_EXP_HOME": str(project), "PYTHONPATH": str(ROOT), "MLFLOW_TRACKING_URI": uri}


def _assert_one_line(proc: subprocess.CompletedProcess, pg, elapsed: float) -> str:
    err = proc.stderr + proc.stdout
    assert proc.returncode == 2, err[-3000:]
    assert "Traceback" not in err and WRONG not in err and RIGHT not in err, err[-3000:]
    assert "retried" not in err  # MLflow's engine retries: none
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, proc.stderr[-3000:]
    line = lines[0]
    assert f"postgresql://{pg.user}:***@{pg.host}:{pg.port}/rag" in line
    assert "password authentication failed" in line
    assert elapsed < 60, elapsed  # was ~105 s of back-off
    return line


def test_compare_with_a_wrong_store_password_is_one_line(pg_with_password, tmp_path):
    pg = pg_with_password
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "rag_experiments.cli", "compare", "--last-sweep"], cwd=tmp_path,
                          env=_env(tmp_path, _wrong_uri(pg)), capture_output=True, text=True, timeout=300)
    line = _assert_one_line(proc, pg, time.monotonic() - start)
    assert line.startswith("error: the MLflow tracking store at ")
    assert "hint: fix the user, password, host or database in MLFLOW_TRACKING_URI" in proc.stderr


@pytest.mark.parametrize("sweep", [["-m", "fusion.rrf_k=5,40"], []], ids=["sweep", "single-run"])
def test_run_py_with_a_wrong_store_password_is_one_line_before_the_work(pg_with_password, project, mini_golden,
                                                                        sweep):
    """``run.py -m``: the sweep callback opens the store before the first point; ``run.py``: the
    callback's ``on_run_start`` checks it before the run's work (it was opened after it)."""
    pg = pg_with_password
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *sweep, f"corpus.path={MINI}", "corpus.name=mini",
         f"golden.path={mini_golden}", "chunking.max_tokens=60", "progress=false", "tracking.plots=false"],
        cwd=project, env=_env(project, _wrong_uri(pg)), capture_output=True, text=True, timeout=300)
    _assert_one_line(proc, pg, time.monotonic() - start)
    assert not list(project.glob("outputs/*/*/per_case*")) and "recall" not in proc.stdout  # no work was done


def test_the_right_password_passes_the_check_and_a_closed_port_is_named(pg_with_password):
    pg = pg_with_password
    assert server.unreachable_reason(pg.url("rag")) is None
    closed = f"postgresql://{pg.user}:{WRONG}@127.0.0.1:1/rag"
    with pytest.raises(UserError) as exc:
        server.check_store(closed)
    assert "postgresql://rag:***@127.0.0.1:1/rag" in exc.value.message and WRONG not in str(exc.value)
