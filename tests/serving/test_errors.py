"""What a client sees when its request is wrong (issue 55 probe 8): MLflow's real scoring app for
the promoted champion behind :class:`GuardedApp`, driven in-process (Starlette's TestClient).

Before: a ``text/csv`` request got a 400 whose JSON carried a Python ``stack_trace``; invalid
JSON and a query the model could not use were quoted back in the message (a 1 MB query, the
whole body); a 100,000-deep JSON body got a plain-text 500.
"""

from __future__ import annotations

import json

import mlflow
import pytest
from fastapi.testclient import TestClient
from mlflow.pyfunc import scoring_server

from rag_experiments.serving.http_guard import MAX_MESSAGE, GuardedApp, clean_message, error_body

from .conftest import MODEL_URI
from .test_predict import ingest_as_operator

QUERY = "how much memory can a sort use"
MARK = "QUOTEDBACK"


@pytest.fixture
def client(promote_mini, pg_url, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", pg_url)
    promote_mini()
    model = mlflow.pyfunc.load_model(MODEL_URI)
    ingest_as_operator(model)
    with TestClient(GuardedApp(scoring_server.init(model)), raise_server_exceptions=False) as c:
        yield c


def _error(resp) -> dict:
    assert resp.headers["content-type"].startswith("application/json"), (resp.status_code, resp.text[:300])
    body = resp.json()
    assert set(body) == {"error_code", "message"}, body  # no stack_trace, nothing else
    assert "Traceback" not in body["message"] and MARK not in body["message"]
    assert len(body["message"]) <= MAX_MESSAGE and "\n" not in body["message"]
    return body


def test_bad_requests_get_short_json_errors_without_traces_or_their_input(client):
    ok = client.post("/invocations", json={"inputs": [QUERY], "params": {"k": 3}})
    assert ok.status_code == 200 and [h["rank"] for h in ok.json()["predictions"]] == [1, 2, 3]

    csv_req = client.post("/invocations", content=f"query\n{MARK}\n", headers={"Content-Type": "text/csv"})
    assert csv_req.status_code == 415 and "application/json" in _error(csv_req)["message"]

    deep = client.post("/invocations", content=b"[" * 100_000 + b"]" * 100_000,
                       headers={"Content-Type": "application/json"})
    assert deep.status_code == 400 and "nested too deeply" in _error(deep)["message"]

    broken = client.post("/invocations", content=('{"inputs": ["' + MARK * 1000 + '"').encode(),
                         headers={"Content-Type": "application/json"})
    assert broken.status_code == 400 and "not valid JSON" in _error(broken)["message"]

    big = client.post("/invocations", json={"inputs": [MARK * 100_000], "params": {"k": 3}})  # 1 MB
    assert big.status_code == 400 and "the limit is 4,000" in _error(big)["message"]

    # shapes MLflow itself refuses, quoting the data it got ("Failed to predict data '...'")
    for payload in ({"inputs": {"query": [MARK]}, "params": {"k": 3}}, {"inputs": [QUERY], "params": {"k": [MARK]}}):
        resp = client.post("/invocations", json=payload)
        assert 400 <= resp.status_code < 500, (payload, resp.status_code, resp.text[:300])
        _error(resp)


def test_an_error_body_is_cleaned_whatever_its_shape():
    echoed = json.dumps({"error_code": "BAD_REQUEST", "stack_trace": "Traceback ...",
                         "message": f"Failed to predict data '{MARK}'. \nError: k: must be between 1 and 50"})
    assert json.loads(error_body(400, echoed.encode())) == {"error_code": "BAD_REQUEST",
                                                            "message": "k: must be between 1 and 50"}
    plain = json.loads(error_body(500, b"Internal Server Error"))
    assert plain["error_code"] == "INTERNAL_ERROR" and "see its log" in plain["message"]
    assert clean_message(f"Ensure that input is a valid JSON formatted string.\nInput: \n{MARK}") == \
        "Ensure that input is a valid JSON formatted string."
