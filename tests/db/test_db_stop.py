"""``rag-exp db stop`` stops the server of any data folder (issue 58 item 5): the one a run was
given with ``db.pgdata=...``, named by ``--set`` or ``--pgdata``; never a process that is not a
postgres of that folder."""

from __future__ import annotations

from rag_experiments.cli import main
from rag_experiments.db.embedded import EmbeddedPostgres


def test_db_stop_stops_the_server_a_run_started_with_db_pgdata(tmp_path, pg_folder, monkeypatch, capsys):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))  # its own .rag-exp/pgdata has no server
    monkeypatch.chdir(tmp_path)
    srv = EmbeddedPostgres(pg_folder / "pgdata")
    srv.ensure_running()
    try:
        pid = srv.running_pid()
        assert pid
        assert main(["db", "status", "--set", f"db.pgdata={srv.pgdata}"]) == 0
        assert f"running, pid {pid}" in capsys.readouterr().out
        assert main(["db", "stop", "--set", f"db.pgdata={srv.pgdata}"]) == 0
        assert f"stopped the server of {srv.pgdata}" in capsys.readouterr().out
        assert srv.running_pid() is None
        # --pgdata too, and a folder without a server is said to be one, nothing signalled
        assert main(["db", "stop", "--pgdata", str(srv.pgdata)]) == 0
        assert f"no server of {srv.pgdata} is running" in capsys.readouterr().out
    finally:
        srv.stop()


def test_db_url_serves_the_folder_pgdata_names(tmp_path, pg_folder, monkeypatch, capsys):
    """`db url --pgdata F` started the default folder's server and printed its URL (a new user's trial),
    while status, start and stop read --pgdata."""
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("RAG_EXP_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    srv = EmbeddedPostgres(pg_folder / "pgdata")
    try:
        assert main(["db", "url", "--pgdata", str(srv.pgdata)]) == 0
        assert capsys.readouterr().out.strip() == srv.url() and srv.running_pid()
        assert not (tmp_path / ".rag-exp" / "pgdata").exists()  # the default folder's server was not started
    finally:
        srv.stop()
