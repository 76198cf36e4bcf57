"""Sweep points in forked worker processes (the default launcher's ``n_jobs``).

The launching process has run a sweep's first point, so its memos are warm (the embedder, the
golden set and corpus checks, every leg's candidate lists). ``os.fork()`` gives each worker a
copy of that memory for free; a spawned process would start cold (~10 s here). Workers take
points from the parent one at a time (a slow point never holds back the others), run each with
Hydra's ``run_job`` and send the ``JobReturn`` back over a pipe.

What a child must not use from its parent, and what it does instead (:func:`after_fork`):

* SQLAlchemy engines (MLflow's sqlite or SQL tracking store, cached per store URI): SQLite
  forbids using a connection across fork. Each engine is ``dispose(close=False)``-ed, the
  documented way: the child opens its own connections, the parent's stay open for the parent.
* Embedders memoised per process (ONNX Runtime sessions, API clients):
  :func:`rag_experiments.embedding.base.forget_after_fork`; the child loads its own if it needs one.
* PostgreSQL: every point opens and closes its own connection (``run_experiment``); the
  launching process keeps none open between points. Any inherited open psycopg connection is kept
  referenced in the child, never used nor closed (closing it would end the parent's session).
* Objects dropped above are kept referenced until the child ends with ``os._exit`` (no
  destructors, no ``atexit``: the parent's handlers would close the sweep's parent run).
* stdin is ``/dev/null`` (two workers cannot share a prompt; the cost confirmation then fails with
  its "no terminal to ask" error, as in any non-interactive run) and stdout is line-buffered,
  so the lines of two workers never mix within a line.

A launching process killed with SIGKILL runs no ``finally``: nobody stops its workers, collects
their results or reads their output. A worker notices (:func:`_watch_parent`: Linux's parent-death
signal, and a check of its parent pid every :data:`PARENT_POLL_S` elsewhere; a result it cannot
send) and ends at once with one line on stderr, ``sweep parent gone; stopping``, instead of
finishing its point and dying of ``BrokenPipeError`` tracebacks. A run it had open in MLflow
stays RUNNING under its owner tags, and the next command that opens the store marks it KILLED,
as it does the sweep's parent run.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, Pipe, wait
from typing import Any

_KEEP: list[Any] = []  # in a child: what it inherited and must neither use nor destroy

#: how long workers get to exit after SIGTERM before SIGKILL (the parent is stopping)
TERM_GRACE_S = 5.0
#: how often a worker checks that its launching process is alive (where no parent-death signal exists)
PARENT_POLL_S = 0.2
#: the signal Linux sends a worker when its launching process dies (prctl PR_SET_PDEATHSIG)
PARENT_DEATH_SIGNAL = signal.SIGUSR2
_PR_SET_PDEATHSIG = 1


def fork_available() -> bool:
    return hasattr(os, "fork") and sys.platform != "win32"


def resolve_n_jobs(value: int | str | None) -> int:
    """``auto``: the CPUs this process may use, at most 2 (the count measured on this project's
    2-core machine; more may help on more cores but is untested: set a number). 1: serial."""
    if value is None or str(value).strip().lower() == "auto":
        try:
            cpus = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cpus = os.cpu_count() or 1
        return max(1, min(cpus, 2))
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"hydra.launcher.n_jobs: a number of workers or 'auto', got {value!r}") from None
    if n < 1:
        raise ValueError(f"hydra.launcher.n_jobs: must be >= 1, got {n}")
    return n


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker (set as the re-raised exception's cause;
    shown as ``concurrent.futures`` shows a process pool's)."""

    def __str__(self) -> str:
        return f'\n"""\n{self.args[0] if self.args else ""}"""'


class WorkerError(RuntimeError):
    """A worker's exception that cannot be sent back as itself (not picklable), or a lost point."""


def portable_exception(exc: BaseException) -> BaseException:
    """``exc`` if it survives a pickle round trip as the same type and message, else a WorkerError
    that names its type and message."""
    with contextlib.suppress(Exception):  # any pickling failure: send a description instead
        clone = pickle.loads(pickle.dumps(exc))
        if type(clone) is type(exc) and str(clone) == str(exc):
            return exc
    return WorkerError(f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}")


def with_remote_traceback(exc: BaseException, tb_text: str | None) -> BaseException:
    """``exc`` as a failed job's return value: its worker traceback as its cause, and a traceback
    through a frame named ``run_job``. Hydra's error report (``run_and_report``) prints a failed
    job's exception from below ``run_job`` with the ``HYDRA_FULL_ERROR`` hint; an exception
    without that frame gets the whole traceback of this process instead (Hydra's frames only)."""
    if tb_text:
        exc.__cause__ = RemoteTraceback(tb_text)

    def run_job() -> None:
        _raise(exc)

    with contextlib.suppress(BaseException):  # raised only to give it that traceback
        run_job()
    return exc


def _raise(exc: BaseException) -> None:
    raise exc


def job_traceback(exc: BaseException) -> str:
    """A failed task's traceback text from below ``run_job`` (the part Hydra prints in serial)."""
    tb = exc.__traceback__
    return "".join(traceback.format_exception(type(exc), exc, tb.tb_next if tb is not None else None))


def after_fork() -> None:
    """In a new worker: the resets listed in the module docstring."""
    from rag_experiments.embedding.base import forget_after_fork

    forget_after_fork()
    engine_type = _loaded_type("sqlalchemy.engine", "Engine")
    pg_type = _loaded_type("psycopg", "Connection")
    # the parent froze its heap before forking (see _freeze_before_fork); gc.get_objects() does not
    # list frozen objects, so they are unfrozen for the scan and frozen again after it
    gc.unfreeze()
    objects = gc.get_objects()
    gc.freeze()
    for obj in objects:  # one pass (~0.1 s): MLflow caches its stores in several places
        # type(), not isinstance(): isinstance asks a weakref proxy for its __class__, and a proxy
        # whose referent is gone raises ReferenceError (a worker died of it in a full test run)
        cls = type(obj)
        if engine_type is not None and issubclass(cls, engine_type):
            _KEEP.append(obj.pool)  # the parent's pooled connections: kept, not closed
            obj.dispose(close=False)
        elif pg_type is not None and issubclass(cls, pg_type) and not obj.closed:
            _KEEP.append(obj)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - lives as long as the process
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(line_buffering=True)


def _loaded_type(module: str, name: str) -> type | None:
    """A class of a library this process has already imported (else nothing of it can exist)."""
    mod = sys.modules.get(module)
    return getattr(mod, name, None) if mod is not None else None


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed stream: nothing to flush
            stream.flush()


@dataclass
class _Worker:
    pid: int
    conn: Connection
    job: int | None = None  # the offset it is running
    alive: bool = True
    status: str = ""


def _parent_gone(parent: int) -> bool:
    """The launching process ``parent`` has died (this worker was handed to another parent)."""
    return os.getppid() != parent


_STOPPING = threading.Lock()  # the death signal and the watch thread can both see the parent gone


def _stop_parent_gone() -> None:
    """End this worker now, saying so in one line (stderr may be gone too: then silently). No
    ``finally``, no flush of buffered output: whoever would read it is gone. Called from the
    signal handler, the watch thread and the main loop; only the first says the line (two of them
    raced and printed it twice), the others wait for its exit (or end silently after 5 s)."""
    if not _STOPPING.acquire(blocking=False):
        time.sleep(5.0)
        os._exit(1)
    with contextlib.suppress(OSError):
        os.write(2, f"sweep parent gone; stopping (worker pid {os.getpid()})\n".encode())
    os._exit(1)


def _watch_parent(parent: int) -> None:
    """Stop this worker as soon as ``parent`` dies: Linux signals it (``PR_SET_PDEATHSIG``), and a
    daemon thread checks the parent pid every :data:`PARENT_POLL_S` (other systems; and a
    main thread busy in C code runs no signal handler)."""
    def on_signal(signum, frame):  # noqa: ARG001
        if _parent_gone(parent):
            _stop_parent_gone()

    def poll() -> None:
        while not _parent_gone(parent):
            time.sleep(PARENT_POLL_S)
        _stop_parent_gone()

    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):  # no libc prctl: the thread alone
            import ctypes

            signal.signal(PARENT_DEATH_SIGNAL, on_signal)
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(PARENT_DEATH_SIGNAL), 0, 0, 0)
    threading.Thread(target=poll, name="sweep-parent-watch", daemon=True).start()
    if _parent_gone(parent):  # died before the watch was set up
        _stop_parent_gone()


def _child(conn: Connection, run_point: Callable[[int], Any], parent: int) -> None:
    """A worker's whole life: take offsets until told to stop (None) or the parent is gone."""
    code = 0
    try:
        _watch_parent(parent)
        after_fork()
        while True:
            try:
                offset = conn.recv()
            except (EOFError, OSError):  # the parent is gone
                break
            if offset is None:
                break
            try:
                message = ("done", offset, run_point(offset))
            except Exception as exc:  # noqa: BLE001 - raised outside the task (run_job catches the task's)
                message = ("raised", offset, (portable_exception(exc), traceback.format_exc()))
            try:
                blob = pickle.dumps(message)
            except Exception as exc:  # noqa: BLE001
                error = WorkerError(f"sweep point result could not be sent back: {type(exc).__name__}: {exc}")
                blob = pickle.dumps(("raised", offset, (error, traceback.format_exc())))
            try:
                conn.send_bytes(blob)
            except OSError:  # BrokenPipeError: nobody to send it to
                if _parent_gone(parent):
                    _stop_parent_gone()
                raise
    except KeyboardInterrupt:
        code = 130
    except SystemExit as exc:  # SIGTERM (install_sigterm_handler): 128 + 15
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - a bug here: say it, exit non-zero, the parent reports the point
        if _parent_gone(parent):  # e.g. an output nobody reads any more: not a bug to report
            _stop_parent_gone()
        traceback.print_exc()
        code = 1
    finally:
        _flush_std()
        os._exit(code)


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"killed by {name}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def _freeze_before_fork() -> None:
    """Move every object alive now out of the garbage collector's reach, as Python's ``gc.freeze``
    documentation advises before a fork without exec.

    The first point left the launching process a big heap (memoised candidate lists, golden set,
    corpus). Unfrozen, every full collection walks it again: in each worker as its points allocate,
    and in this process while it reads the finished points (measured: ~9.7 s of collector CPU in
    the launching process over a 100-point sweep, ~1.9 s of it in the collection at interpreter
    exit). Frozen objects are never collected; ones that are later freed by reference count still
    are, so only reference cycles among what was alive at the fork outlive their use, and the
    launching process of a sweep ends soon after. Garbage already unreachable is collected first.
    """
    gc.collect()
    gc.freeze()


def run_in_workers(offsets: Sequence[int], n_workers: int, run_point: Callable[[int], Any],
                   on_start: Callable[[int], None], on_result: Callable[[int, Any], None],
                   on_lost: Callable[[int, str], None]) -> BaseException | None:
    """Run ``run_point(offset)`` for every offset in ``n_workers`` forked processes.

    ``on_start(offset)`` is called in this process as a point is handed out; ``on_result(offset,
    value)`` / ``on_lost(offset, why)`` in offset order, as soon as every earlier point has its
    own. Returns the first exception a worker raised outside a task (the caller raises it after
    the points already handed out have finished; no new point starts after it), else None.
    """
    queue = deque(offsets)
    order = list(offsets)
    done: dict[int, tuple[str, Any]] = {}
    emitted = 0
    raised: BaseException | None = None
    workers: list[_Worker] = []

    def emit() -> None:
        nonlocal emitted
        while emitted < len(order) and order[emitted] in done:
            kind, value = done.pop(order[emitted])
            (on_result if kind == "result" else on_lost)(order[emitted], value)
            emitted += 1

    def hand_out(w: _Worker) -> None:
        if queue and raised is None:
            w.job = queue.popleft()
            on_start(w.job)
            try:
                w.conn.send(w.job)
            except OSError:  # it just died: wait() sees its pipe closed and reports the point lost
                pass
        else:
            w.job = None
            try:
                w.conn.send(None)
            except OSError:
                pass

    def reap(w: _Worker, block: bool) -> bool:
        if not w.alive:
            return True
        pid, status = os.waitpid(w.pid, 0 if block else os.WNOHANG)
        if pid == 0:
            return False
        w.alive, w.status = False, _describe_status(status)
        return True

    # TOKENIZERS_PARALLELISM unset would make the tokenizers library print a fork warning in
    # every worker; "false" in the children only (the launching process keeps its own setting)
    tokenizers_env = os.environ.get("TOKENIZERS_PARALLELISM")
    _freeze_before_fork()
    finished = False
    try:
        for _ in range(min(n_workers, len(order))):
            parent_end, child_end = Pipe(duplex=True)
            _flush_std()  # or the children would print the parent's buffered output again
            if tokenizers_env is None:
                os.environ["TOKENIZERS_PARALLELISM"] = "false"
            launcher = os.getpid()
            pid = os.fork()
            if pid == 0:
                parent_end.close()
                for other in workers:
                    other.conn.close()
                _child(child_end, run_point, launcher)  # never returns
            if tokenizers_env is None:
                del os.environ["TOKENIZERS_PARALLELISM"]
            child_end.close()
            workers.append(_Worker(pid, parent_end))
        for w in workers:
            hand_out(w)
        while any(w.job is not None for w in workers):
            busy = {w.conn: w for w in workers if w.job is not None}
            for conn in wait(list(busy)):
                w = busy[conn]
                try:
                    kind, offset, payload = pickle.loads(conn.recv_bytes())
                except (EOFError, OSError):  # the worker died without an answer
                    reap(w, block=True)
                    done[w.job] = ("lost", f"its worker process (pid {w.pid}) {w.status}")
                    w.job = None
                    continue
                if kind == "done":
                    done[offset] = ("result", payload)
                elif raised is None:  # not a task's failure: no run_job frame (see with_remote_traceback)
                    raised, tb_text = payload
                    raised.__cause__ = RemoteTraceback(tb_text)
                hand_out(w)
            emit()
        if queue and raised is None:  # every worker died before these started
            for offset in queue:
                done[offset] = ("lost", "not started: every worker process had died")
            queue.clear()
        emit()
        finished = True
    finally:
        if not finished:  # Ctrl-C, SIGTERM or an error in this process: stop the workers
            for w in workers:
                if w.alive:
                    try:
                        os.kill(w.pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            deadline = time.monotonic() + TERM_GRACE_S
            while any(not reap(w, block=False) for w in workers) and time.monotonic() < deadline:
                time.sleep(0.05)
            for w in workers:
                if w.alive:
                    os.kill(w.pid, signal.SIGKILL)
        for w in workers:
            reap(w, block=True)
            w.conn.close()
    return raised
