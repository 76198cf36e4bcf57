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
    from rag_experiments.paths import tracking_uri

    monkeypatch.setenv("DATABASE_URL", pg_url)
    promote_mini()
    model = mlflow.pyfunc.load_model(MODEL_URI)
    from .test_predict import ingest_as_operator

    ingest_as_operator(model)  # the database holds the corpus from here on
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
        ({"inputs": ["x" * 100_000], "params": {"k": 5}}, "has 100,000 characters; the limit is 4,000"),
        ({"inputs": [QUERY], "params": {"k": "ten"}}, "k"),
        ({"inputs": ["sort\u0000memory"], "params": {"k": 5}}, "contains a NUL character"),
        ({"inputs": [1, 2], "params": {"k": 5}}, "query[0]: must be a string, got int"),
        ({"inputs": [QUERY, None], "params": {"k": 5}}, "query[1]: must be a string"),
        ({"inputs": [QUERY] * 101, "params": {"k": 5}}, "at most 100 queries per call"),
    ]:
        status, body = post(url, payload)
        assert status == 400, (payload["params"], status, body)
        assert needle in body.get("message", ""), body
        assert "Traceback" not in json.dumps(body) and "stack_trace" not in body
    assert "Traceback" not in log.read_text()


def test_rag_exp_serve_works_as_written_from_a_fresh_registry_and_a_bare_path(promote_mini, pg_url, monkeypatch,
                                                                                tmp_path, store):
    """Issue 33: `.venv/bin/mlflow models serve -m models:/...@champion` failed on a fresh clone
    (`exec: uvicorn: not found` without .venv/bin on PATH; "Registered Model not found" until a
    command re-populated the registry from the committed record). `rag-exp serve` (`make serve`)
    does both first. Here: the record committed, the registry emptied, PATH without the venv."""
    from rag_experiments.tracking.champion import model_name, record_path
    from rag_experiments.paths import tracking_uri
    from rag_experiments.tracking.runs import client

    monkeypatch.setenv("DATABASE_URL", pg_url)
    promote_mini()
    assert record_path("default").exists()
    model = mlflow.pyfunc.load_model(MODEL_URI)
    from .test_predict import ingest_as_operator

    ingest_as_operator(model)
    client().delete_registered_model(model_name("default"))  # a fresh store: only the committed record
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "RAG_EXP_HOME": str(store[0]),
           "MLFLOW_TRACKING_URI": tracking_uri(), "DATABASE_URL": pg_url,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    log = tmp_path / "serve.log"
    rag_exp = str(Path(sys.executable).parent / "rag-exp")
    with log.open("w") as fh:
        proc = subprocess.Popen([rag_exp, "serve", "-p", str(port)], cwd=store[0], env=env, stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_up(proc, base, log)
        status, body = post(base + "/invocations", {"inputs": [QUERY], "params": {"k": 3}})
        assert status == 200, body
        assert [h["rank"] for h in body["predictions"]] == [1, 2, 3]
        status, body = post(base + "/invocations", {"inputs": [QUERY], "params": {"k": 3, "ingest": True}})
        assert status == 200 and "stack_trace" not in body  # ignored: not a parameter of the served model
    finally:
        stop(proc)
    assert "serving models:/rag-retriever-default@champion" in log.read_text()


def test_a_single_run_populates_an_empty_registry_from_the_record(promote_mini, store):
    from rag_experiments.serving.model_logging import ensure_registered
    from rag_experiments.tracking.champion import model_name
    from rag_experiments.tracking.runs import client

    promote_mini()
    client().delete_registered_model(model_name("default"))
    version = ensure_registered("default")
    assert version is not None
    assert mlflow.pyfunc.load_model(MODEL_URI) is not None
    assert ensure_registered("default") == version  # mirrors now: nothing registered twice


def test_the_served_champion_measured_as_an_http_retriever_reproduces_its_run(served_champion, mini_golden):
    """Issue 27: the champion behind `mlflow models serve`, measured as retrieval=http
    (format=mlflow), gives exactly the per-case metrics of the built-in run of its config."""
    from rag_experiments.experiment import run_experiment
    from rag_experiments.serving.retriever import settings_from_dict

    from .conftest import mini_config

    url, _, _ = served_champion
    config = mini_config(**{"golden.path": str(mini_golden), "progress": False})
    built_in = run_experiment(settings_from_dict(config))
    config["retrieval"].update(variant="http", use_cache=False,
                               http={"url": url, "format": "mlflow", "concurrency": 1})
    over_http = run_experiment(settings_from_dict(config))
    columns = [c for c in built_in.eval.per_case.columns if c != "latency_ms"]
    differ = [c for c in columns if not over_http.eval.per_case[c].equals(built_in.eval.per_case[c])]
    assert not differ, differ  # the chunk ids too: a served hit's chunk_id is read as the passage's id
    assert over_http.external["alignment.offsets"] == sum(len(r.hits) for r in over_http.results.values()) > 0
    assert over_http.eval.metrics["recall_at_20"] == built_in.eval.metrics["recall_at_20"]
