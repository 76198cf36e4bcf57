"""retrieval=http against a real HTTP server on 127.0.0.1 (a thread of this process, started and
stopped by the test): real requests through httpx, real JSON answers, real retries."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rag_experiments.errors import UserError
from rag_experiments.experiment import run_experiment

from . import external_targets
from .test_external import golden_env, settings  # noqa: F401 - the fixture

SEEN: list[dict] = []


class Handler(BaseHTTPRequestHandler):
    flaky = {"n": 0}
    failed_once: set = set()

    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        SEEN.append({"path": self.path, "body": body, "auth": self.headers.get("X-Api-Key")})
        if self.path == "/flaky":
            Handler.flaky["n"] += 1
            if body["query"] not in Handler.failed_once:  # each query's first attempt fails
                Handler.failed_once.add(body["query"])
                return self._send(503, b"busy")
        if self.path == "/missing":
            return self._send(404, b"no such index")
        if self.path == "/html":
            return self._send(200, b"<html>oops</html>")
        if self.path == "/slow":
            import time

            time.sleep(2)
        if self.path in ("/inf", "/inf-literal"):  # Python's json writes Infinity; 1e999 reads as inf too
            bad = json.dumps({"passages": [{**external_targets._filler(1)[0], "score": float("inf")}]})
            return self._send(200, (bad if self.path == "/inf" else bad.replace("Infinity", "1e999")).encode())
        if self.path == "/huge":  # one passage of 300,000 characters
            doc = external_targets._filler(1)[0]["source_uri"]
            return self._send(200, json.dumps({"passages": [{"source_uri": doc, "text": "x" * 300_000}]}).encode())
        if self.path == "/nolength":  # 100 kB with no Content-Length: read until the connection closes
            self.close_connection = True
            try:
                self.send_response(200)
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(json.dumps({"passages": [], "pad": " " * 100_000}).encode())
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if self.path == "/hang":  # accepts the request, never answers
            import time

            time.sleep(30)
            return
        if self.path == "/trickle":  # a header promising 1 MB, then a byte every 0.2 s
            import time

            try:
                self.send_response(200)
                self.send_header("Content-Length", "1000000")
                self.end_headers()
                for _ in range(150):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.2)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        passages = external_targets.oracle(body["query"], body["k"], **body["params"])
        self._send(200, json.dumps({"passages": passages}).encode())

    def _send(self, status, data):
        try:
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except BrokenPipeError:  # the client gave up (the timeout test): nothing to answer
            pass


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def http_settings(golden, url, *extra):
    return settings(golden, "oracle", "retrieval=http", f"retrieval.http.url={url}", "retrieval.use_cache=false",
                    *extra)


def test_a_service_scores_exactly_as_the_same_system_called_in_process(golden_env, server, monkeypatch):
    monkeypatch.setenv("TEAM_SEARCH_KEY", "k-123-secret")
    SEEN.clear()
    over_http = run_experiment(http_settings(golden_env, f"{server}/search", "retrieval.http.params.rank=3",
                                             "retrieval.http.auth_env=TEAM_SEARCH_KEY",
                                             "retrieval.http.auth_header=X-Api-Key"))
    in_process = run_experiment(settings(golden_env, "oracle", "retrieval.external.params.rank=3"))
    assert over_http.eval.per_case.drop(columns=["latency_ms"], errors="ignore").equals(
        in_process.eval.per_case.drop(columns=["latency_ms"], errors="ignore"))
    assert over_http.eval.metrics["mrr_at_10"] == pytest.approx(1 / 3)
    assert len(SEEN) == 10 and all(s["auth"] == "k-123-secret" for s in SEEN)
    assert SEEN[0]["body"]["k"] == 20 and SEEN[0]["body"]["params"] == {"rank": 3}
    assert "k-123-secret" not in json.dumps(over_http.strategy.params)  # the identity names the URL only


def test_5xx_is_retried_with_backoff(golden_env, server):
    Handler.flaky["n"] = 0
    Handler.failed_once.clear()
    result = run_experiment(http_settings(golden_env, f"{server}/flaky", "retrieval.http.backoff_s=0.01"))
    assert result.eval.metrics["recall_at_5"] == 1.0 and Handler.flaky["n"] == 20


@pytest.mark.parametrize("path, extra, message", [
    ("/missing", (), "HTTP 404 ('no such index')"),
    ("/html", (), "the answer is not JSON"),
    ("/slow", ("retrieval.http.timeout_s=0.3", "retrieval.http.retries=1", "retrieval.http.backoff_s=0"),
     "ReadTimeout after 2 attempt(s)"),
])
def test_http_failures_are_one_line_naming_the_url_and_query(golden_env, server, path, extra, message):
    with pytest.raises(UserError) as exc:
        run_experiment(http_settings(golden_env, f"{server}{path}", "retrieval.http.concurrency=1", *extra))
    assert message in exc.value.message and f"POST {server}{path}" in exc.value.message
    assert "query #" in exc.value.message and "\n" not in exc.value.message


def test_a_missing_auth_variable_is_an_error_before_any_request(golden_env, server, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    SEEN.clear()
    with pytest.raises(UserError, match=r"\$NO_SUCH_KEY_VAR is not set"):
        run_experiment(http_settings(golden_env, f"{server}/search", "retrieval.http.auth_env=NO_SUCH_KEY_VAR"))
    assert SEEN == []


def test_a_refused_connection_is_one_line(golden_env):
    with pytest.raises(UserError, match=r"POST http://127.0.0.1:9/x: ConnectError after 1 attempt"):
        run_experiment(http_settings(golden_env, "http://127.0.0.1:9/x", "retrieval.http.retries=0"))


def test_the_example_service_in_its_own_process_scores_as_the_target_in_process(golden_env, tmp_path):
    """examples/http_service.py as a real server process on 127.0.0.1, started and stopped here."""
    import os
    import signal
    import subprocess
    import sys

    from .test_external import ROOT, TARGETS

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "examples.http_service", f"{TARGETS}:oracle", "--port", "0"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline()  # "serving ... on http://127.0.0.1:PORT/search"
        assert "serving" in line, line
        url = line.split(" on ")[1].strip()
        over_http = run_experiment(http_settings(golden_env, url, "retrieval.http.params.rank=4",
                                                 "retrieval.http.params.mode=reflowed"))
        in_process = run_experiment(settings(golden_env, "oracle", "retrieval.external.params.rank=4",
                                             "retrieval.external.params.mode=reflowed"))
        columns = [c for c in in_process.eval.per_case.columns if c != "latency_ms"]
        assert over_http.eval.per_case[columns].equals(in_process.eval.per_case[columns])
        assert over_http.eval.metrics["mrr_at_10"] == pytest.approx(0.25)
        assert over_http.external["alignment.normalised"] == 10
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)


# -- bounded answers (issue 49, P1) ---------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/inf", "/inf-literal"])
def test_an_infinite_score_is_one_line_naming_the_url_and_the_value(golden_env, server, path):
    """Was: PostgreSQL refused the cached JSON (invalid input syntax for type json), each query
    "failed" on its own and the hint said to retire a case."""
    with pytest.raises(UserError) as exc:
        run_experiment(http_settings(golden_env, f"{server}{path}", "retrieval.use_cache=true"))
    assert f"{server}{path}" in exc.value.message and "score is inf" in exc.value.message
    assert "\n" not in exc.value.message and "retire" not in str(exc.value)


def test_a_huge_passage_is_refused_in_one_line(golden_env, server):
    with pytest.raises(UserError) as exc:
        run_experiment(http_settings(golden_env, f"{server}/huge"))
    assert f"{server}/huge" in exc.value.message and "passage 1" in exc.value.message
    assert "300,000 characters, more than retrieval.http.max_passage_chars=200,000" in exc.value.message


def test_an_answer_above_max_response_bytes_is_refused_while_it_is_read(golden_env, server):
    with pytest.raises(UserError) as exc:
        run_experiment(http_settings(golden_env, f"{server}/nolength", "retrieval.http.max_response_bytes=1024"))
    assert f"POST {server}/nolength: the answer exceeds retrieval.http.max_response_bytes=1,024 bytes" in \
        exc.value.message
    with pytest.raises(UserError, match=r"the answer is 1,000,000 bytes \(HTTP 200\), more than"):  # said upfront
        run_experiment(http_settings(golden_env, f"{server}/trickle", "retrieval.http.max_response_bytes=100000"))


@pytest.mark.parametrize("path", ["/hang", "/trickle"])
def test_a_service_that_never_finishes_fails_within_the_query_deadline(golden_env, server, path):
    """Was: timeout_s=3 retries=1 took 92 s (the pool waited for every query of the batch), and a
    service trickling a byte per read timeout never timed out at all."""
    import time

    t0 = time.monotonic()
    with pytest.raises(UserError) as exc:
        run_experiment(http_settings(golden_env, f"{server}{path}", "retrieval.http.timeout_s=3",
                                     "retrieval.http.retries=1", "retrieval.http.deadline_s=1.5"))
    assert f"POST {server}{path}: no answer within the query's deadline of 1.5 s" in exc.value.message
    assert "query #1 " in exc.value.message and "\n" not in exc.value.message
    assert time.monotonic() - t0 < 20  # a sanity bound only


@pytest.mark.parametrize("key, value, message", [
    ("max_passage_chars", "0", "must be >= 1, got 0"),
    ("max_response_bytes", "10", "must be >= 1024, got 10"),
    ("deadline_s", "0", "must be a finite number > 0, got 0"),
])
def test_bounds_are_checked_before_any_request(golden_env, key, value, message):
    from rag_experiments.errors import ConfigError

    with pytest.raises(ConfigError, match=f"retrieval.http.{key}: {message}"):
        http_settings(golden_env, "http://127.0.0.1:9/x", f"retrieval.http.{key}={value}")
