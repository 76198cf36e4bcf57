"""Which process owns a RUNNING run, and closing the runs whose owner died.

A kill -9 (or an OOM kill, a lost terminal) skips every ``finally`` and ``atexit``: the run it
had open stays RUNNING in MLflow forever, and the next ``compare --last-sweep`` would pick that
dead sweep. So every run this package opens carries its owner as tags (host, pid and the
process's start time: a pid alone can be reused by an unrelated process), and every command
that opens the store first marks the RUNNING runs whose owner is gone as KILLED (MLflow's own
``RunStatus.KILLED``, through ``MlflowClient.set_terminated``).

Only runs owned by *this* host are judged: a pid means nothing on another machine (a sweep
launched there may be alive and well), so such runs are left alone. Runs without owner tags
(logged before these tags existed, or by other tools) are left alone too: nothing says who
owns them.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass

import psutil

OWNER_HOST = "rag_exp.owner.host"
OWNER_PID = "rag_exp.owner.pid"
OWNER_STARTED = "rag_exp.owner.started"  # psutil create_time(), seconds since the epoch
KILLED_REASON = "rag_exp.killed_reason"
# create_time() is derived from the boot time and clock ticks; the same process reads back the
# same value to well under this. A new process reusing the pid starts later than that.
_START_TOLERANCE_S = 0.5


def _host() -> str:
    return socket.gethostname()


def _create_time(pid: int) -> float | None:
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:  # killed, not yet waited for by its parent: gone
            return None
        return proc.create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:  # exists, owned by another user: alive, start time unknown
        return float("nan")


def owner_tags(pid: int | None = None) -> dict[str, str]:
    """The tags naming the process that owns a run being opened (default: this process)."""
    pid = os.getpid() if pid is None else pid
    started = _create_time(pid)
    return {OWNER_HOST: _host(), OWNER_PID: str(pid),
            OWNER_STARTED: "" if started is None else f"{started:.3f}"}


def owner_gone(tags: dict[str, str]) -> str | None:
    """Why the owner of a run with these tags is gone, or None (alive, unknown, or another host)."""
    host, pid = tags.get(OWNER_HOST), tags.get(OWNER_PID)
    if not host or not pid or not pid.isdigit():
        return None  # no owner recorded: cannot tell
    if host != _host():
        return None  # another machine's pid: not ours to judge (its sweep may still be running)
    started = _create_time(int(pid))
    if started is None:
        return f"its process (pid {pid} on {host}) is gone"
    recorded = tags.get(OWNER_STARTED, "")
    try:
        recorded_t = float(recorded)
    except ValueError:
        return None
    if started == started and abs(started - recorded_t) > _START_TOLERANCE_S:  # NaN: cannot tell
        return (f"its process (pid {pid} on {host}) is gone; the pid now belongs to a process started "
                f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(started))}")
    return None


@dataclass(frozen=True)
class Reaped:
    run_id: str
    name: str
    reason: str


_REAPED_STORES: set[str] = set()


def reap_dead_runs(c, uri: str, *, once: bool = True, quiet: bool = False) -> list[Reaped]:
    """Mark this host's RUNNING runs whose owner is gone as KILLED; say so on stderr.

    Runs once per store and process by default (every command calls it when it opens the store).
    """
    if once and uri in _REAPED_STORES:
        return []
    _REAPED_STORES.add(uri)
    exp_ids = [e.experiment_id for e in c.search_experiments()]
    if not exp_ids:
        return []
    reaped = []
    for run in c.search_runs(exp_ids, filter_string="attributes.status = 'RUNNING'", max_results=5000):
        tags = dict(run.data.tags)
        reason = owner_gone(tags)
        if reason is None:
            continue
        c.set_tag(run.info.run_id, KILLED_REASON, reason)
        c.set_terminated(run.info.run_id, status="KILLED")
        reaped.append(Reaped(run.info.run_id, run.info.run_name or "", reason))
    if reaped and not quiet:
        for r in reaped:
            print(f"note: run {r.run_id} ({r.name}) was RUNNING but {r.reason}: marked KILLED", file=sys.stderr)
    return reaped
