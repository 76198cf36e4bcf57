"""``rag-exp db stop`` stops the server of any data folder (issue 58 item 5): the one a run was
given with ``db.pgdata=...``, named by ``--set`` or ``--pgdata``; never a process that is not a
postgres of that folder."""

from __future__ import annotations

import os
import subprocess
import sys

from rag_experiments.db.embedded import EmbeddedPostgres


def _db(project, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    return subprocess.run([sys.executable, "-m", "rag_experiments.cli", "db", *args], cwd=project, text=True,
                          capture_output=True, env={**env, "RAG_EXP_HOME": str(project)}, timeout=120)


def test_db_stop_stops_the_server_a_run_started_with_db_pgdata(tmp_path, pg_folder):
    srv = EmbeddedPostgres(pg_folder / "pgdata")
    srv.ensure_running()
    try:
        pid = srv.running_pid()
        assert pid
        # the project's own .rag-exp/pgdata has no server: the override names the running one
        status = _db(tmp_path, "status", "--set", f"db.pgdata={srv.pgdata}")
        assert f"running, pid {pid}" in status.stdout, status.stdout + status.stderr
        done = _db(tmp_path, "stop", "--set", f"db.pgdata={srv.pgdata}")
        assert done.returncode == 0 and f"stopped the server of {srv.pgdata}" in done.stdout, done.stdout + done.stderr
        assert srv.running_pid() is None
        # --pgdata too, and a folder without a server is said to be one, nothing signalled
        again = _db(tmp_path, "stop", "--pgdata", str(srv.pgdata))
        assert again.returncode == 0 and f"no server of {srv.pgdata} is running" in again.stdout
    finally:
        srv.stop()
