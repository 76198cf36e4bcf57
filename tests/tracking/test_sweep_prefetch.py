"""The sweep parent's prefetch: per-case tables of FINISHED children, read while the sweep runs,
equal to what the summary would read itself; nothing of other runs; safe across os.fork."""

from __future__ import annotations

import os
import time

import pandas as pd
from mlflow.tracking import MlflowClient

from rag_experiments.tracking.runs import load_per_case
from rag_experiments.tracking.sweep_prefetch import PerCasePrefetch

from .conftest import per_case_frame


def _wait(cond, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_finished_children_are_read_as_the_summary_reads_them(store, make_run, make_parent):
    _, exp_id = store
    parent, other_parent = make_parent(), make_parent("other")
    done = [make_run(per_case_frame([1, 0, 1, 1], seed=i), name=f"p{i}", parent=parent) for i in range(3)]
    failed = make_run(per_case_frame([0, 0, 1, 0]), name="failed", parent=parent, status="FAILED")
    elsewhere = make_run(per_case_frame([1, 1, 1, 1]), name="elsewhere", parent=other_parent)
    prefetch = PerCasePrefetch(parent, exp_id)
    prefetch.poll_s = 0.05
    prefetch.start()
    try:
        assert _wait(lambda: set(done) <= set(prefetch.frames())), "children never read"
    finally:
        prefetch.stop()
    assert not prefetch.running
    c = MlflowClient()
    read = prefetch.frames()
    for run_id in done:
        expected = load_per_case(run_id, c, c.get_run(run_id).info.artifact_uri)
        pd.testing.assert_frame_equal(read[run_id], expected)
    assert failed not in read  # a FAILED child is not part of the comparison
    assert elsewhere not in read  # another sweep's child


def test_a_fork_waits_for_the_thread_and_the_thread_resumes(store, make_parent):
    _, exp_id = store
    prefetch = PerCasePrefetch(make_parent(), exp_id)
    prefetch.poll_s = 0.01
    prefetch.start()
    try:
        assert prefetch.running
        pid = os.fork()
        if pid == 0:  # the child: no prefetch thread was inherited
            os._exit(0 if not prefetch.running else 3)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        assert prefetch.forks_waited == 1  # the thread was stopped before the fork (no lock it held is copied)
        assert prefetch.running  # and started again after it, in this process
    finally:
        prefetch.stop()


def test_the_summary_searches_only_the_children_the_prefetch_did_not_read(store, make_run, make_parent, monkeypatch):
    """sweep_children(known=...) returns what a whole search returns (same runs, same order, same
    params/metrics/tags); the known ones are excluded from the store query itself."""
    from rag_experiments.tracking import runs as R

    _, exp_id = store
    parent = make_parent()
    early = [make_run(per_case_frame([1, 0, 1, 1], seed=i), name=f"p{i}", parent=parent) for i in range(3)]
    prefetch = PerCasePrefetch(parent, exp_id)
    prefetch.poll_s = 0.05
    prefetch.start()
    try:
        assert _wait(lambda: {r.id for r in prefetch.runs()} >= set(early)), "children never read"
    finally:
        prefetch.stop()
    late = [make_run(per_case_frame([0, 1, 1, 0], seed=i), name=f"late{i}", parent=parent) for i in range(2)]
    failed = make_run(per_case_frame([0, 0, 1, 0]), name="failed", parent=parent, status="FAILED")
    c = MlflowClient()
    whole = R.sweep_children(parent, per_case=False, c=c)
    searched = []
    real_search = R.search
    monkeypatch.setattr(R, "search", lambda f, **kw: searched.append(f) or real_search(f, **kw))
    merged = R.sweep_children(parent, per_case=False, c=c, known=prefetch.runs())
    monkeypatch.setattr(R, "search", real_search)
    assert [r.id for r in merged] == [r.id for r in whole] == [*early, *late, failed]
    for a, b in zip(merged, whole):
        for f in ("status", "start_time", "experiment_id", "tags", "metrics", "params", "artifact_uri", "name"):
            assert getattr(a, f) == getattr(b, f), f
    assert all(f"'{i}'" in searched[0] for i in early) and "NOT IN" in searched[0]
    # more known runs than one filter may list: every child is searched, with the same result
    monkeypatch.setattr(R, "KNOWN_IN_FILTER_MAX", 2)
    capped = R.sweep_children(parent, per_case=False, c=c, known=prefetch.runs())
    assert [r.id for r in capped] == [r.id for r in whole]
