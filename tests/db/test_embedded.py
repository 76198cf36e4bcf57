"""The embedded server's failure modes (design.md): stale postmaster.pid after kill -9, pid
reuse by an unrelated process, a server orphaned by a killed client, SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import psycopg
import pytest

from rag_experiments.db.embedded import EmbeddedPostgres, LockInfo, is_our_postmaster


@pytest.fixture
def server(pg_folder):
    srv = EmbeddedPostgres(pg_folder / "pgdata")
    yield srv
    srv.stop()


def _wait_gone(pid: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)


def test_start_is_idempotent_and_serves_pgvector(server):
    url = server.ensure_running()
    pid = server.running_pid()
    assert server.ensure_running() == url and server.running_pid() == pid  # adopted, not restarted
    with psycopg.connect(url) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        assert conn.execute("SELECT '[1,0]'::vector <=> '[0,1]'::vector").fetchone()[0] == pytest.approx(1.0)


def test_restart_after_kill_9_of_the_server(server):
    server.ensure_running()
    old = server.running_pid()
    os.kill(old, signal.SIGKILL)
    _wait_gone(old)
    assert (server.pgdata / "postmaster.pid").exists()  # the stale lock file is left behind
    url = server.ensure_running()
    assert server.running_pid() not in (None, old)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_reused_pid_is_never_signalled(server):
    server.ensure_running()
    server.stop()
    # An unrelated process now holds a pid that a stale postmaster.pid names.
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = server.pgdata / "postmaster.pid"
        lines = [str(bystander.pid), str(server.pgdata), str(int(time.time())), "5432", str(server.socket_dir()),
                 "", "0 0", "ready"]
        lock.write_text("\n".join(lines) + "\n")
        info = LockInfo.read(server.pgdata)
        assert info is not None and not is_our_postmaster(server.pgdata, info)
        assert server.stop() is False  # refuses to signal it
        server.ensure_running()  # starts a real server despite the stale lock
        assert server.running_pid() != bystander.pid
        assert bystander.poll() is None, "the unrelated process must not have been signalled"
    finally:
        bystander.kill()
        bystander.wait()


def test_server_orphaned_by_a_killed_client_is_adopted(pg_folder):
    pgdata = pg_folder / "pgdata"
    client = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from rag_experiments.db.embedded import EmbeddedPostgres
        EmbeddedPostgres({str(pgdata)!r}).ensure_running()
        print("up", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert client.stdout.readline().strip() == "up"
        client.kill()  # the client dies with kill -9; its server is orphaned
        client.wait()
        srv = EmbeddedPostgres(pgdata)
        orphan = srv.running_pid()
        assert orphan is not None
        srv.ensure_running()
        assert srv.running_pid() == orphan  # adopted: no second server on the same data folder
        servers = [p for p in psutil.process_iter(["name", "cmdline"])
                   if p.info["name"] == "postgres" and str(pgdata) in " ".join(p.info["cmdline"] or [])
                   and p.ppid() in (1, 0) or (p.info["name"] == "postgres" and p.pid == orphan)]
        assert [p.pid for p in servers] == [orphan]
    finally:
        EmbeddedPostgres(pgdata).stop()


def test_sigterm_runs_exit_handlers(tmp_path, pg_folder):
    marker = tmp_path / "cleaned"
    pgdata = pg_folder / "pgdata"
    client = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import atexit, pathlib, time
        from rag_experiments.db.embedded import EmbeddedPostgres, install_sigterm_handler
        install_sigterm_handler()
        atexit.register(lambda: pathlib.Path({str(marker)!r}).write_text("yes"))
        EmbeddedPostgres({str(pgdata)!r}).ensure_running()
        print("up", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert client.stdout.readline().strip() == "up"
        client.send_signal(signal.SIGTERM)
        try:
            code = client.wait(timeout=60)
        except subprocess.TimeoutExpired:  # say what state it is in (seen once in a CI run: no exit in 20 s)
            status = Path(f"/proc/{client.pid}/status").read_text().splitlines()
            wchan = Path(f"/proc/{client.pid}/wchan").read_text()
            client.kill()
            pytest.fail(f"no exit 60 s after SIGTERM; wchan={wchan!r}; " + "; ".join(
                line for line in status if line.split(":")[0] in ("State", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")))
        assert code == 128 + signal.SIGTERM
        assert marker.read_text() == "yes"  # atexit ran (Python's default SIGTERM skips it)
        srv = EmbeddedPostgres(pgdata)
        with psycopg.connect(srv.ensure_running()) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        EmbeddedPostgres(pgdata).stop()


def test_sigterm_reaches_the_handler_when_the_parent_had_it_blocked(tmp_path):
    """A signal mask is inherited through fork and exec. A parent that blocks SIGTERM while it
    spawns (loky's resource tracker does, around its own spawn) passes the block to any child
    started meanwhile; the handler must unblock it, or SIGTERM stays pending and the process
    never ends (the symptom of a CI failure of the test above: no exit 20 s after SIGTERM)."""
    marker = tmp_path / "cleaned"
    code = textwrap.dedent(f"""
        import atexit, pathlib, time
        from rag_experiments.db.embedded import install_sigterm_handler
        install_sigterm_handler()
        atexit.register(lambda: pathlib.Path({str(marker)!r}).write_text("yes"))
        print("up", flush=True)
        time.sleep(60)
    """)
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        client = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
    try:
        assert client.stdout.readline().strip() == "up"
        client.send_signal(signal.SIGTERM)
        assert client.wait(timeout=20) == 128 + signal.SIGTERM
        assert marker.read_text() == "yes"
    finally:
        client.kill()
        client.wait()


def test_a_copied_data_folder_never_touches_the_other_servers_socket(tmp_path):
    """`cp -a` of a project while its server runs: the copy's postmaster.pid names the other server's
    pid and socket folder. The stale-lock cleanup unlinked the socket and its lock in *that* folder (a
    live server cut off) and left the copied lock in its own, so the copy could not start. Now it
    clears its own socket folder only. Files only: no server is needed to show it."""
    other, copy = tmp_path / "other" / "pgdata", tmp_path / "copy" / "pgdata"
    for folder in (other, copy):
        folder.mkdir(parents=True)
        (folder / ".s.PGSQL.5432.lock").write_text("10488\n")
        (folder / ".s.PGSQL.5432").write_text("")  # a socket file stands in
    (copy / "postmaster.pid").write_text(f"10488\n{other}\n1796642092\n5432\n{other}\n\n  2196168 98347\nready\n")
    server = EmbeddedPostgres(copy)
    info = LockInfo.read(copy)
    assert info is not None and info.socket_dir == other
    server._remove_stale_lock(info)
    assert (other / ".s.PGSQL.5432.lock").exists() and (other / ".s.PGSQL.5432").exists()  # the other's: untouched
    assert not (copy / ".s.PGSQL.5432.lock").exists() and not (copy / ".s.PGSQL.5432").exists()
    assert not (copy / "postmaster.pid").exists() and list(copy.glob("postmaster.pid.stale-*"))
