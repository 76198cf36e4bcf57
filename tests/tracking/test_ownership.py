"""Runs whose process died (kill -9) are marked KILLED and skipped by --last-sweep, promote, gate.

The sweep parent is opened by the real Hydra callback in a real subprocess, which is then
killed with SIGKILL: no ``finally``, no ``atexit``, exactly what a kill -9 of a sweep does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from mlflow.tracking import MlflowClient

from rag_experiments.errors import UserError
from rag_experiments.tracking import ownership
from rag_experiments.tracking import runs as R

from .conftest import cli, per_case_frame

SWEEP_OWNER = textwrap.dedent("""
    import sys, time
    from omegaconf import OmegaConf
    from rag_experiments.tracking.hydra_callback import MlflowSweepCallback

    cfg = OmegaConf.create({
        "tracking": {"enabled": True, "uri": None, "experiment": "rag-experiments", "sweep_summary": False},
        "objective": "recall_at_5",
        "hydra": {"overrides": {"task": ["fusion.rrf_k=30,60"]}, "sweeper": {"params": {"fusion.rrf_k": "30,60"}},
                  "sweep": {"dir": sys.argv[1]}},
    })
    cb = MlflowSweepCallback()
    cb.on_multirun_start(cfg)
    print(cb.parent_id, flush=True)
    time.sleep(600)  # a sweep point that takes long; the test kills us meanwhile
""")


def _start_sweep_and_kill(root) -> str:
    """A sweep parent opened by a subprocess that is then killed with SIGKILL; its run id."""
    env = {**os.environ, "RAG_EXP_HOME": str(root), "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.Popen([sys.executable, "-c", SWEEP_OWNER, str(root / "multirun")], cwd=root, env=env,
                            stdout=subprocess.PIPE, text=True)
    try:
        parent_id = proc.stdout.readline().strip()
        assert len(parent_id) == 32, parent_id
        assert MlflowClient().get_run(parent_id).info.status == "RUNNING"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return parent_id


def _reap():
    return ownership.reap_dead_runs(MlflowClient(), R.tracking_uri(), once=False)


def test_kill_9_sweep_is_marked_killed_and_last_sweep_skips_it(store, make_run, make_parent, capsys):
    root, _ = store
    good = make_parent("complete sweep")
    c1 = make_run(per_case_frame([1, 0, 1]), name="rrf_k=30", parent=good)
    c2 = make_run(per_case_frame([0, 0, 1]), name="rrf_k=60", parent=good)
    dead = _start_sweep_and_kill(root)
    tags = MlflowClient().get_run(dead).data.tags
    assert tags[ownership.OWNER_PID].isdigit() and tags[ownership.OWNER_HOST] and tags[ownership.OWNER_STARTED]

    assert cli("compare", "--last-sweep") == 0  # opening the store reaps, --last-sweep skips
    err = capsys.readouterr().err
    assert f"run {dead}" in err and "marked KILLED" in err
    assert f"skipping sweep {dead}" in err
    run = MlflowClient().get_run(dead)
    assert run.info.status == "KILLED" and "is gone" in run.data.tags[ownership.KILLED_REASON]
    runs, parent = R.select_runs(last_sweep=True)
    assert parent.id == good and [r.id for r in runs] == [c1, c2]


def test_a_live_owner_and_another_host_are_left_alone(store):
    _, exp_id = store
    c = MlflowClient()
    mine = c.create_run(exp_id, run_name="alive", tags=ownership.owner_tags()).info.run_id
    elsewhere = c.create_run(exp_id, run_name="other host", tags={
        ownership.OWNER_HOST: "not-" + ownership._host(), ownership.OWNER_PID: "999999999",
        ownership.OWNER_STARTED: "1.000"}).info.run_id
    untagged = c.create_run(exp_id, run_name="no owner").info.run_id
    assert _reap() == []
    for rid in (mine, elsewhere, untagged):
        assert c.get_run(rid).info.status == "RUNNING"
        c.set_terminated(rid)


def test_a_reused_pid_does_not_keep_a_dead_run_alive(store):
    """Same host, the pid exists, but it is another process (start time differs): KILLED."""
    _, exp_id = store
    c = MlflowClient()
    tags = ownership.owner_tags()
    tags[ownership.OWNER_STARTED] = f"{float(tags[ownership.OWNER_STARTED]) - 3600:.3f}"
    rid = c.create_run(exp_id, run_name="pid reused", tags=tags).info.run_id
    reaped = _reap()
    assert [r.run_id for r in reaped] == [rid] and "now belongs to a process" in reaped[0].reason
    assert c.get_run(rid).info.status == "KILLED"


def test_every_run_we_open_records_its_owner(store, make_run):
    """The run logged by log_experiment carries the owner tags (checked through the code path)."""
    from rag_experiments.tracking import mlflow_run

    assert set(mlflow_run.owner_tags()) == {ownership.OWNER_HOST, ownership.OWNER_PID, ownership.OWNER_STARTED}
    assert mlflow_run.owner_tags()[ownership.OWNER_PID] == str(os.getpid())


def test_promote_refuses_a_killed_sweep_and_skips_killed_runs(store, make_run, make_parent, capsys):
    root, exp_id = store
    dead = _start_sweep_and_kill(root)
    make_run(per_case_frame([1, 1, 1]), name="finished before the kill", parent=dead)
    _reap()
    from rag_experiments.tracking.promote import candidate_runs

    with pytest.raises(UserError, match="KILLED"):
        candidate_runs("recall_at_5", sweep=dead)
    killed_child = make_run(per_case_frame([1, 1, 1]), name="killed child", status="KILLED")
    kept = make_run(per_case_frame([0, 1, 1]), name="finished")
    capsys.readouterr()
    assert [r.id for r in candidate_runs("recall_at_5")][-1] == kept
    assert "skipped 1 KILLED run" in capsys.readouterr().err
    assert killed_child not in [r.id for r in candidate_runs("recall_at_5")]


def test_gate_refuses_a_killed_run_by_name(store, make_run, capsys):
    from .test_gate import _champion

    _champion(make_run)
    killed = make_run(per_case_frame([1, 1, 1]), name="killed", status="KILLED")
    capsys.readouterr()
    assert cli("gate", "--run", killed) == 2
    assert f"run {killed} (killed) is KILLED" in capsys.readouterr().err


def test_gate_newest_run_skips_killed_runs_and_says_so(store, make_run, capsys):
    from rag_experiments.commands.gate import newest_run

    done = make_run(per_case_frame([1, 1, 0]), name="done")
    time.sleep(0.01)
    make_run(per_case_frame([1, 1, 1]), name="died", status="KILLED")
    assert newest_run(set()) == done
    assert "skipped 1 KILLED run" in capsys.readouterr().err


def test_compare_selection_skips_killed_runs_of_a_sweep_or_tag(make_run, make_parent, capsys):
    parent = make_parent("sweep")
    ok1 = make_run(per_case_frame([1, 0]), name="a", parent=parent, tags={"variant": "x"})
    dead = make_run(per_case_frame([1, 1]), name="b", parent=parent, tags={"variant": "x"}, status="KILLED")
    ok2 = make_run(per_case_frame([0, 0]), name="c", parent=parent, tags={"variant": "x"})
    capsys.readouterr()
    for kwargs in ({"sweep": parent}, {"tag": "variant=x"}):
        runs, _ = R.select_runs(**kwargs)
        assert [r.id for r in runs] == [ok1, ok2]
        assert f"skipping run {dead}" in capsys.readouterr().err
    runs, _ = R.select_runs([dead, ok1])  # named explicitly: kept, with a warning
    assert [r.id for r in runs] == [dead, ok1] and "was KILLED" in capsys.readouterr().err


def test_a_killed_owner_not_yet_waited_for_is_gone():
    """A kill -9'd process stays a zombie until its parent waits: it must already count as gone."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        tags = ownership.owner_tags(proc.pid)
        assert ownership.owner_gone(tags) is None  # alive
        os.kill(proc.pid, signal.SIGKILL)
        deadline = time.time() + 10
        while ownership.owner_gone(tags) is None and time.time() < deadline:
            time.sleep(0.05)
        assert "is gone" in ownership.owner_gone(tags)
    finally:
        proc.kill()
        proc.wait()
