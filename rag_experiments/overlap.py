"""Run a single experiment's work in a forked child while this process imports the tracking stack.

Why (issue 44 item 8, "a warm `rag-exp run` spends under 3 s beyond its work"): a warm demo run
does about 1 s of work, then spends about 2 s importing MLflow (1.2-1.5 s), its SQL store (0.6-0.9
s) and matplotlib (0.3-0.45 s) before it can log. Those imports do not depend on the work, and the
machine has a second core. A thread cannot overlap them: imports and the evaluation both hold the
GIL (tried and reverted: eaf9efd). A forked child can: it runs the work on one core while this
process imports on the other, then sends the result back by pickle, and this process logs it.

Only where it is safe: Linux (``os.fork`` of a process with no other thread), a single run (not a
sweep point: the launchers have their own processes), MLflow logging on. ``RAG_EXP_OVERLAP=0``
turns it off. Whatever the child raises is raised here (``UserError`` stays one line); a child
that dies without a result is one line naming its exit status, never a silent empty run.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import traceback
from typing import Callable, TypeVar

T = TypeVar("T")

#: set to 0 to run the work in this process (the serial path)
ENV = "RAG_EXP_OVERLAP"


def can_fork() -> bool:
    """Linux, fork available, this process single-threaded, not switched off."""
    return (os.environ.get(ENV, "1") != "0" and sys.platform.startswith("linux") and hasattr(os, "fork")
            and threading.active_count() == 1)


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else an equivalent that does (a UserError keeps its class
    family and message; anything else becomes a RuntimeError carrying the child's traceback)."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any pickling failure: send text instead
        from .errors import UserError

        if isinstance(exc, UserError):
            return UserError(str(exc))
        text = "".join(traceback.format_exception(exc))
        return RuntimeError(f"{type(exc).__name__} in the experiment's process:\n{text}")


def _child(work: Callable[[], T], write_fd: int) -> None:
    """In the forked child: do the work, send ("ok", result) or ("raise", exception), exit at once
    (os._exit: the parent's atexit handlers and open files are the parent's business)."""
    code = 0
    try:
        try:
            payload = ("ok", work())
        except BaseException as exc:  # noqa: BLE001 - every outcome goes back to the parent
            payload = ("raise", _portable(exc))
        try:
            data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - an unpicklable result: say so in the parent
            data = pickle.dumps(("raise", RuntimeError(f"the experiment's result could not be sent back to the "
                                                       f"logging process ({type(exc).__name__}: {exc}); "
                                                       f"run with {ENV}=0")))
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(data)
    except BaseException:  # noqa: BLE001 - a broken pipe (the parent is gone): nothing to report to
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def run_overlapped(work: Callable[[], T], warm: Callable[[], None]) -> T:
    """``work()``, run in a forked child while this process calls ``warm()`` (imports); the result
    or exception of ``work`` as if it had run here. Serial (``warm`` not called) where
    :func:`can_fork` says no."""
    if not can_fork():
        return work()
    sys.stdout.flush()
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(work, write_fd)  # never returns
    os.close(write_fd)
    try:
        try:
            warm()
        except Exception:  # noqa: BLE001 - a failed import shows again, with its message, when logging needs it
            pass
        with os.fdopen(read_fd, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(pid, 0)
    except BaseException:
        # Ctrl-C, SIGTERM or an error here: the child must not outlive this process
        try:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        raise
    if not data:
        if os.WIFSIGNALED(status):
            why = f"killed by signal {os.WTERMSIG(status)}"
        else:
            why = f"exit status {os.waitstatus_to_exitcode(status)}"
        raise RuntimeError(f"the experiment's process ended without a result ({why}); nothing was logged")
    kind, value = pickle.loads(data)
    if kind == "raise":
        raise value
    return value
