"""Two `promote` at once (issue 55 probe 5): before, both reported "first champion" and
registered versions 1 and 2, the second replacing the first without a comparison. Now the
champion's lock makes the second wait, saying so, and decide against what the first left."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from mlflow.tracking import MlflowClient

from rag_experiments.paths import tracking_uri

from .conftest import cli, per_case_frame
from .test_promote import KINDS, MODEL, _cases

ROOT = Path(__file__).resolve().parents[2]
HOLD = r"""
import sys, time
from rag_experiments.serving.model_logging import champion_lock
with champion_lock("default"):
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
"""


def _env(root: Path) -> dict:
    return {**os.environ, "RAG_EXP_HOME": str(root), "MLFLOW_TRACKING_URI": tracking_uri(),
            "PYTHONPATH": str(ROOT), "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}


def test_two_promotes_at_once_register_one_champion(store, make_run, repo_conf):
    root, _ = store
    make_run(per_case_frame(_cases(30, 15), kinds=KINDS), name="only")
    argv = [sys.executable, "-m", "rag_experiments.cli", "promote", "--metric", "recall_at_5"]
    procs = [subprocess.Popen(argv, cwd=root, env=_env(root), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for _, e in outs]
    versions = MlflowClient().search_model_versions(f"name='{MODEL}'")
    assert len(versions) == 1, [o for o, _ in outs]
    said = [o for o, _ in outs]
    assert sum("first champion" in o for o in said) == 1
    assert sum("is already the champion" in o for o in said) == 1


def test_a_promote_waiting_for_the_lock_says_so(store, make_run, repo_conf, capsys):
    root, _ = store
    make_run(per_case_frame(_cases(30, 15), kinds=KINDS), name="only")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, "3"], cwd=root, env=_env(root), stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        assert cli("promote", "--metric", "recall_at_5") == 0
        waited = time.monotonic() - start
    finally:
        holder.wait(timeout=60)
    captured = capsys.readouterr()
    assert "waiting for another command promoting or registering champion 'default' ..." in captured.err
    assert "promoted" in captured.out and waited > 1
