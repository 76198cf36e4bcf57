"""Cached answers prove themselves (issue 55, Deliver 1): each way a team's system can change
without its cache key changing (a JSON data file, an environment variable, a helper loaded by
``importlib``, an installed package replaced under the same version, a service changed behind the
same URL) is caught by the run's live re-ask of a sample, which invalidates the cache: the run
logs the system's answers of today, not the cached ones. Real Hydra, PostgreSQL, MLflow; the
service is a real HTTP server on 127.0.0.1.

The mini golden set has 10 cases: the check samples all 10 (max(10, 5%))."""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.config import free_mapping_overrides
from rag_experiments.errors import UserError
from rag_experiments.experiment import run_experiment
from rag_experiments.pipeline import log_result
from rag_experiments.retrieval import code_identity

from ..test_config import _compose
from . import external_targets
from .test_external import MINI, golden_env, settings  # noqa: F401 - the fixture

PROBES = "tests.retrieval.changing_targets"
RANK = {"n": 1}  # what the probe service answers: the evidence at this rank


class Service(BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = json.dumps({"passages": external_targets.oracle(body["query"], body["k"], rank=RANK["n"])}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def service():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Service)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/search"
    srv.shutdown()
    srv.server_close()


def _probe(way: str, tmp_path, monkeypatch):
    """(target or None for the service, set_rank) for one way of changing a system behind its cache key."""
    if way == "json":
        data = tmp_path / "rank.json"
        monkeypatch.setenv("RAG_EXP_PROBE_JSON", str(data))
        return f"{PROBES}:from_json", lambda r: data.write_text(json.dumps({"rank": r}))
    if way == "env":
        return f"{PROBES}:from_env", lambda r: monkeypatch.setenv("RAG_EXP_PROBE_RANK", str(r))
    if way in ("importlib", "installed"):
        folder = tmp_path / "mods"
        folder.mkdir()
        monkeypatch.syspath_prepend(str(folder))
        name = "rag_probe_installed" if way == "installed" else f"rag_probe_helper_{uuid.uuid4().hex[:8]}"
        monkeypatch.setenv("RAG_EXP_PROBE_MODULE", name)
        if way == "installed":  # its folder counts as site-packages: the key holds a version, not a digest
            roots = code_identity._outside_roots()
            monkeypatch.setattr(code_identity, "_outside_roots", lambda: (*roots, str(folder.resolve()) + os.sep))
        monkeypatch.delitem(sys.modules, name, raising=False)

        def set_rank(r: int) -> None:  # a new size each time: no stale .pyc within the same second
            (folder / f"{name}.py").write_text(f"RANK = {r}\n" + "#" * r + "\n")
            sys.modules.pop(name, None)  # what a new process (or a reinstall) would import
            importlib.invalidate_caches()
        return f"{PROBES}:from_{'installed' if way == 'installed' else 'helper'}", set_rank
    assert way == "http"
    return None, lambda r: RANK.__setitem__("n", r)


@pytest.mark.parametrize("way", ["json", "env", "importlib", "installed", "http"])
def test_a_change_no_key_holds_invalidates_the_cache_and_the_run_logs_todays_answers(golden_env, tmp_path,
                                                                                     monkeypatch, service, capsys, way):
    target, set_rank = _probe(way, tmp_path, monkeypatch)
    version = f"retrieval.external.version=probe-{uuid.uuid4().hex[:8]}"  # keys of this test's own

    def run():
        if target is None:
            return run_experiment(settings(golden_env, "oracle", "retrieval=http", f"retrieval.http.url={service}",
                                           version))
        return run_experiment(_settings(golden_env, target, [version]))

    set_rank(1)
    first = run()
    assert first.eval.metrics["recall_at_5"] == 1.0 and first.external_tags["external.cache_check"] == "ok"
    set_rank(7)  # the system changed; its key did not
    second = run()
    assert second.eval.metrics["recall_at_5"] == 0.0  # before issue 55: 1.0, the cached answers
    assert second.eval.metrics["mrr_at_10"] == pytest.approx(1 / 7)
    assert second.external_tags["external.cache_check"] == "stale"
    assert second.cache == {"external_calls": 10, "external_cached": 0}
    err = capsys.readouterr().err
    assert "its cached answers are not its answers today (case " in err and "first differing rank 1;" in err
    assert "10 of 10 sampled cached answers differ" in err and "all 10 queries are asked again" in err
    third = run()  # the entries were replaced by today's answers: read again, and checked again
    assert third.cache == {"external_calls": 0, "external_cached": 10}
    assert third.eval.metrics["recall_at_5"] == 0.0 and third.external_tags["external.cache_check"] == "ok"
    assert third.external["external.cache_check.asks"] == 10.0


def _settings(golden, target: str, extra):
    from rag_experiments.config import settings_from_cfg

    overrides = [f"corpus.path={MINI}", "corpus.name=mini", f"golden.path={golden}", "progress=false",
                 "eval.bootstrap_samples=200", "retrieval=external", f"retrieval.external.target={target}", *extra]
    return settings_from_cfg(_compose(free_mapping_overrides(overrides)))


def test_version_and_cache_do_what_they_say_for_a_service(golden_env, service):
    base = ["retrieval=http", f"retrieval.http.url={service}", "retrieval.external.verify=0"]  # the key alone
    v1, v2 = f"v1-{uuid.uuid4().hex[:8]}", f"v2-{uuid.uuid4().hex[:8]}"

    def run(*extra):
        return run_experiment(settings(golden_env, "oracle", *base, *extra))

    RANK["n"] = 1
    assert run(f"retrieval.external.version={v1}").cache == {"external_calls": 10, "external_cached": 0}
    RANK["n"] = 7  # a new model behind the same URL, declared as v2: a new key, asked live
    declared = run(f"retrieval.external.version={v2}")
    assert declared.cache == {"external_calls": 10, "external_cached": 0}  # before: 0 calls, 10 cached
    assert declared.eval.metrics["recall_at_5"] == 0.0
    RANK["n"] = 1
    live = run(f"retrieval.external.version={v2}", "retrieval.external.cache=false")
    assert live.cache == {"external_calls": 10, "external_cached": 0}  # before: 10 cached (rank 7's answers)
    assert live.eval.metrics["recall_at_5"] == 1.0 and live.external_tags == {"external.cache_check": "unused"}
    # cache=false wrote nothing: v2's entries are still rank 7's answers
    assert run(f"retrieval.external.version={v2}").eval.metrics["recall_at_5"] == 0.0


def test_a_stored_run_refuses_a_declared_version(golden_env, tmp_path):
    run_file = tmp_path / "run.trec"
    run_file.write_text("case-1 Q0 doc.md 1 1.0 t\n")
    with pytest.raises(UserError, match=r"retrieval.external.version=v2: a stored run is identified by its file"):
        run_experiment(settings(golden_env, "oracle", "retrieval=stored", f"retrieval.stored.path={run_file}",
                                "retrieval.external.version=v2"))


def test_a_non_deterministic_system_is_tagged_on_the_run_and_not_cached(golden_env, capsys):
    version = f"coin-{uuid.uuid4().hex[:8]}"
    target = f"{PROBES}:coin"
    overrides = [f"retrieval.external.version={version}", "tracking.plots=false"]
    result = run_experiment(_settings(golden_env, target, overrides))
    assert result.external_tags["external.nondeterministic"] == "true"
    assert result.external_tags["external.cache_check"] == "nondeterministic"
    err = capsys.readouterr().err
    assert "answered the same query differently twice (case " in err and "10 of 10 sampled queries" in err
    cfg = _compose(free_mapping_overrides([f"corpus.path={MINI}", "corpus.name=mini", f"golden.path={golden_env}",
                                           "retrieval=external", f"retrieval.external.target={target}", *overrides]))
    run_id = log_result(result, cfg, "coin")
    tags = MlflowClient().get_run(run_id).data.tags
    assert tags["external.nondeterministic"] == "true" and tags["external.cache_check_seed"].isdigit()
    again = run_experiment(_settings(golden_env, target, overrides))
    assert again.cache["external_cached"] == 0  # nothing was written


def test_a_query_past_the_deadline_stops_the_run_naming_the_system_case_and_limit(golden_env):
    with pytest.raises(UserError) as exc:
        run_experiment(_settings(golden_env, f"{PROBES}:sleepy", [
            "retrieval.external.deadline_s=0.5", "+retrieval.external.params.slow=work_mem",
            "retrieval.external.params.seconds=5", "retrieval.external.cache=false"]))
    message = exc.value.message
    assert message.startswith(f"{PROBES}:sleepy, case ") and "work_mem" in message
    assert "no answer within retrieval.external.deadline_s=0.5 s" in message


@pytest.mark.parametrize("target, expected", [
    ("huge", "the passage text is 300,000 characters, more than retrieval.external.max_passage_chars=200,000"),
    ("endless", "more than k: 21 passages returned for k=20"),
])
def test_a_python_targets_answer_is_bounded_in_size(golden_env, target, expected):
    with pytest.raises(UserError) as exc:
        run_experiment(_settings(golden_env, f"{PROBES}:{target}", ["retrieval.external.cache=false"]))
    assert expected in exc.value.message and f"{PROBES}:{target}" in exc.value.message


def test_the_slowest_query_is_in_the_logged_latency(golden_env):
    result = run_experiment(_settings(golden_env, f"{PROBES}:sleepy", [
        "+retrieval.external.params.slow=work_mem", "retrieval.external.params.seconds=0.4",
        "retrieval.external.cache=false"]))
    assert result.external["external.latency_ms_max"] >= 400
    assert result.external["external.live_latency_ms_max"] >= 400
    assert result.external["external.latency_cached_queries"] == 0
