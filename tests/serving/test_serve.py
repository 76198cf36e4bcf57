"""``mlflow models serve`` on the champion: the real server process on 127.0.0.1, queried over HTTP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import mlflow
import pytest

from .conftest import MODEL_URI

ROOT = Path(__file__).resolve().parents[2]
QUERY = "how much memory can a sort use"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict, timeout: float = 60) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def wait_until_up(proc: subprocess.Popen, base: str, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"mlflow models serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(base + "/ping", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"mlflow models serve did not answer /ping in {timeout:.0f}s:\n{log.read_text()[-3000:]}")


def same_hits(got: list[dict], expected: list[dict]) -> bool:
    strip = lambda rows: [{k: v for k, v in r.items() if k != "score"} for r in rows]  # noqa: E731
    assert strip(got) == strip(expected)
    assert [r["score"] for r in got] == pytest.approx([r["score"] for r in expected], rel=1e-12)
    return True


@pytest.fixture
def served_champion(promote_mini, pg_url, monkeypatch, tmp_path):
    """The promoted mini champion, ingested, served by `mlflow models serve` (1 worker)."""
    from rag_experiments.tracking.mlflow_run import tracking_uri

    monkeypatch.setenv("DATABASE_URL", pg_url)
    promote_mini()
    model = mlflow.pyfunc.load_model(MODEL_URI)
    model.predict([QUERY], params={"k": 1, "ingest": True})  # the database holds the corpus from here on
    port = free_port()
    # --env-manager local execs `uvicorn` from PATH: the interpreter's own bin folder first
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "MLFLOW_TRACKING_URI": tracking_uri(), "DATABASE_URL": pg_url,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    log = tmp_path / "serve.log"
    mlflow_cli = [sys.executable, "-m", "mlflow"]
    with log.open("w") as fh:
        proc = subprocess.Popen([*mlflow_cli, "models", "serve", "-m", MODEL_URI, "--env-manager", "local",
                                 "-h", "127.0.0.1", "-p", str(port), "-w", "1"],
                                env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_up(proc, base, log)
        yield base + "/invocations", model, log
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's own process group (it and its uvicorn worker), SIGKILL if stuck."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def test_served_champion_answers_like_predict_and_rejects_bad_input_with_400(served_champion):
    url, model, log = served_champion
    queries = [QUERY, "text search configuration"]
    # to_json rounds floats to 10 digits; the server's encoder does not: compare scores apart
    expected = json.loads(model.predict(queries, params={"k": 5}).to_json(orient="records", double_precision=15))

    status, body = post(url, {"inputs": queries, "params": {"k": 5}})
    assert status == 200, body
    assert same_hits(body["predictions"], expected)
    status, body = post(url, {"dataframe_split": {"columns": ["query"], "data": [[q] for q in queries]},
                              "params": {"k": 5}})
    assert status == 200 and same_hits(body["predictions"], expected)
    assert {h["rank"] for h in body["predictions"]} == {1, 2, 3, 4, 5}

    for payload, needle in [
        ({"inputs": [""], "params": {"k": 5}}, "query[0]: is empty"),
        ({"inputs": [QUERY], "params": {"k": 0}}, "k: must be between 1 and 50"),
        ({"inputs": [QUERY], "params": {"k": -3}}, "k: must be between 1 and 50"),
        ({"inputs": [QUERY], "params": {"k": 10**12}}, "k: must be between 1 and 50"),
        ({"inputs": ["x" * 100_000], "params": {"k": 5}}, "100000 characters; at most 4000"),
        ({"inputs": [QUERY], "params": {"k": "ten"}}, "k"),
    ]:
        status, body = post(url, payload)
        assert status == 400, (payload["params"], status, body)
        assert needle in body.get("message", ""), body
        assert "Traceback" not in json.dumps(body) and "stack_trace" not in body
    assert "Traceback" not in log.read_text()
