"""A sweep whose launching process is killed with SIGKILL (issue 49, P6): its forked workers notice
the parent is gone and end quietly (at most one line each: ``sweep parent gone; stopping``), no
``BrokenPipeError`` traceback from sending a result to a dead parent or writing to an output
nobody reads any more.

Real PostgreSQL, a real MLflow sqlite store, ``run.py -m`` in a subprocess with two forked workers
(``hydra.launcher.n_jobs=2``). The workers inherit the sweep's stdout and stderr: stdout is a pipe
this test closes right after the kill (as a terminal or a ``| tee`` that goes away with the
sweep), stderr a file read once every worker has exited.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from hydra_plugins.rag_experiments_launchers import forked

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "tests" / "fixtures" / "mini_corpus"

pytestmark = pytest.mark.skipif(not forked.fork_available(), reason="workers are forked")


def _workers(parent: psutil.Process) -> list[psutil.Process]:
    try:
        return [p for p in parent.children() if p.status() != psutil.STATUS_ZOMBIE]
    except psutil.Error:
        return []


def test_workers_end_quietly_when_the_sweep_parent_is_killed(project, mini_golden):
    err_path = project / "sweep.stderr"
    # 40 points: the two workers always have one in hand when the parent dies
    args = [sys.executable, str(ROOT / "run.py"), "-m", "fusion.rrf_k=range(1,41)", f"corpus.path={MINI}",
            "corpus.name=mini", f"golden.path={mini_golden}", "chunking.max_tokens=60", "progress=false",
            "eval.bootstrap_samples=200", "tracking.plots=false", "hydra.launcher.n_jobs=2"]
    env = {**os.environ, "RAG_EXP_HOME": str(project), "PYTHONPATH": str(ROOT)}
    with err_path.open("wb") as err:
        proc = subprocess.Popen(args, cwd=project, env=env, stdout=subprocess.PIPE, stderr=err)
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + 240
    workers: list[psutil.Process] = []
    while time.monotonic() < deadline and proc.poll() is None:
        workers = _workers(parent)
        if len(workers) >= 2:
            break
        time.sleep(0.05)
    assert len(workers) >= 2, f"the workers never started: {err_path.read_text(errors='replace')[-2000:]}"
    time.sleep(1.0)  # they are running points now
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()  # nobody reads the sweep's output any more
    gone, alive = psutil.wait_procs(workers, timeout=60)
    for p in alive:  # never left behind, whatever the outcome
        p.kill()
    assert not alive, "a worker outlived its sweep parent by 60 s"
    text = err_path.read_text(errors="replace")
    tail = text[text.rfind("fusion.rrf_k") if "fusion.rrf_k" in text else 0:]
    assert "Traceback" not in text and "BrokenPipeError" not in text, tail[-3000:]
    said = [line for line in text.splitlines() if "sweep parent gone" in line]
    assert len(said) <= len(workers)
