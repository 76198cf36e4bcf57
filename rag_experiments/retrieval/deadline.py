"""A Python target's call with a deadline (``retrieval.external.deadline_s``).

The call runs in a daemon worker thread of its own and the caller waits at most the deadline.
A thread cannot be stopped from outside, so a call past its deadline is abandoned: the run stops
with one line naming the system and the limit (the caller adds the query), and the stuck worker,
a daemon, cannot hold the process at exit (a ``ThreadPoolExecutor`` worker would: its threads are
joined when the interpreter ends, so a target sleeping 60 s held the run 60 s after its end).
The next call, if any (a served model), gets a new worker. Calls are made one at a time, in
one thread, so a target that keeps per-thread state (a sqlite3 connection) sees one thread.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable

from .passages import ExternalResultError


class Deadlined:
    """``fn`` called in a worker thread, each call waited for at most ``seconds``."""

    def __init__(self, fn: Callable[..., Any], seconds: float, name: str) -> None:
        self.fn, self.seconds, self.name = fn, seconds, name
        self._jobs: queue.SimpleQueue | None = None
        self._lock = threading.Lock()

    def _work(self, jobs: queue.SimpleQueue) -> None:
        while True:
            future, args, kwargs = jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(self.fn(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, who reports it
                future.set_exception(exc)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            if self._jobs is None:
                self._jobs = queue.SimpleQueue()
                threading.Thread(target=self._work, args=(self._jobs,), daemon=True,
                                 name=f"retrieval.external {self.name}"[:60]).start()
            jobs = self._jobs
        future: Future = Future()
        jobs.put((future, args, kwargs))
        try:
            return future.result(timeout=self.seconds)
        except TimeoutError:
            if future.done():  # the system's own TimeoutError, not the deadline
                raise
            with self._lock:
                if self._jobs is jobs:  # that worker is stuck in the call: a later call needs another
                    self._jobs = None
            raise ExternalResultError(
                f"no answer within retrieval.external.deadline_s={self.seconds:g} s (the call was abandoned)",
                hint="make the system faster, or raise retrieval.external.deadline_s") from None
