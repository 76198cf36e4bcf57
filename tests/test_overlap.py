"""A single run's work in a forked child while the parent imports the tracking stack
(rag_experiments/overlap.py; issue 44 item 8). The fork path needs a single-threaded process, and a
pytest-xdist worker has threads, so each case runs in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mlflow.tracking import MlflowClient

from .test_pipeline import _mini_overrides, _run_py

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = r"""
import json, os, pickle, signal, sys
from rag_experiments.errors import ConfigError
from rag_experiments.overlap import can_fork, run_overlapped

case = sys.argv[1]
warmed = []
parent = os.getpid()

def work():
    if case == "value":
        return {"pid": os.getpid(), "rows": list(range(100_000))}
    if case == "user_error":
        raise ConfigError("fusion.rrf_k: must be > 0, got 0")
    if case == "unpicklable":
        return lambda: None
    if case == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    if case == "bug":
        return {}["missing"]

out = {"can_fork": can_fork()}
try:
    got = run_overlapped(work, lambda: warmed.append(os.getpid()))
    out.update(ok=True, child_pid=got["pid"], n=len(got["rows"]))
except BaseException as exc:
    out.update(ok=False, type=type(exc).__name__, message=str(exc))
out.update(parent=parent, warmed=warmed)
print(json.dumps(out))
"""


def _case(case: str, **env: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, case], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_work_runs_in_a_child_and_its_result_comes_back_whole():
    out = _case("value")
    assert out["can_fork"] and out["ok"], out
    assert out["child_pid"] != out["parent"] and out["n"] == 100_000  # larger than a pipe's buffer
    assert out["warmed"] == [out["parent"]]  # the imports ran in the parent


def test_switched_off_it_runs_in_this_process_and_warms_nothing():
    out = _case("value", RAG_EXP_OVERLAP="0")
    assert out["ok"] and out["child_pid"] == out["parent"] and out["warmed"] == [], out


def test_a_user_error_in_the_child_is_the_same_error_in_the_parent():
    out = _case("user_error")
    assert (out["ok"], out["type"], out["message"]) == (False, "ConfigError", "fusion.rrf_k: must be > 0, got 0")


def test_a_bug_in_the_child_keeps_its_type():
    out = _case("bug")
    assert (out["ok"], out["type"], out["message"]) == (False, "KeyError", "'missing'")


def test_a_result_that_cannot_be_sent_back_is_one_clear_error():
    out = _case("unpicklable")
    assert not out["ok"] and out["type"] == "RuntimeError", out
    assert "could not be sent back" in out["message"] and "RAG_EXP_OVERLAP=0" in out["message"]


def test_a_child_killed_midway_is_an_error_never_an_empty_result():
    out = _case("killed")
    assert not out["ok"] and out["type"] == "RuntimeError", out
    assert out["message"] == "the experiment's process ended without a result (killed by signal 9); nothing was logged"


def _logged(project: Path) -> dict:
    client = MlflowClient(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("rag-experiments")
    runs = [r for r in client.search_runs([exp.experiment_id]) if "sweep" not in r.data.tags]
    assert len(runs) == 1, [r.info.run_name for r in runs]
    run = runs[0]
    arts = sorted(a.path for a in client.list_artifacts(run.info.run_id))
    volatile = {"rag_exp.owner.pid", "rag_exp.owner.started"}
    return {"metrics": {k: v for k, v in run.data.metrics.items() if not k.startswith("latency_ms")},
            "params": run.data.params, "tags": sorted(set(run.data.tags) - volatile), "artifacts": arts}


def test_a_run_logs_the_same_whether_overlapped_or_not(tmp_path, pg_url, mini_golden, monkeypatch):
    """``rag-exp run`` (run.py) with the fork path and without it: the same metrics, params, tag
    names and artifacts in MLflow (latency aside: it is measured)."""
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    seen = {}
    for mode in ("1", "0"):
        project = tmp_path / f"overlap_{mode}"
        project.mkdir()
        monkeypatch.setenv("RAG_EXP_OVERLAP", mode)
        proc = _run_py(project, *_mini_overrides(mini_golden, "tracking.plots=true"))
        assert proc.returncode == 0, proc.stderr[-3000:]
        seen[mode] = _logged(project)
    assert seen["1"] == seen["0"]
    assert "plots" in seen["1"]["artifacts"] and seen["1"]["metrics"]
