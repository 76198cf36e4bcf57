"""The default launcher's forked workers (``hydra.launcher.n_jobs``): a sweep run by two workers
logs the same children (same metrics per overrides) and the same parent result as one run point
after point; a point that fails in a worker fails as in serial; results come back in job order;
a worker that dies is reported by point, never waited for.

Real PostgreSQL and a real MLflow sqlite store (the ``project`` fixture), ``run.py`` in a
subprocess as a user runs it.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from hydra_plugins.rag_experiments_launchers import forked
from rag_experiments.tracking.ownership import OWNER_PID

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "tests" / "fixtures" / "mini_corpus"
# 4 points: the first warms the launching process, then each of the two workers is handed one at
# once (forked.py), so three processes run points, as with more
SWEEP = ["fusion.rrf_k=5,40", "fusion.keyword_weight=0.5,1.5"]

pytestmark = pytest.mark.skipif(not forked.fork_available(), reason="workers are forked")


def _overrides(golden: Path, *extra: str) -> list[str]:
    return [f"corpus.path={MINI}", "corpus.name=mini", f"golden.path={golden}", "chunking.max_tokens=60",
            "progress=false", "eval.bootstrap_samples=200", "tracking.plots=false", *extra]


def _run_py(project: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "RAG_EXP_HOME": str(project), "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], check=False, cwd=project, env=full_env,
                          capture_output=True, text=True, timeout=300)


def _sweep(project: Path, store: str, golden: Path, n_jobs: int, *points: str, env: dict | None = None):
    """Run a sweep into its own MLflow store; (process, client, parent run, children by overrides)."""
    db = project / f"{store}.db"
    proc = _run_py(project, "-m", *points, *_overrides(golden), f"hydra.launcher.n_jobs={n_jobs}",
                   env={"MLFLOW_TRACKING_URI": f"sqlite:///{db}", **(env or {})})
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = client.get_experiment_by_name("rag-experiments")
    if exp is None:
        return proc, client, None, {}
    parents = client.search_runs([exp.experiment_id], "tags.sweep = 'parent'")
    parent = parents[0] if parents else None
    children = {}
    if parent is not None:
        for run in client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'"):
            key = (run.data.params.get("fusion.rrf_k"), run.data.params.get("fusion.keyword_weight"))
            children[key] = run
    return proc, client, parent, children


def _point_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("#") and "| run " in line]


def test_two_workers_log_what_one_process_logs(project, mini_golden):
    serial, _, s_parent, s_children = _sweep(project, "serial", mini_golden, 1, *SWEEP)
    assert serial.returncode == 0, serial.stderr[-3000:]
    par, _, p_parent, p_children = _sweep(project, "parallel", mini_golden, 2, *SWEEP)
    assert par.returncode == 0, par.stderr[-3000:]

    assert len(s_children) == len(p_children) == 4
    assert set(s_children) == set(p_children)
    skip = ("latency", "timing", "_s")  # wall-clock values differ run to run, in serial too
    for key, s_run in s_children.items():
        p_run = p_children[key]
        assert p_run.info.status == s_run.info.status == "FINISHED", key
        s_m = {k: v for k, v in s_run.data.metrics.items() if not any(x in k for x in skip)}
        p_m = {k: v for k, v in p_run.data.metrics.items() if not any(x in k for x in skip)}
        assert p_m == s_m, key
        assert p_run.data.params == s_run.data.params, key
    # the parent: same best child (by overrides), same metrics, FINISHED, every job counted
    assert p_parent.info.status == s_parent.info.status == "FINISHED"
    assert p_parent.data.metrics == s_parent.data.metrics
    for tag in ("best_run_overrides", "children", "children_failed"):
        assert p_parent.data.tags[tag] == s_parent.data.tags[tag], tag
    assert p_parent.data.tags["children"] == "4"
    # one whole line per point, from both modes
    assert len(_point_lines(serial.stdout)) == len(_point_lines(par.stdout)) == 4
    # the points really ran in three processes (the launching one, then two workers), and one
    # in serial; the runs' owner tags name the process that logged them
    assert len({r.data.tags[OWNER_PID] for r in p_children.values()}) == 3
    assert len({r.data.tags[OWNER_PID] for r in s_children.values()}) == 1


def test_a_point_that_fails_in_a_worker_fails_as_in_serial(project, mini_golden):
    unreachable = f"'postgresql:///nodb?host={project / 'no-such-socket-dir'}'"
    points = [f"db.url=null,{unreachable},null", "fusion.rrf_k=5,40"]  # the 3rd and 4th of 6 fail
    outcome = {}
    for n_jobs in (1, 2):
        proc, client, parent, _ = _sweep(project, f"fail{n_jobs}", mini_golden, n_jobs, *points)
        assert proc.returncode != 0
        statuses = sorted(r.info.status for r in client.search_runs(
            [parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'"))
        assert "RUNNING" not in statuses
        err = [line for line in proc.stderr.splitlines() if line.strip()]
        # (the worker's traceback, printed as the cause, repeats the error line: said once here)
        said = list(dict.fromkeys(line for line in err if line.startswith(("Error executing job",
                                                                           "rag_experiments.errors."))))
        outcome[n_jobs] = (proc.returncode, statuses, parent.info.status, parent.data.tags.get("children_failed"),
                           said, err[-1], len(_point_lines(proc.stdout)))
    assert outcome[2] == outcome[1]
    assert outcome[1][1] == ["FAILED", "FAILED", "FINISHED", "FINISHED", "FINISHED", "FINISHED"]
    assert outcome[1][2] == "FAILED"
    assert outcome[1][4][0].startswith("Error executing job with overrides: [\"db.url='postgresql:///nodb")
    assert outcome[1][4][1].startswith("rag_experiments.errors.DatabaseError: cannot connect to PostgreSQL")
    assert "HYDRA_FULL_ERROR=1" in outcome[1][5]


class _Recorder:
    """A Hydra callback: which jobs ``on_job_end`` saw, in order, in the launching process."""

    def __init__(self) -> None:
        self.ended: list[tuple[int, str]] = []

    def on_job_start(self, **kwargs) -> None:
        pass

    def on_job_end(self, config, job_return, **kwargs) -> None:
        self.ended.append((int(config.hydra.job.num), job_return.status.name))


def _task(cfg) -> tuple[int, int]:
    """Point 1 is slow (finishes after later points); rrf_k=13 fails; rrf_k=66 kills its process."""
    import signal
    import time

    k = int(cfg.fusion.rrf_k)
    if k == 13:
        raise ValueError(f"no good: rrf_k={k}")
    if k == 66:
        os.kill(os.getpid(), signal.SIGKILL)
    if k == 2:
        time.sleep(1.5)
    return os.getpid(), k


@pytest.fixture()
def launcher(tmp_path, monkeypatch):
    """Returns ``launch(points, n_jobs) -> (JobReturns, on_job_end record)`` on the repo's config."""
    from hydra import initialize_config_dir
    from hydra._internal.callbacks import Callbacks
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import HydraContext, RunMode

    from hydra_plugins.rag_experiments_launchers.basic_once import (
        BasicLauncherComposingOnce,
    )
    from rag_experiments.config import register_schema

    register_schema()
    monkeypatch.chdir(tmp_path)
    GlobalHydra.instance().clear()

    def launch(points, n_jobs):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("config", overrides=["fusion.rrf_k=1,2", f"hydra.sweep.dir={tmp_path}"],
                                           run_mode=RunMode.MULTIRUN)
        callbacks, recorder = Callbacks(), _Recorder()
        callbacks.callbacks.append(recorder)
        la = BasicLauncherComposingOnce(n_jobs=n_jobs)
        la.setup(hydra_context=HydraContext(config_loader=loader, callbacks=callbacks), task_function=_task,
                 config=master)
        return la.launch([[f"fusion.rrf_k={k}"] for k in points], initial_job_idx=0), recorder.ended

    # the launcher configures logging as Hydra does (handlers on the root logger bound to this
    # test's captured streams); put it back, or a later test's log record goes to a closed stream
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            yield launch
    finally:
        GlobalHydra.instance().clear()
        root.handlers[:] = handlers
        root.setLevel(level)


def test_results_come_back_in_job_order(launcher):
    points = [1, 2, 3, 4, 5, 6]
    rets, ended = launcher(points, 2)
    assert [r.overrides for r in rets] == [[f"fusion.rrf_k={k}"] for k in points]
    assert [r.return_value[1] for r in rets] == points
    assert ended == [(i, "COMPLETED") for i in range(len(points))]
    pids = [r.return_value[0] for r in rets]
    assert pids[0] == os.getpid()  # the first point warms this process
    assert len(set(pids[1:])) == 2 and os.getpid() not in pids[1:]  # the others ran in two workers
    # the JobReturns carry what run_job fills in, as in serial
    serial, _ = launcher(points, 1)
    for mine, theirs in zip(rets, serial):
        assert (mine.status, mine.task_name, mine.working_dir) == (theirs.status, theirs.task_name, theirs.working_dir)
        assert mine.cfg == theirs.cfg
        assert mine.hydra_cfg.hydra.job.num == theirs.hydra_cfg.hydra.job.num


def test_a_failing_point_comes_back_as_in_serial(launcher):
    points = [1, 13, 3, 4]
    out = {}
    for n_jobs in (1, 2):
        rets, ended = launcher(points, n_jobs)
        assert [r.status.name for r in rets] == ["COMPLETED", "FAILED", "COMPLETED", "COMPLETED"]
        with pytest.raises(ValueError, match="no good: rrf_k=13") as err:
            _ = rets[1].return_value
        out[n_jobs] = ended
        if n_jobs == 2:  # where it failed is said
            assert "_task" in str(err.value.__cause__) and "Traceback" in str(err.value.__cause__)
    assert out[1] == out[2] == [(0, "COMPLETED"), (1, "FAILED"), (2, "COMPLETED"), (3, "COMPLETED")]


def test_a_worker_that_dies_is_reported_by_point(launcher, capfd):
    rets, ended = launcher([1, 3, 66, 4, 5], 2)
    assert [r.status.name for r in rets] == ["COMPLETED", "COMPLETED", "FAILED", "COMPLETED", "COMPLETED"]
    with pytest.raises(forked.WorkerError, match=r"sweep point #2 \(fusion.rrf_k=66\) got no result: its "
                                                 r"worker process \(pid \d+\) killed by SIGKILL"):
        _ = rets[2].return_value
    assert [r.return_value[1] for i, r in enumerate(rets) if i != 2] == [1, 3, 4, 5]  # the other worker went on
    assert ended == [(0, "COMPLETED"), (1, "COMPLETED"), (2, "FAILED"), (3, "COMPLETED"), (4, "COMPLETED")]
    assert "error: sweep point #2 (fusion.rrf_k=66) got no result" in capfd.readouterr().err


class _Referent:
    pass


def test_after_fork_survives_a_dead_weak_proxy():
    """A weakref proxy whose object is gone raises ReferenceError when isinstance() asks it for its
    class; after_fork walks every object the collector tracks, so one such proxy anywhere in the
    process killed every worker (seen in a full test run: all points "got no result")."""
    import weakref

    from hydra_plugins.rag_experiments_launchers.forked import after_fork

    referent = _Referent()
    dead = [weakref.proxy(referent)]
    del referent
    pid = os.fork()
    if pid == 0:  # the child: after_fork replaces stdin and clears memos, so only here
        code = 0
        try:
            after_fork()
        except BaseException:  # noqa: BLE001 - any failure is the finding
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, "after_fork raised in the child"
    assert dead


def test_a_frozen_heap_still_has_its_engines_disposed_in_the_worker(tmp_path):
    """The launcher freezes the heap before forking (gc.freeze, so workers' collections skip the
    first point's memos), and gc.get_objects() does not list frozen objects; after_fork must
    still find the inherited SQLAlchemy engine and give the worker its own connections."""
    import gc

    import sqlalchemy

    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'store.db'}")
    with engine.connect() as conn:
        conn.exec_driver_sql("select 1")
    inherited = engine.pool
    gc.collect()
    gc.freeze()
    try:
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                forked.after_fork()
                code = 0 if engine.pool is not inherited and gc.get_freeze_count() > 0 else 4
            except BaseException:  # noqa: BLE001 - any failure is the finding
                pass
            os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        gc.unfreeze()
    assert os.WEXITSTATUS(status) == 0, "the inherited engine was not disposed (3: after_fork raised)"


def test_n_jobs_values():
    assert forked.resolve_n_jobs(3) == 3
    assert forked.resolve_n_jobs("1") == 1
    assert 1 <= forked.resolve_n_jobs("auto") <= 2
    with pytest.raises(ValueError):
        forked.resolve_n_jobs(0)
    with pytest.raises(ValueError):
        forked.resolve_n_jobs("many")


def test_an_exception_that_does_not_pickle_comes_back_described():
    class Local(Exception):  # a local class: pickle cannot find it
        pass

    sent = forked.portable_exception(Local("boom"))
    assert isinstance(sent, forked.WorkerError) and "Local: boom" in str(sent)
    from rag_experiments.errors import ConfigError

    err = ConfigError("fusion.rrf_k: must be > 0", hint="set it")
    assert forked.portable_exception(err) is err
