"""Read the sweep summary's inputs while the sweep is still running.

At a sweep's end the parent run compares every child with the first point, which reads each
child's per-case table and draws plots with matplotlib: ~4 s for 100 points, in one process,
after the last point. Meanwhile, while points run in worker processes (the default launcher's
``n_jobs``), the launching process only waits. This thread spends that wait importing
matplotlib and reading the per-case table of each child that has FINISHED, so the summary
starts with them in memory.

It is only a cache: a child it did not get to is read at the end as before, and what it holds
is what :func:`.runs.load_per_case` returns for the same file (a FINISHED run's artifacts are
complete and not written again). The runs it found (params, metrics, tags) are kept too, so the
summary's own search loads only the children it did not get to. Before any ``os.fork`` of this
process it stops and waits for its current read (a forked child must not inherit a lock this
thread holds); it resumes after.
"""

from __future__ import annotations

import os
import threading
from typing import Any

_ACTIVE: list[PerCasePrefetch] = []


class PerCasePrefetch:
    # Each poll is an MLflow search that also loads the new runs' params, metrics and tags: at 2 s
    # the polls of a 100-point sweep took ~2 s of CPU from the two workers on 2 cores. At 5 s the
    # summary reads at most the last ~5 s of points itself (~8 ms each).
    poll_s = 5.0

    def __init__(self, parent_id: str, experiment_id: str) -> None:
        self.parent_id = parent_id
        self.experiment_id = experiment_id
        self._frames: dict[str, Any] = {}
        self._runs: dict[str, Any] = {}  # run id -> RunView (without its per-case table)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._since_ms = 0
        self._plotting_ready = False
        self.forks_waited = 0  # forks of this process that stopped the thread first

    # -- control ---------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="sweep-prefetch", daemon=True)
        self._thread.start()
        if self not in _ACTIVE:
            _ACTIVE.append(self)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._thread = None
        if self in _ACTIVE:
            _ACTIVE.remove(self)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def frames(self) -> dict[str, Any]:
        """Run id -> per-case table (None: the run logged none), for the children read so far."""
        with self._lock:
            return dict(self._frames)

    def runs(self) -> list[Any]:
        """The FINISHED children read so far, as :class:`.runs.RunView` without per-case tables
        (the summary then searches only the others: :func:`.runs.sweep_children`)."""
        with self._lock:
            return list(self._runs.values())

    # -- the thread --------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            if not self._plotting_ready:
                from .plots import pyplot

                pyplot()  # the import the summary's plots pay for (~2 s)
                self._plotting_ready = True
            from mlflow.tracking import MlflowClient

            client = MlflowClient()
            while not self._stop.wait(self.poll_s):
                self._poll(client)
        except Exception:  # noqa: BLE001 - a cache: the summary reads whatever is missing itself
            return

    def _poll(self, client) -> None:
        from .runs import load_per_case, view

        found = client.search_runs(
            [self.experiment_id], max_results=1000,
            filter_string=(f"tags.mlflow.parentRunId = '{self.parent_id}' AND attributes.status = 'FINISHED'"
                           f" AND attributes.end_time >= {self._since_ms}"))
        for run in found:
            if self._stop.is_set():
                return
            run_id = run.info.run_id
            with self._lock:
                if run_id in self._frames:
                    continue
            frame = load_per_case(run_id, client, run.info.artifact_uri)
            with self._lock:
                self._frames[run_id] = frame
                self._runs[run_id] = view(run, client, per_case=False)
            # each run is loaded once; one that commits its end after a later-ending run was seen
            # is left to the summary, which reads whatever is missing
            self._since_ms = max(self._since_ms, run.info.end_time or 0)


def _pause_before_fork() -> None:
    for p in _ACTIVE:
        p._stop.set()
        if p._thread is not None:
            p._thread.join()
            p.forks_waited += 1


def _resume_after_fork_in_parent() -> None:
    for p in list(_ACTIVE):
        p.start()


def _forget_in_child() -> None:
    _ACTIVE.clear()  # the thread does not exist in a forked child


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_pause_before_fork, after_in_parent=_resume_after_fork_in_parent,
                        after_in_child=_forget_in_child)
